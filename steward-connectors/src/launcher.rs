//! The launcher's own calendars and address books (EventKit and Contacts on macOS), fed through
//! the bindings into the same stores as every other source. The app lists its collections,
//! then each collection's items with a change tag (EventKit's last-modified date, a contact's
//! digest), and hands over the iCalendar or vCard text of the items asked for: only those
//! whose tag changed for calendars, every card of a book whose tags changed for contacts. The
//! text is read by the same parsers as a vdir's files; what cannot be read is a per-item error.
//!
//! A feed that lists no collection at all is taken as unreadable (the person withdrew the
//! app's access): nothing stored changes.

use std::collections::BTreeMap;

use steward_core::calendar::store::{CalendarReport, CalendarStore, CalendarStoreError};

use crate::{
    SourceError,
    calendar::sync::{CalendarItem, sync_items},
    contacts::{BooksRead, phone::Region},
};

/// Items asked for in one call to the feed.
/// Fixed (not a setting).
pub const FEED_BATCH: usize = 200;
/// Most collections read from a feed.
/// Fixed (not a setting).
pub const MAX_FED_COLLECTIONS: usize = 200;
/// Most items read from one fed collection.
/// Fixed (not a setting).
pub const MAX_FED_ITEMS: usize = 200_000;

/// Calendars or address books.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FedKind {
    /// Calendars (iCalendar text).
    Calendars,
    /// Address books (vCard text).
    Contacts,
}

/// A collection the launcher can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FedCollection {
    /// Its stable id (EventKit's calendar identifier, a container's identifier).
    pub id: String,
    /// Its name for people.
    pub name: Option<String>,
    /// Its color (`#rrggbb`).
    pub color: Option<String>,
}

/// An item's id and change tag.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FedTag {
    /// Its stable id in the collection.
    pub id: String,
    /// Changes whenever the item does.
    pub tag: String,
}

/// An item's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FedItem {
    /// Its id in the collection.
    pub id: String,
    /// Its change tag (as listed).
    pub tag: String,
    /// iCalendar (a VCALENDAR) or vCard text.
    pub text: String,
}

/// What the launcher implements (the bindings adapt their callback interface to it).
pub trait LauncherFeed {
    /// The collections of `kind` it can read now.
    fn collections(&self, kind: FedKind) -> Vec<FedCollection>;
    /// Every item of `collection` with its tag.
    fn tags(&self, kind: FedKind, collection: &str) -> Vec<FedTag>;
    /// The text of the items `ids` of `collection` (an item gone since is left out).
    fn items(&self, kind: FedKind, collection: &str, ids: &[String]) -> Vec<FedItem>;
}

/// A collection id usable in Steward's ids (`account/collection`): `%` and `/` escaped, so two
/// ids never become one.
fn clean_id(id: &str) -> String {
    id.replace('%', "%25").replace('/', "%2F")
}

fn place(kind: FedKind, collection: &str, id: &str) -> std::path::PathBuf {
    let k = match kind {
        FedKind::Calendars => "calendars",
        FedKind::Contacts => "contacts",
    };
    format!("launcher:{k}/{collection}/{id}").into()
}

fn collections(feed: &dyn LauncherFeed, kind: FedKind) -> Vec<FedCollection> {
    let mut c = feed.collections(kind);
    c.truncate(MAX_FED_COLLECTIONS);
    c
}

/// The texts of `ids` in batches of [`FEED_BATCH`].
fn texts(feed: &dyn LauncherFeed, kind: FedKind, collection: &str, ids: &[String]) -> Vec<FedItem> {
    ids.chunks(FEED_BATCH).flat_map(|batch| feed.items(kind, collection, batch)).collect()
}

/// Reconciles the launcher's calendars into `store` under `account`: per calendar, the items
/// whose tag changed are asked for and read; items no longer listed are soft-deleted.
pub fn sync_launcher_calendars(
    store: &CalendarStore,
    account: &str,
    feed: &dyn LauncherFeed,
    person: chrono_tz::Tz,
) -> Result<(CalendarReport, Vec<SourceError>), CalendarStoreError> {
    let mut report = CalendarReport { account: account.to_owned(), ..CalendarReport::default() };
    let mut errors = Vec::new();
    let cals = collections(feed, FedKind::Calendars);
    if cals.is_empty() {
        errors.push(SourceError {
            path: "launcher:calendars".into(),
            uid: None,
            code: "LAUNCHER_NOTHING_LISTED",
            message: "the app listed no calendar (is access to Calendars granted?)".to_owned(),
        });
        return Ok((report, errors));
    }
    for cal in cals {
        let id = clean_id(&cal.id);
        let known = store.known_items(account, &id)?;
        let mut tags = feed.tags(FedKind::Calendars, &cal.id);
        tags.truncate(MAX_FED_ITEMS);
        let wanted: Vec<String> = tags
            .iter()
            .filter(|t| known.get(&t.id) != Some(&t.tag))
            .map(|t| t.id.clone())
            .collect();
        let items: Vec<CalendarItem> = texts(feed, FedKind::Calendars, &cal.id, &wanted)
            .into_iter()
            .map(|i| CalendarItem {
                place: place(FedKind::Calendars, &id, &i.id),
                href: i.id,
                etag: i.tag,
                text: i.text,
            })
            .collect();
        let present: Vec<String> = tags.into_iter().map(|t| t.id).collect();
        let collection = crate::calendar::sync::Collection {
            id: &id,
            name: cal.name,
            color: cal.color,
            present,
            items,
            sync_token: None,
        };
        sync_items(store, account, collection, person, (&mut report, &mut errors))?;
    }
    Ok((report, errors))
}

/// A book's version from its tags (see [`crate::contacts::listing_version`]).
fn version(tags: &[FedTag]) -> String {
    let pairs: Vec<(String, String)> = tags.iter().map(|t| (t.id.clone(), t.tag.clone())).collect();
    crate::contacts::listing_version(&pairs)
}

/// The launcher's address books: a book whose tags have the version `versions` records is left
/// unread (its stored cards stay); any other is asked for whole and read.
pub fn read_launcher_books(
    feed: &dyn LauncherFeed,
    region: Option<Region>,
    versions: &BTreeMap<String, String>,
) -> BooksRead {
    let mut out = BooksRead::default();
    let books = collections(feed, FedKind::Contacts);
    if books.is_empty() {
        out.errors.push(SourceError {
            path: "launcher:contacts".into(),
            uid: None,
            code: "LAUNCHER_NOTHING_LISTED",
            message: "the app listed no address book (is access to Contacts granted?)".to_owned(),
        });
        return out;
    }
    out.listed = Some(books.iter().map(|b| clean_id(&b.id)).collect());
    for book in books {
        let id = clean_id(&book.id);
        let mut tags = feed.tags(FedKind::Contacts, &book.id);
        tags.truncate(MAX_FED_ITEMS);
        let v = version(&tags);
        if versions.get(&id) == Some(&v) {
            out.unchanged.push(id);
            continue;
        }
        let ids: Vec<String> = tags.iter().map(|t| t.id.clone()).collect();
        let got = texts(feed, FedKind::Contacts, &book.id, &ids);
        let mut whole = got.len() == ids.len();
        let mut cards = Vec::new();
        for item in got {
            let path = place(FedKind::Contacts, &id, &item.id);
            whole &= crate::contacts::add_text(
                &mut cards,
                &mut out.errors,
                &path,
                &item.text,
                &id,
                region,
            );
        }
        if whole {
            out.cards.extend(cards);
            out.versions.insert(id.clone(), v);
            out.books.push(id);
        }
    }
    out
}
