//! `contacts.db`: the cards of every address book as read, per account, and the people merged
//! from all of them ([`merge`]). Indexing an account replaces its cards — new, changed and
//! vanished ones counted — in one transaction, then re-merges; the files are the truth and a
//! re-run of the same books changes nothing.

use std::{collections::BTreeMap, path::Path};

use rusqlite::params;
use serde::Serialize;

use super::{Contact, People, merge};
use crate::{
    Limits,
    error::{ErrorKind, StewardError},
    store::{
        Database, Migration, OpenOptions, Schema, StoreError,
        snapshot::{self, Snapshot},
    },
};

const SCHEMA: Schema = Schema {
    name: "contacts",
    migrations: &[
        Migration {
            version: 1,
            name: "contacts",
            sql: include_str!("../../migrations/contacts/001_contacts.sql"),
        },
        Migration {
            version: 2,
            name: "book_versions",
            sql: include_str!("../../migrations/contacts/002_book_versions.sql"),
        },
    ],
};

/// Longest account name, characters.
/// Fixed (not a setting).
pub const MAX_ACCOUNT_CHARS: usize = 100;

/// Why the contacts store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContactStoreError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An account name that is empty, too long or holds `/`.
    #[error("account names are 1 to {MAX_ACCOUNT_CHARS} characters without '/'")]
    BadAccount,
    /// A stored row could not be read back.
    #[error("a stored contact could not be read: {0}")]
    Corrupt(String),
}

impl StewardError for ContactStoreError {
    fn code(&self) -> &'static str {
        match self {
            Self::Store(e) => e.code(),
            Self::BadAccount => "CONTACTS_BAD_ACCOUNT",
            Self::Corrupt(_) => "CONTACTS_CORRUPT",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Store(e) => e.kind(),
            Self::BadAccount => ErrorKind::InvalidInput,
            Self::Corrupt(_) => ErrorKind::Internal,
        }
    }
}

/// What one indexing run read of an account's address books.
#[derive(Debug, Clone, Default)]
pub struct AccountRead {
    /// The cards of the books read whole, each card's first source naming its book.
    pub cards: Vec<Contact>,
    /// The books read whole: their stored cards are replaced by these.
    pub books: Vec<String>,
    /// Every book the source holds now, when it can say (a vdir root): a stored book not
    /// among them is gone. `None` (one file): the account's other books stay.
    pub listed: Option<Vec<String>>,
    /// How many cards or files could not be read.
    pub errors: usize,
    /// The version of each book read whole, when its source has one (a CardDAV listing's
    /// digest): kept, so the next run can leave a book whose version is the same unread.
    pub versions: BTreeMap<String, String>,
}

/// What indexing an account changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ContactsReport {
    /// The account.
    pub account: String,
    /// Cards read now.
    pub cards: usize,
    /// Cards not there before.
    pub added: usize,
    /// Cards that changed.
    pub changed: usize,
    /// Cards that are gone from the books.
    pub removed: usize,
    /// People after merging every account.
    pub contacts: usize,
}

/// The store.
pub struct ContactStore {
    db: Database,
    /// Every person, parsed, while the store has not changed (see [`MAX_CACHED_CONTACTS`]).
    people: Snapshot<People>,
}

/// Most people kept parsed in memory; a store with more is read from SQLite each time.
/// Fixed (not a setting).
pub const MAX_CACHED_CONTACTS: usize = 200_000;

impl ContactStore {
    /// Opens (or creates) `<home>/contacts.db`.
    pub fn open(home: &Path, limits: &Limits) -> Result<Self, ContactStoreError> {
        let path = home.join("contacts.db");
        let db = Database::open(&path, &SCHEMA, OpenOptions::small_writes(limits))?;
        crate::store::restrict_file(&path);
        Ok(Self { db, people: Snapshot::default() })
    }

