//! Reconciling calendar sources into `calendar.db`: a vdir (each collection, each `.ics` item
//! tagged by its size and modification time, as vdirsyncer's filesystem storage does — an
//! unchanged item is not read again), one `.ics` file (one collection of one item), or a CalDAV
//! account (each calendar listed by ETag or `sync-collection`; only new and changed items are
//! downloaded).

use std::path::Path;

use steward_core::calendar::store::{
    CalendarReport, CalendarStore, CalendarStoreError, CollectionSync, ItemUpdate,
};

use super::{SourceError, ics, read_ics};
use crate::dav::{DavClient, DavError, DavKind};

pub(crate) fn etag(meta: &std::fs::Metadata) -> String {
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
    parse_item(path, &String::from_utf8_lossy(&bytes), errors)
}

/// The events of an item's text; its errors are reported against `path` (a file or a URL).
fn parse_item(
    path: &Path,
    text: &str,
    errors: &mut Vec<SourceError>,
) -> Option<Vec<steward_core::calendar::Event>> {
    match read_ics(text) {
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
            errors.push(SourceError {
                path: path.to_owned(),
                uid: None,
                code: steward_core::StewardError::code(&e),
                message: e.to_string(),
            });
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
    let mut listed = Vec::new();
    for dir in dirs {
        let id = dir.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        listed.push(id.clone());
        // A collection that cannot be listed is left as it was (never read as emptied).
        let Some(items) = super::items(&dir, &mut errors) else { continue };
        collection(store, account, &id, &items, Some(&dir), person, (&mut report, &mut errors))?;
    }
    // A calendar folder that is gone takes its events with it; a root that lists nothing at
    // all (an unmounted share) is no evidence that every calendar went.
    if !listed.is_empty() {
        store.retire_unlisted(account, &listed, chrono::Utc::now().timestamp(), &mut report)?;
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

fn dav_error(client: &DavClient, href: &str, e: &DavError) -> SourceError {
    SourceError {
        path: client.url_of(href).into(),
        uid: None,
        code: steward_core::StewardError::code(e),
        message: e.to_string(),
    }
}

/// Reconciles every calendar of the CalDAV account behind `client` into `store` under
/// `account`: discovery, then per calendar a listing (what changed since the stored sync token
/// where the calendar offers `sync-collection`, else every item's ETag) and a download of the
/// items whose ETag is new. A calendar that cannot be listed, or an item that cannot be read,
/// is reported and left as stored; a sync token is kept only when every change it covers was
/// downloaded, so nothing is skipped next time (an item downloaded but unreadable waits for its
/// next change).
pub fn sync_caldav(
    store: &CalendarStore,
    account: &str,
    client: &DavClient,
    person: chrono_tz::Tz,
) -> Result<(CalendarReport, Vec<SourceError>), CalendarStoreError> {
    let mut report = CalendarReport { account: account.to_owned(), ..CalendarReport::default() };
    let mut errors = Vec::new();
    let calendars = match client.discover(DavKind::Calendars) {
        Ok(c) => c,
        Err(e) => {
            errors.push(dav_error(client, "/", &e));
            return Ok((report, errors));
        }
    };
    // Every calendar listed (none held back by the bound, and not an empty answer, which may be
    // a server's bad moment): one no longer there is retired.
    let whole_listing = !calendars.is_empty() && calendars.len() < crate::dav::MAX_DAV_COLLECTIONS;
    let listed: Vec<String> = calendars.iter().map(|c| c.id.clone()).collect();
    for cal in calendars {
        let known = store.known_items(account, &cal.id)?;
        let token = store.sync_token(account, &cal.id)?;
        let listing = match client.list(&cal, token.as_deref()) {
            Ok(l) => l,
            Err(e) => {
                errors.push(dav_error(client, &cal.href, &e));
                continue;
            }
        };
        let mut present: std::collections::BTreeSet<String> = if listing.complete {
            std::collections::BTreeSet::new()
        } else {
            known.keys().filter(|k| !listing.deleted.contains(k)).cloned().collect()
        };
        present.extend(listing.items.iter().map(|(n, _)| n.clone()));
        let wanted: Vec<String> = listing
            .items
            .iter()
            .filter(|(n, etag)| known.get(n) != Some(etag))
            .map(|(n, _)| n.clone())
            .collect();
        // A listing that left items out keeps the old token: they come again.
        let mut whole = !listing.partial;
        if listing.partial {
            errors.push(SourceError {
                path: client.url_of(&cal.href).into(),
                uid: None,
                code: "DAV_PARTIAL_LISTING",
                message: "some items could not be listed; the rest were read".to_owned(),
            });
        }
        let mut items = Vec::new();
        match client.fetch(DavKind::Calendars, &cal, &wanted) {
            Err(e) => {
                errors.push(dav_error(client, &cal.href, &e));
                whole = false;
            }
            Ok(got) => {
                let fetched: std::collections::BTreeSet<&String> =
                    got.iter().map(|r| r.as_ref().map_or_else(|(n, _)| n, |f| &f.name)).collect();
                whole &= wanted.iter().all(|n| fetched.contains(n));
                for r in got {
                    match r {
                        // An item that cannot be read is reported and keeps what was stored;
                        // it is not asked for again until its ETag changes.
                        Ok(f) => items.push(CalendarItem {
                            place: client.url_of(&format!("{}{}", cal.href, f.name)).into(),
                            href: f.name,
                            etag: f.etag,
                            text: f.data,
                        }),
                        Err((name, e)) => {
                            errors.push(dav_error(client, &format!("{}{name}", cal.href), &e));
                            whole = false;
                        }
                    }
                }
            }
        }
        let collection = Collection {
            id: &cal.id,
            name: cal.name.clone(),
            color: cal.color.clone(),
            present: present.into_iter().collect(),
            items,
            // A change not downloaded must come again: keep the old token (or none) then.
            sync_token: if whole { listing.token } else { token },
        };
        sync_items(store, account, collection, person, (&mut report, &mut errors))?;
    }
    if whole_listing {
        store.retire_unlisted(account, &listed, chrono::Utc::now().timestamp(), &mut report)?;
    }
    Ok((report, errors))
}

/// The events of one item's text (downloaded, or handed over by the launcher), errors reported
/// against `path` (see [`read_item`]).
fn read_text_item(
    path: &Path,
    data: &str,
    errors: &mut Vec<SourceError>,
) -> Option<Vec<steward_core::calendar::Event>> {
    if data.len() > ics::MAX_ICS_BYTES {
        errors.push(SourceError {
            path: path.to_owned(),
            uid: None,
            code: "ICS_TOO_LARGE",
            message: format!("larger than {} bytes", ics::MAX_ICS_BYTES),
        });
        return None;
    }
    parse_item(path, data, errors)
}

/// An item's text as a source hands it over.
#[derive(Debug, Clone)]
pub(crate) struct CalendarItem {
    /// Where errors say it is (a URL, `launcher:…`).
    pub place: std::path::PathBuf,
    /// Its name in the collection.
    pub href: String,
    /// Its tag.
    pub etag: String,
    /// Its iCalendar text.
    pub text: String,
}

/// A collection as a source lists it, with the texts of its new and changed items.
#[derive(Debug)]
pub(crate) struct Collection<'a> {
    pub id: &'a str,
    pub name: Option<String>,
    pub color: Option<String>,
    /// Every item it holds now.
    pub present: Vec<String>,
    /// The new and changed ones' texts.
    pub items: Vec<CalendarItem>,
    pub sync_token: Option<String>,
}

/// Reads `c`'s texts (an item that cannot be read is reported and keeps what was stored) and
/// applies the collection.
pub(crate) fn sync_items(
    store: &CalendarStore,
    account: &str,
    c: Collection<'_>,
    person: chrono_tz::Tz,
    (report, errors): (&mut CalendarReport, &mut Vec<SourceError>),
) -> Result<(), CalendarStoreError> {
    let mut updates = Vec::new();
    for i in c.items {
        if let Some(events) = read_text_item(&i.place, &i.text, errors) {
            updates.push(ItemUpdate { href: i.href, etag: i.etag, events });
        }
    }
    let sync = CollectionSync {
        collection: c.id.to_owned(),
        name: c.name,
        color: c.color,
        updates,
        present: c.present,
        sync_token: c.sync_token,
    };
    store.apply(account, &sync, person, chrono::Utc::now().timestamp(), report)
}
