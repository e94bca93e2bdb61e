//! The launcher's own calendars and address books (EventKit and Contacts on macOS), fed through
//! the bindings into the same stores as every other source. The app lists its collections,
//! then each collection's items with a change tag (EventKit's last-modified date, a contact's
//! digest), and hands over the iCalendar or vCard text of the items asked for: only those
//! whose tag changed for calendars, every card of a book whose tags changed for contacts. The
//! text is read by the same parsers as a vdir's files; what cannot be read is a per-item error.
//!
//! A feed that lists no collection at all is taken as unreadable (the person withdrew the
//! app's access): nothing stored changes.

use std::collections::{BTreeMap, BTreeSet};

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
pub trait LauncherFeed: Sync {
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

/// The texts of `ids` in batches of [`FEED_BATCH`]: only items asked for, each once (an app
/// that answers with other items, or twice, is not believed for them).
fn texts(feed: &dyn LauncherFeed, kind: FedKind, collection: &str, ids: &[String]) -> Vec<FedItem> {
    let mut out = Vec::new();
    for batch in ids.chunks(FEED_BATCH) {
        let mut asked: BTreeSet<&str> = batch.iter().map(String::as_str).collect();
        out.extend(
            feed.items(kind, collection, batch).into_iter().filter(|i| asked.remove(i.id.as_str())),
        );
    }
    out
}

/// The tags of a collection, at most [`MAX_FED_ITEMS`], each id once (the first).
fn tags_of(feed: &dyn LauncherFeed, kind: FedKind, collection: &str) -> Vec<FedTag> {
    let mut seen = BTreeSet::new();
    let mut tags = feed.tags(kind, collection);
    tags.retain(|t| seen.insert(t.id.clone()));
    tags.truncate(MAX_FED_ITEMS);
    tags
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
    // Every calendar the app listed, unless the bound held some back: the others are retired.
    let listed: Option<Vec<String>> =
        (cals.len() < MAX_FED_COLLECTIONS).then(|| cals.iter().map(|c| clean_id(&c.id)).collect());
    for cal in cals {
        let id = clean_id(&cal.id);
        let known = store.known_items(account, &id)?;
        let tags = tags_of(feed, FedKind::Calendars, &cal.id);
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
    if let Some(listed) = listed {
        store.retire_unlisted(account, &listed, chrono::Utc::now().timestamp(), &mut report)?;
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
        let tags = tags_of(feed, FedKind::Contacts, &book.id);
        let v = version(&tags);
        if versions.get(&id) == Some(&v) {
            out.unchanged.push(id);
            continue;
        }
        let ids: Vec<String> = tags.iter().map(|t| t.id.clone()).collect();
        let got = texts(feed, FedKind::Contacts, &book.id, &ids);
        // Every asked card came back (each once, nothing else: see `texts`).
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One address book of cards `a` and `b`, whose `items` answers with what `answer` says.
    struct Book {
        answer: Vec<&'static str>,
    }

    fn card(id: &str) -> FedItem {
        FedItem {
            id: id.to_owned(),
            tag: "1".to_owned(),
            text: format!(
                "BEGIN:VCARD\r\nVERSION:4.0\r\nUID:{id}\r\nFN:{id}\r\nEMAIL:{id}@example.org\r\nEND:VCARD\r\n"
            ),
        }
    }

    impl LauncherFeed for Book {
        fn collections(&self, _: FedKind) -> Vec<FedCollection> {
            vec![FedCollection { id: "book".into(), name: None, color: None }]
        }

        fn tags(&self, _: FedKind, _: &str) -> Vec<FedTag> {
            ["a", "b", "a"].iter().map(|id| FedTag { id: (*id).into(), tag: "1".into() }).collect()
        }

        fn items(&self, _: FedKind, _: &str, _: &[String]) -> Vec<FedItem> {
            self.answer.iter().map(|id| card(id)).collect()
        }
    }

    #[test]
    fn a_book_is_whole_only_when_every_asked_card_came_back() {
        let read = |answer| read_launcher_books(&Book { answer }, None, &BTreeMap::new());
        // Both cards (the tag listed twice is asked once).
        let whole = read(vec!["b", "a"]);
        assert_eq!(whole.books, ["book"]);
        assert_eq!(whole.cards.len(), 2);
        // As many items as asked, but one twice and one never: not the book.
        let twice = read(vec!["a", "a"]);
        assert!(twice.books.is_empty() && twice.cards.is_empty(), "{twice:?}");
        // A card nobody asked for is not taken for one that was.
        let other = read(vec!["a", "z"]);
        assert!(other.books.is_empty() && other.cards.is_empty(), "{other:?}");
    }
}