    /// Replaces the cards of the books `read` read whole (each card's source becomes
    /// `<account>/<book>`), drops the stored books its source no longer lists, keeps every
    /// other book as stored (one that could not be read is never read as emptied), then
    /// re-merges every account's cards into people.
    pub fn index_account(
        &self,
        account: &str,
        read: AccountRead,
        now: i64,
    ) -> Result<ContactsReport, ContactStoreError> {
        let AccountRead { cards, books, listed, errors, versions } = read;
        if account.is_empty()
            || account.chars().count() > MAX_ACCOUNT_CHARS
            || account.contains('/')
        {
            return Err(ContactStoreError::BadAccount);
        }
        let prefix = format!("{account}/");
        let mut new: BTreeMap<(String, String), String> = BTreeMap::new();
        for mut c in cards {
            for s in &mut c.sources {
                s.source = format!("{prefix}{}", s.source);
            }
            let Some(s) = c.sources.first().cloned() else { continue };
            let json =
                serde_json::to_string(&c).map_err(|e| ContactStoreError::Corrupt(e.to_string()))?;
            new.insert((s.source, s.uid), json);
        }
        let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
        let (added, changed, removed) = self.db.write(|tx| {
            let old: BTreeMap<(String, String), String> = {
                let mut stmt = tx
                    .prepare("SELECT source, uid, card FROM cards WHERE substr(source, 1, length(?1)) = ?1")
                    .map_err(q("prepare old cards"))?;
                let rows = stmt
                    .query_map([&prefix], |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))
                    .map_err(q("old cards"))?;
                rows.collect::<Result<_, _>>().map_err(q("old card"))?
            };
            let (mut added, mut changed, mut removed) = (0, 0, 0);
            for (k, json) in &new {
                match old.get(k) {
                    Some(o) if o == json => continue,
                    Some(_) => changed += 1,
                    None => added += 1,
                }
                tx.execute(
                    "INSERT INTO cards (source, uid, card) VALUES (?1, ?2, ?3)
                     ON CONFLICT (source, uid) DO UPDATE SET card = excluded.card",
                    params![k.0, k.1, json],
                )
                .map_err(q("upsert card"))?;
            }
            let replaced: std::collections::BTreeSet<&str> = books.iter().map(String::as_str).collect();
            let gone = |source: &str| {
                let book = source.strip_prefix(prefix.as_str()).unwrap_or(source);
                replaced.contains(book) || listed.as_ref().is_some_and(|l| !l.iter().any(|b| b == book))
            };
            for k in old.keys().filter(|k| !new.contains_key(*k) && gone(&k.0)) {
                tx.execute("DELETE FROM cards WHERE source = ?1 AND uid = ?2", params![k.0, k.1])
                    .map_err(q("delete card"))?;
                removed += 1;
            }
            // Versions: a book replaced takes its new one (or none); a book gone loses its own.
            let old_versions: Vec<String> = {
                let mut stmt = tx
                    .prepare("SELECT source FROM book_versions WHERE substr(source, 1, length(?1)) = ?1")
                    .map_err(q("prepare versions"))?;
                let rows = stmt.query_map([&prefix], |r| r.get(0)).map_err(q("versions"))?;
                rows.collect::<Result<_, _>>().map_err(q("version"))?
            };
            for source in old_versions.iter().filter(|s| gone(s)) {
                tx.execute("DELETE FROM book_versions WHERE source = ?1", [source])
                    .map_err(q("delete version"))?;
            }
            for (book, version) in versions.iter().filter(|(b, _)| replaced.contains(b.as_str())) {
                tx.execute(
                    "INSERT INTO book_versions (source, version) VALUES (?1, ?2)
                     ON CONFLICT (source) DO UPDATE SET version = excluded.version",
                    params![format!("{prefix}{book}"), version],
                )
                .map_err(q("record version"))?;
            }
            tx.execute(
                "INSERT INTO accounts (account, indexed_at, cards, errors) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (account) DO UPDATE SET indexed_at = excluded.indexed_at,
                   cards = excluded.cards, errors = excluded.errors",
                params![account, now, i64::try_from(new.len()).unwrap_or(i64::MAX), i64::try_from(errors).unwrap_or(i64::MAX)],
            )
            .map_err(q("record account"))?;
            Ok::<_, StoreError>((added, changed, removed))
        })?;
        let contacts = if added + changed + removed > 0 { self.remerge()? } else { self.count()? };
        Ok(ContactsReport {
            account: account.to_owned(),
            cards: new.len(),
            added,
            changed,
            removed,
            contacts,
        })
    }

    /// The version of each of `account`'s books recorded by [`ContactStore::index_account`], by
    /// book.
    pub fn book_versions(
        &self,
        account: &str,
    ) -> Result<BTreeMap<String, String>, ContactStoreError> {
        let prefix = format!("{account}/");
        let rows: Vec<(String, String)> = self.db.read(|c| {
            let mut stmt = c
                .prepare("SELECT source, version FROM book_versions WHERE substr(source, 1, length(?1)) = ?1")
                .map_err(|e| StoreError::query("prepare versions", e))?;
            let rows = stmt
                .query_map([&prefix], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(|e| StoreError::query("versions", e))?;
            rows.collect::<Result<_, _>>().map_err(|e| StoreError::query("version", e))
        })?;
        Ok(rows
            .into_iter()
            .filter_map(|(s, v)| s.strip_prefix(&prefix).map(|b| (b.to_owned(), v)))
            .collect())
    }

    fn count(&self) -> Result<usize, ContactStoreError> {
        let n: i64 = self.db.read(|c| {
            c.query_row("SELECT count(*) FROM contacts", [], |r| r.get(0))
                .map_err(|e| StoreError::query("count contacts", e))
        })?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Merges every stored card into people and replaces the people.
    fn remerge(&self) -> Result<usize, ContactStoreError> {
        let cards: Vec<String> = self.db.read(|c| {
            let mut stmt = c
                .prepare("SELECT card FROM cards ORDER BY source, uid")
                .map_err(|e| StoreError::query("prepare cards", e))?;
            let rows =
                stmt.query_map([], |r| r.get(0)).map_err(|e| StoreError::query("cards", e))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(|e| StoreError::query("card", e))
        })?;
        let cards: Vec<Contact> = cards
            .iter()
            .map(|j| serde_json::from_str(j).map_err(|e| ContactStoreError::Corrupt(e.to_string())))
            .collect::<Result<_, _>>()?;
        let people = merge(cards);
        let rows: Vec<(String, String, String)> = people
            .iter()
            .map(|p| Ok((p.id.clone(), p.name.clone(), serde_json::to_string(p)?)))
            .collect::<Result<_, serde_json::Error>>()
            .map_err(|e| ContactStoreError::Corrupt(e.to_string()))?;
        let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
        self.db.write(|tx| {
            tx.execute("DELETE FROM contacts", []).map_err(q("clear contacts"))?;
            let mut stmt = tx
                .prepare("INSERT OR REPLACE INTO contacts (id, name, contact) VALUES (?1, ?2, ?3)")
                .map_err(q("prepare contact"))?;
            for (id, name, json) in &rows {
                stmt.execute(params![id, name, json]).map_err(q("insert contact"))?;
            }
            snapshot::bump(tx)
        })?;
        Ok(people.len())
    }

    /// Every person, by name.
    pub fn contacts(&self) -> Result<Vec<Contact>, ContactStoreError> {
        Ok(self.people()?.contacts.clone())
    }

    /// Every person, by name: the parsed copy while the store has not changed.
    pub fn people(&self) -> Result<std::sync::Arc<People>, ContactStoreError> {
        let load = |c: &rusqlite::Connection| -> Result<Vec<Contact>, ContactStoreError> {
            let mut stmt = c
                .prepare("SELECT contact FROM contacts ORDER BY name COLLATE NOCASE, id")
                .map_err(|e| StoreError::query("prepare contacts", e))?;
            let rows = stmt
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(|e| StoreError::query("contacts", e))?;
            let mut out = Vec::new();
            for row in rows {
                let json = row.map_err(|e| StoreError::query("contact", e))?;
                out.push(
                    serde_json::from_str(&json)
                        .map_err(|e| ContactStoreError::Corrupt(e.to_string()))?,
                );
            }
            Ok(out)
        };
        let cached = self.people.get(&self.db, |c| {
            let all = load(c)?;
            Ok::<_, ContactStoreError>((all.len() <= MAX_CACHED_CONTACTS).then(|| People::new(all)))
        })?;
        match cached {
            Some(all) => Ok(all),
            None => Ok(std::sync::Arc::new(People::new(self.db.read(load)?))),
        }
    }
}
