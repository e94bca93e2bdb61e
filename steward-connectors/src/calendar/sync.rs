//! Reconciling calendar sources into `calendar.db`: a vdir (each collection, each `.ics` item
//! tagged by its size and modification time, as vdirsyncer's filesystem storage does — an
//! unchanged item is not read again) or one `.ics` file (one collection of one item).

use std::path::Path;

use steward_core::calendar::store::{
    CalendarReport, CalendarStore, CalendarStoreError, CollectionSync, ItemUpdate,
};

use super::{SourceError, ics, read_ics};

fn etag(meta: &std::fs::Metadata) -> String {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("{}-{mtime}", meta.len())
}

/// The events of one item, or `None` when the item as a whole cannot be read (unreadable,
/// too large, not iCalendar): the stored events and tag then stay as they were, so a
/// transient failure never empties a calendar and the item is tried again next run.
fn read_item(
    path: &Path,
    size: u64,
    errors: &mut Vec<SourceError>,
) -> Option<Vec<steward_core::calendar::Event>> {
    let fail = |code: &'static str, message: String| SourceError {
        path: path.to_owned(),
        uid: None,
        code,
        message,
    };
    if size > ics::MAX_ICS_BYTES as u64 {
        errors.push(fail("ICS_TOO_LARGE", format!("larger than {} bytes", ics::MAX_ICS_BYTES)));
        return None;
    }
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            errors.push(fail("CALENDAR_SOURCE_UNREADABLE", e.to_string()));
            return None;
        }
    };
    match read_ics(&String::from_utf8_lossy(&bytes)) {
        Ok(r) => {
            errors.extend(r.errors.into_iter().map(|e| SourceError {
                path: path.to_owned(),
                uid: e.uid,
                code: e.code,
                message: e.message,
            }));
            Some(r.events)
        }
        Err(e) => {
            errors.push(fail(steward_core::StewardError::code(&e), e.to_string()));
            None
        }
    }
}

/// One collection directory (or a single file as a collection of one item) reconciled.
fn collection(
    store: &CalendarStore,
    account: &str,
    id: &str,
    items: &[std::path::PathBuf],
    meta_dir: Option<&Path>,
    person: chrono_tz::Tz,
    (report, errors): (&mut CalendarReport, &mut Vec<SourceError>),
) -> Result<(), CalendarStoreError> {
    let known = store.known_items(account, id)?;
    let mut sync = CollectionSync {
        collection: id.to_owned(),
        name: meta_dir.and_then(|d| super::meta(d, "displayname")),
        color: meta_dir.and_then(|d| super::meta(d, "color")),
        ..CollectionSync::default()
    };
    for path in items {
        let href = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let Ok(meta) = std::fs::metadata(path) else { continue };
        let tag = etag(&meta);
        sync.present.push(href.clone());
        if known.get(&href) == Some(&tag) {
            continue;
        }
        if let Some(events) = read_item(path, meta.len(), errors) {
            sync.updates.push(ItemUpdate { href, etag: tag, events });
        }
    }
    let now = chrono::Utc::now().timestamp();
    store.apply(account, &sync, person, now, report)
}

/// Reconciles every collection of the vdir `root` (a root holding `.ics` items is one
/// collection) into `store` under `account`; what could not be read is returned with the
/// report, and never stops the run.
pub fn sync_vdir(
    store: &CalendarStore,
    account: &str,
    root: &Path,
    person: chrono_tz::Tz,
) -> Result<(CalendarReport, Vec<SourceError>), CalendarStoreError> {
    let mut report = CalendarReport { account: account.to_owned(), ..CalendarReport::default() };
    let mut errors = Vec::new();
    let dirs = match super::collections(root) {
        Ok(d) => d,
        Err(e) => {
            errors.push(SourceError {
                path: root.to_owned(),
                uid: None,
                code: "CALENDAR_SOURCE_UNREADABLE",
                message: e.to_string(),
            });
            return Ok((report, errors));
        }
    };
    for dir in dirs {
        let id = dir.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        // A collection that cannot be listed is left as it was (never read as emptied).
        let Some(items) = super::items(&dir, &mut errors) else { continue };
        collection(store, account, &id, &items, Some(&dir), person, (&mut report, &mut errors))?;
    }
    Ok((report, errors))
}

/// Reconciles one `.ics` file (an export or a subscription) as a collection of one item.
pub fn sync_ics_file(
    store: &CalendarStore,
    account: &str,
    file: &Path,
    person: chrono_tz::Tz,
) -> Result<(CalendarReport, Vec<SourceError>), CalendarStoreError> {
    let mut report = CalendarReport { account: account.to_owned(), ..CalendarReport::default() };
    let mut errors = Vec::new();
    let id = file.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    if !file.is_file() {
        // Unreadable now is not emptied: the stored events stay until the file says otherwise.
        errors.push(SourceError {
            path: file.to_owned(),
            uid: None,
            code: "CALENDAR_SOURCE_UNREADABLE",
            message: "not a readable file".to_owned(),
        });
        return Ok((report, errors));
    }
    let items = vec![file.to_owned()];
    collection(store, account, &id, &items, None, person, (&mut report, &mut errors))?;
    Ok((report, errors))
}
