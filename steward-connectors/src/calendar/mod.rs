//! Calendar sources: single iCalendar files and vdir trees (what khal and vdirsyncer keep: a
//! root of collections, one item per `.ics` file, the collection's `displayname` and `color`
//! beside them; `.tmp` and extensionless files are not items).

pub mod demo;
pub mod ics;
pub mod sync;
mod vtimezone;
pub mod write;

use std::path::{Path, PathBuf};

use serde::Serialize;
use steward_core::calendar::Event;

pub use ics::{IcsError, IcsRead, ItemError, read_ics};

/// Most collections read from one vdir root.
/// Fixed (not a setting).
pub const MAX_COLLECTIONS: usize = 1_000;
/// Most items read from one collection.
/// Fixed (not a setting).
pub const MAX_COLLECTION_ITEMS: usize = 200_000;
/// Longest `displayname` or `color` read, bytes.
/// Fixed (not a setting).
const MAX_META_BYTES: u64 = 1_024;

pub use crate::SourceError;

/// A calendar: a vdir collection, or one `.ics` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarRead {
    /// Its id: the collection's directory name, or the file's name.
    pub id: String,
    /// Its name for people (`displayname`), when it has one.
    pub display_name: Option<String>,
    /// Its color (`color`), when it has one.
    pub color: Option<String>,
    /// Its events.
    pub events: Vec<Event>,
    /// What could not be read.
    pub errors: Vec<SourceError>,
}

fn io_error(path: &Path, e: &std::io::Error) -> SourceError {
    SourceError {
        path: path.to_owned(),
        uid: None,
        code: "CALENDAR_SOURCE_UNREADABLE",
        message: e.to_string(),
    }
}

fn add_file(cal: &mut CalendarRead, path: &Path) {
    let text = match std::fs::read(path) {
        Ok(bytes) if bytes.len() > ics::MAX_ICS_BYTES => {
            cal.errors.push(SourceError {
                path: path.to_owned(),
                uid: None,
                code: "ICS_TOO_LARGE",
                message: format!("larger than {} bytes", ics::MAX_ICS_BYTES),
            });
            return;
        }
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            cal.errors.push(io_error(path, &e));
            return;
        }
    };
    match read_ics(&text) {
        Ok(read) => {
            cal.events.extend(read.events);
            cal.errors.extend(read.errors.into_iter().map(|e| SourceError {
                path: path.to_owned(),
                uid: e.uid,
                code: e.code,
                message: e.message,
            }));
        }
        Err(e) => cal.errors.push(SourceError {
            path: path.to_owned(),
            uid: None,
            code: steward_core::StewardError::code(&e),
            message: e.to_string(),
        }),
    }
}

/// One `.ics` file as a calendar.
pub fn read_ics_file(path: &Path) -> CalendarRead {
    let id = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut cal = CalendarRead {
        id,
        display_name: None,
        color: None,
        events: Vec::new(),
        errors: Vec::new(),
    };
    add_file(&mut cal, path);
    cal
}

fn meta(dir: &Path, name: &str) -> Option<String> {
    use std::io::Read as _;
    let f = std::fs::File::open(dir.join(name)).ok()?;
    let mut s = String::new();
    f.take(MAX_META_BYTES).read_to_string(&mut s).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_owned())
}

/// The collection directories under the vdir `root`, by name (a root that itself holds `.ics`
/// items is one collection), at most [`MAX_COLLECTIONS`].
fn collections(root: &Path) -> Result<Vec<PathBuf>, std::io::Error> {
    crate::vdir_collections(root, "ics", MAX_COLLECTIONS)
}

/// The `.ics` items of a collection, by name (`.tmp` files, a write in progress, and the rest
/// are not items), at most [`MAX_COLLECTION_ITEMS`]; `None` when it cannot be listed.
fn items(dir: &Path, errors: &mut Vec<SourceError>) -> Option<Vec<PathBuf>> {
    let mut items: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(it) => it
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x.eq_ignore_ascii_case("ics")))
            .collect(),
        Err(e) => {
            errors.push(io_error(dir, &e));
            return None;
        }
    };
    items.sort();
    if items.len() > MAX_COLLECTION_ITEMS {
        errors.push(SourceError {
            path: dir.to_owned(),
            uid: None,
            code: "CALENDAR_TOO_MANY_ITEMS",
            message: format!("only the first {MAX_COLLECTION_ITEMS} items are read"),
        });
        items.truncate(MAX_COLLECTION_ITEMS);
    }
    Some(items)
}

/// Every collection under the vdir `root`, by name: a root that is itself a collection (it
/// holds `.ics` items) is read as one.
pub fn read_vdir(root: &Path) -> Result<Vec<CalendarRead>, std::io::Error> {
    let dirs = collections(root)?;
    let mut out = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let id = dir.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let mut cal = CalendarRead {
            id,
            display_name: meta(&dir, "displayname"),
            color: meta(&dir, "color"),
            events: Vec::new(),
            errors: Vec::new(),
        };
        for item in &items(&dir, &mut cal.errors).unwrap_or_default() {
            add_file(&mut cal, item);
        }
        out.push(cal);
    }
    Ok(out)
}

/// An agenda entry with the calendar it is in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CalendarOccurrence {
    /// The calendar's id.
    pub calendar: String,
    /// The occurrence.
    #[serde(flatten)]
    pub item: steward_core::calendar::AgendaItem,
}

/// The occurrences of every calendar in `[from, to)`, by start (see
/// [`steward_core::calendar::agenda`]), at most `max` in all.
pub fn agenda_of(
    calendars: &[CalendarRead],
    person: chrono_tz::Tz,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
    max: usize,
) -> Result<Vec<CalendarOccurrence>, steward_core::calendar::RecurError> {
    let mut out = Vec::new();
    for cal in calendars {
        for item in steward_core::calendar::agenda(&cal.events, person, from, to, max)? {
            out.push(CalendarOccurrence { calendar: cal.id.clone(), item });
        }
        if out.len() > max {
            return Err(steward_core::calendar::RecurError::TooMany { max });
        }
    }
    out.sort_by(|a, b| a.item.start.cmp(&b.item.start).then_with(|| a.item.uid.cmp(&b.item.uid)));
    Ok(out)
}

/// The busy time and free slots of every calendar in `[from, to)` (see
/// [`steward_core::calendar::free_busy`]): the calendars' events taken together, so a free slot
/// is free in all of them.
pub fn free_busy_of(
    calendars: &[CalendarRead],
    person: chrono_tz::Tz,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
    min_minutes: i64,
    hours: &steward_core::calendar::WorkingHours,
    me: &[String],
) -> Result<steward_core::calendar::FreeBusy, steward_core::calendar::RecurError> {
    let events: Vec<Event> = calendars.iter().flat_map(|c| c.events.iter().cloned()).collect();
    steward_core::calendar::free_busy(&events, person, from, to, min_minutes, hours, me)
}

pub use steward_core::calendar::system_zone;
