//! `calendar.db`: the person's calendars as their sources hold them, reconciled item by item
//! like the mail mirror (new, changed, vanished; one transaction per collection, so a crash
//! keeps every collection whole and a re-run of unchanged sources changes nothing), with an
//! FTS5 index (BM25) over summary, location, description and attendees.
//!
//! Every event has Steward's stable id (`evt-` and a digest of its calendar, UID and
//! recurrence id); an event whose item vanishes is soft-deleted and comes back with the same
//! id if the item does. Questions are asked over windows: [`CalendarStore::agenda`],
//! [`CalendarStore::free_busy`] and [`CalendarStore::search`] read only the events that can
//! fall in the window and expand them ([`super::agenda`]).

use std::{collections::BTreeMap, path::Path};

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use rusqlite::{OptionalExtension as _, params};
use serde::Serialize;

use super::{AgendaItem, Busy, Event, FreeBusy, RecurError, WorkingHours, agenda};
use crate::{
    Limits,
    error::{ErrorKind, StewardError},
    store::{
        Database, Migration, OpenOptions, Schema, StoreError,
        snapshot::{self, Snapshot},
    },
};

const SCHEMA: Schema = Schema {
    name: "calendar",
    migrations: &[
        Migration {
            version: 1,
            name: "calendar",
            sql: include_str!("../../migrations/calendar/001_calendar.sql"),
        },
        Migration {
            version: 2,
            name: "sync_tokens",
            sql: include_str!("../../migrations/calendar/002_sync_tokens.sql"),
        },
        Migration {
            version: 3,
            name: "retired_calendars",
            sql: include_str!("../../migrations/calendar/003_retired_calendars.sql"),
        },
        Migration {
            version: 4,
            name: "uid_aliases",
            sql: include_str!("../../migrations/calendar/004_uid_aliases.sql"),
        },
    ],
};

/// Most events one search returns.
/// Fixed (not a setting).
pub const MAX_SEARCH_RESULTS: usize = 50;
/// Most events a search matches before expanding them.
/// Fixed (not a setting).
const MAX_SEARCH_MATCHES: usize = 500;
/// Longest search text, characters.
/// Fixed (not a setting).
pub const MAX_SEARCH_CHARS: usize = 200;
/// Most events read for one window (more is a typed error: ask for a shorter window).
/// Fixed (not a setting).
pub const MAX_WINDOW_EVENTS: usize = 20_000;

/// Why the calendar store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CalendarStoreError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A window or expansion bound.
    #[error(transparent)]
    Recur(#[from] RecurError),
    /// An account name that is empty, too long or holds `/`.
    #[error("account names are 1 to 100 characters without '/'")]
    BadAccount,
    /// Search text that is empty or too long.
    #[error("search for 1 to {MAX_SEARCH_CHARS} characters of words")]
    BadQuery,
    /// More events could fall in the window than are read at once.
    #[error("more than {MAX_WINDOW_EVENTS} events could fall in the window: ask for a shorter one")]
    TooManyEvents,
    /// A stored row could not be read back.
    #[error("a stored event could not be read: {0}")]
    Corrupt(String),
}

impl StewardError for CalendarStoreError {
    fn code(&self) -> &'static str {
        match self {
            Self::Store(e) => e.code(),
            Self::Recur(e) => e.code(),
            Self::BadAccount => "CALENDAR_BAD_ACCOUNT",
            Self::BadQuery => "CALENDAR_BAD_QUERY",
            Self::TooManyEvents => "CALENDAR_TOO_MANY_EVENTS",
            Self::Corrupt(_) => "CALENDAR_CORRUPT",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Store(e) => e.kind(),
            Self::Recur(e) => e.kind(),
            Self::BadAccount | Self::BadQuery | Self::TooManyEvents => ErrorKind::InvalidInput,
            Self::Corrupt(_) => ErrorKind::Internal,
        }
    }
}

/// One item (file) of a collection that is new or changed, with its events.
#[derive(Debug, Clone)]
pub struct ItemUpdate {
    /// Its name in the collection.
    pub href: String,
    /// Its tag (changes when it does).
    pub etag: String,
    /// Its events.
    pub events: Vec<Event>,
}

/// A collection as its source holds it now.
#[derive(Debug, Clone, Default)]
pub struct CollectionSync {
    /// Its id in the account (a vdir's directory name, a file's name).
    pub collection: String,
    /// Its name for people.
    pub name: Option<String>,
    /// Its color.
    pub color: Option<String>,
    /// The items that are new or changed since [`CalendarStore::known_items`] was asked.
    pub updates: Vec<ItemUpdate>,
    /// Every item it holds now (those not here are gone).
    pub present: Vec<String>,
    /// The source's sync token for this state (CalDAV sync-collection), kept for the next run.
    pub sync_token: Option<String>,
}

/// What a reconcile changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CalendarReport {
    /// The account.
    pub account: String,
    /// Collections seen.
    pub calendars: usize,
    /// Items (files) new.
    pub added: usize,
    /// Items changed.
    pub changed: usize,
    /// Items gone (their events soft-deleted).
    pub removed: usize,
    /// Items unchanged (not read again).
    pub unchanged: usize,
    /// Live events in the account after the run.
    pub events: usize,
}

/// An event found by a search: the occurrences of it in the window, best match first.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct EventHit {
    /// Steward's id for the event.
    pub id: String,
    /// The calendar.
    pub calendar: String,
    /// Its occurrence in the window (the first one, for a recurring event).
    #[serde(flatten)]
    pub item: AgendaItem,
    /// More occurrences of it in the window.
    pub more_occurrences: usize,
    /// BM25 rank (lower is better), none for a browse.
    pub rank: Option<f64>,
}

/// A calendar of the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CalendarInfo {
    /// Its id (`account/collection`).
    pub id: String,
    /// Its name for people.
    pub name: Option<String>,
    /// Its color.
    pub color: Option<String>,
}

/// The item (file, resource) an event lives in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventItem {
    /// The calendar (`account/collection`).
    pub calendar: String,
    /// The item's name in it.
    pub href: String,
    /// The event's UID.
    pub uid: String,
    /// What it is.
    pub summary: String,
    /// The item's tag as last read.
    pub etag: String,
    /// How many events (UIDs) the item holds.
    pub uids: usize,
}

/// An occurrence with its calendar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct StoredOccurrence {
    /// The calendar.
    pub calendar: String,
    /// The occurrence.
    #[serde(flatten)]
    pub item: AgendaItem,
}

/// What a search asks.
#[derive(Debug, Clone)]
pub struct EventQuery {
    /// Words (every one must match); none: the window's events in order.
    pub text: Option<String>,
    /// The window's start (default 30 days ago).
    pub from: Option<DateTime<Utc>>,
    /// The window's end, not included (default 90 days ahead).
    pub to: Option<DateTime<Utc>>,
    /// Only these calendars (ids); empty: all.
    pub calendars: Vec<String>,
    /// Only events with this attendee or organizer (an address or part of a name).
    pub attendee: Option<String>,
    /// At most this many (≤ [`MAX_SEARCH_RESULTS`]).
    pub limit: usize,
}

impl Default for EventQuery {
    fn default() -> Self {
        Self { text: None, from: None, to: None, calendars: Vec::new(), attendee: None, limit: 20 }
    }
}

/// Steward's id for an event.
pub fn event_id(calendar: &str, uid: &str, recurrence_id: &str) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    for part in [calendar, uid, recurrence_id] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    let hex: String = h.finalize().iter().take(10).map(|b| format!("{b:02x}")).collect();
    format!("evt-{hex}")
}

fn rid_text(e: &Event) -> String {
    e.recurrence_id.map(|r| r.wall().format("%Y-%m-%dT%H:%M:%S").to_string()).unwrap_or_default()
}

/// The UTC span an event can take: `[start, end)`, end `None` when it repeats without a known
/// end. An override spans its own time and the occurrence it moves.
fn span(e: &Event, person: Tz) -> (i64, Option<i64>) {
    let start = e.start.instant(person).timestamp();
    let end = start + e.duration_secs.max(0);
    if let Some(rid) = e.recurrence_id {
        let r = rid.instant(person).timestamp();
        return (start.min(r), Some(end.max(r + e.duration_secs.max(0))));
    }
    let repeats = e.recurrence.rule.is_some();
    let last_rdate = e
        .recurrence
        .rdates
        .iter()
        .map(|d| d.instant(person).timestamp() + e.duration_secs.max(0))
        .max();
    if !repeats {
        return (start, Some(last_rdate.map_or(end, |r| r.max(end))));
    }
    // A rule with UNTIL ends by then (a day of slack for zones); any other may run forever.
    let until = e.recurrence.rule.as_deref().and_then(|r| {
        r.split(';').find_map(|p| p.trim().strip_prefix("UNTIL=")).and_then(|v| {
            let v = v.trim_end_matches('Z');
            chrono::NaiveDate::parse_from_str(v.get(..8)?, "%Y%m%d").ok()
        })
    });
    let end = until.map(|d| {
        d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc().timestamp()
            + 2 * 86_400
            + e.duration_secs.max(0)
    });
    (start, end.map(|u| last_rdate.map_or(u, |r| r.max(u))))
}

/// The organizer and attendees (names and addresses), lowercased.
fn attendees_text(e: &Event) -> String {
    let mut parts: Vec<String> = e.organizer.iter().cloned().collect();
    for a in &e.attendees {
        if let Some(n) = &a.name {
            parts.push(n.clone());
        }
        parts.push(a.email.clone());
    }
    parts.join(" ").to_lowercase()
}

/// FTS5 query of `text`: every word quoted (no operator or column filter can be injected),
/// all required.
fn fts_query(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(32)
        .map(|w| format!("\"{w}\""))
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// BM25 matches (best first) and vector neighbours (nearest first) fused by reciprocal rank:
/// each event's rank becomes minus its fused score, so lower is still better.
fn fuse(
    lexical: &[(String, String, Option<f64>)],
    near: &[(String, String)],
) -> Vec<(String, String, Option<f64>)> {
    let k = crate::search::engine::RRF_K;
    let mut score: std::collections::HashMap<(String, String), f64> =
        std::collections::HashMap::new();
    let position = |i: usize| 1.0 / (k + f64::from(u32::try_from(i + 1).unwrap_or(u32::MAX)));
    for (i, (c, u, _)) in lexical.iter().enumerate() {
        *score.entry((c.clone(), u.clone())).or_default() += position(i);
    }
    for (i, key) in near.iter().enumerate() {
        *score.entry(key.clone()).or_default() += position(i);
    }
    let mut out: Vec<(String, String, Option<f64>)> =
        score.into_iter().map(|((c, u), s)| (c, u, Some(-s))).collect();
    out.sort_by(|a, b| {
        a.2.unwrap_or(0.0)
            .total_cmp(&b.2.unwrap_or(0.0))
            .then_with(|| (&a.0, &a.1).cmp(&(&b.0, &b.1)))
    });
    out
}

/// The store.
pub struct CalendarStore {
    db: Database,
    /// Every live event, parsed, while the store has not changed (see [`MAX_CACHED_EVENTS`]).
    events: Snapshot<Vec<Group>>,
    /// Their occurrences around now, expanded once for those events and zone: the agenda's,
    /// and the busy ones for the person's addresses.
    expanded: std::sync::Mutex<[Option<std::sync::Arc<Expanded>>; 2]>,
    /// Questions asked of this handle. The first is answered from SQLite alone: a process that
    /// asks once (a command) would only pay for parsing and expanding what it never asks again.
    questions: std::sync::atomic::AtomicUsize,
    /// Expansions built whole and kept (what the tests check was used).
    expansions: std::sync::atomic::AtomicUsize,
}

/// Days before now whose occurrences are kept expanded in memory.
/// Fixed (not a setting).
pub const EXPANDED_DAYS_BACK: i64 = 60;
/// Days after now whose occurrences are kept expanded in memory (with
/// [`EXPANDED_DAYS_BACK`], at most the longest window, 366 days).
/// Fixed (not a setting).
pub const EXPANDED_DAYS_AHEAD: i64 = 300;
/// Most occurrences kept expanded; a store with more expands each question's window.
/// Fixed (not a setting).
pub const MAX_EXPANDED: usize = 500_000;
/// Most memory the occurrences kept expanded for one question kind may take, bytes (two kinds
/// are kept: the agenda's and the busy ones); a store whose occurrences take more expands each
/// question's window instead.
/// Fixed (not a setting).
pub const MAX_EXPANDED_BYTES: usize = 64 * 1024 * 1024;

/// What one kept occurrence takes in memory, about.
fn occurrence_bytes(o: &StoredOccurrence) -> usize {
    let i = &o.item;
    std::mem::size_of::<StoredOccurrence>()
        + o.calendar.capacity()
        + i.uid.capacity()
        + i.summary.capacity()
        + i.location.as_ref().map_or(0, String::capacity)
        + i.recurrence_id.as_ref().map_or(0, String::capacity)
        + i.status.as_ref().map_or(0, String::capacity)
}

/// The occurrences of every event in `[from, to)`, for one set of parsed events and one zone:
/// the agenda's, or the busy ones of free/busy for one set of the person's addresses.
#[derive(Debug)]
struct Expanded {
    groups: std::sync::Arc<Vec<Group>>,
    zone: Tz,
    /// `None`: the agenda's occurrences; the person's addresses: the busy ones (what takes
    /// time for them, see [`super::free`]).
    me: Option<Vec<String>>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    /// By start; `None` when the events could not be expanded whole (a rule too dense or too
    /// far, more than [`MAX_EXPANDED`]): questions expand their own windows, and meet the
    /// same error.
    list: Option<Vec<StoredOccurrence>>,
    /// The longest occurrence, seconds (how far before a window one can start and reach it).
    longest: i64,
}

/// Whether an occurrence `[s, e)` overlaps `[from, to)` (an empty one at `from` does), as
/// [`super::occurrences`] decides.
fn overlaps(
    s: DateTime<chrono::FixedOffset>,
    e: DateTime<chrono::FixedOffset>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> bool {
    s < to && (e > from || (e == s && s >= from))
}

/// The slice of `items` (by start) overlapping `[from, to)`; `start`/`end` read an item.
fn in_window<T>(
    items: &[T],
    longest: i64,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    span: impl Fn(&T) -> (DateTime<chrono::FixedOffset>, DateTime<chrono::FixedOffset>) + Copy,
) -> impl Iterator<Item = &T> {
    let lower = from - Duration::seconds(longest);
    let first = items.partition_point(|i| span(i).0 < lower);
    items[first..].iter().take_while(move |i| span(i).0 < to).filter(move |i| {
        let (s, e) = span(i);
        overlaps(s, e, from, to)
    })
}

/// Most events kept parsed in memory; a store with more is asked through SQLite each time.
/// Fixed (not a setting).
pub const MAX_CACHED_EVENTS: usize = 100_000;

/// The live events of one UID in one calendar (a master and its overrides), with the span
/// the window index gives them together.
#[derive(Debug)]
struct Group {
    calendar: String,
    uid: String,
    /// The earliest start of any of them (UTC seconds).
    lo: i64,
    /// The latest end, `None` when one has no known end.
    hi: Option<i64>,
    events: Vec<Event>,
}

impl Group {
    fn overlaps(&self, lo: i64, hi: i64) -> bool {
        self.lo < hi && self.hi.is_none_or(|end| end > lo)
    }
}

/// Rows `(calendar, uid, start_utc, end_utc, event JSON)` grouped by calendar and UID.
fn groups(
    rows: impl IntoIterator<Item = (String, String, i64, Option<i64>, String)>,
) -> Result<Vec<Group>, CalendarStoreError> {
    let mut by_key: BTreeMap<(String, String), Group> = BTreeMap::new();
    for (calendar, uid, start, end, json) in rows {
        let event: Event =
            serde_json::from_str(&json).map_err(|x| CalendarStoreError::Corrupt(x.to_string()))?;
        let g = by_key.entry((calendar.clone(), uid.clone())).or_insert_with(|| Group {
            calendar,
            uid,
            lo: start,
            hi: end,
            events: Vec::new(),
        });
        g.lo = g.lo.min(start);
        g.hi = match (g.hi, end) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
        g.events.push(event);
    }
    Ok(by_key.into_values().collect())
}

/// The groups of a window: borrowed from the in-memory copy, or read for this question.
enum Window {
    Cached(std::sync::Arc<Vec<Group>>, Vec<usize>),
    Read(Vec<Group>),
}

impl Window {
    fn groups(&self) -> Box<dyn Iterator<Item = &Group> + '_> {
        match self {
            Self::Cached(all, picked) => Box::new(picked.iter().filter_map(|i| all.get(*i))),
            Self::Read(v) => Box::new(v.iter()),
        }
    }
}

impl CalendarStore {
    /// Opens (or creates) `<home>/calendar.db`.
    pub fn open(home: &Path, limits: &Limits) -> Result<Self, CalendarStoreError> {
        let path = home.join("calendar.db");
        let db = Database::open(&path, &SCHEMA, OpenOptions::small_writes(limits))?;
        crate::store::restrict_file(&path);
        Ok(Self {
            db,
            events: Snapshot::default(),
            expanded: std::sync::Mutex::new([None, None]),
            questions: std::sync::atomic::AtomicUsize::new(0),
            expansions: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// The items of `account`'s `collection` and their tags (to read only what changed).
    pub fn known_items(
        &self,
        account: &str,
        collection: &str,
    ) -> Result<BTreeMap<String, String>, CalendarStoreError> {
        let id = format!("{account}/{collection}");
        Ok(self.db.read(|c| {
            let mut stmt = c
                .prepare_cached(
                    "SELECT href, etag FROM items WHERE calendar_id = ?1 AND deleted_at IS NULL",
                )
                .map_err(|e| StoreError::query("prepare items", e))?;
            let rows = stmt
                .query_map([&id], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(|e| StoreError::query("items", e))?;
            rows.collect::<Result<_, _>>().map_err(|e| StoreError::query("item", e))
        })?)
    }

    /// The sync token stored with `account`'s `collection` by the last [`CalendarStore::apply`],
    /// if its source gave one.
    pub fn sync_token(
        &self,
        account: &str,
        collection: &str,
    ) -> Result<Option<String>, CalendarStoreError> {
        let id = format!("{account}/{collection}");
        Ok(self.db.read(|c| {
            c.query_row("SELECT sync_token FROM calendars WHERE id = ?1", [&id], |r| r.get(0))
                .optional()
                .map(Option::flatten)
                .map_err(|e| StoreError::query("sync token", e))
        })?)
    }

    /// Applies one collection's state in one transaction: updated items' events replace
    /// theirs, items no longer present are soft-deleted with their events. Floating and
    /// all-day times are placed in `person`'s zone for the window index.
    pub fn apply(
        &self,
        account: &str,
        sync: &CollectionSync,
        person: Tz,
        now: i64,
        report: &mut CalendarReport,
    ) -> Result<(), CalendarStoreError> {
        if account.is_empty() || account.chars().count() > 100 || account.contains('/') {
            return Err(CalendarStoreError::BadAccount);
        }
        let cal = format!("{account}/{}", sync.collection);
        let mut rows = Vec::new();
        for u in &sync.updates {
            for e in &u.events {
                let rid = rid_text(e);
                let json = serde_json::to_string(e)
                    .map_err(|x| CalendarStoreError::Corrupt(x.to_string()))?;
                let (start, end) = span(e, person);
                rows.push((u.href.clone(), e, rid, json, start, end));
            }
        }
        let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
        let (added, changed, removed) = self.db.write(|tx| {
            tx.execute(
                "INSERT INTO calendars (id, account, name, color, updated_at, sync_token)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (id) DO UPDATE SET name = excluded.name, color = excluded.color,
                   updated_at = excluded.updated_at, sync_token = excluded.sync_token,
                   retired_at = NULL",
                params![cal, account, sync.name, sync.color, now, sync.sync_token],
            )
            .map_err(q("upsert calendar"))?;
            let known: BTreeMap<String, bool> = {
                let mut stmt = tx
                    .prepare("SELECT href, deleted_at IS NULL FROM items WHERE calendar_id = ?1")
                    .map_err(q("prepare known"))?;
                let rows = stmt.query_map([&cal], |r| Ok((r.get(0)?, r.get(1)?))).map_err(q("known"))?;
                rows.collect::<Result<_, _>>().map_err(q("known row"))?
            };
            let (mut added, mut changed, mut removed) = (0, 0, 0);
            for u in &sync.updates {
                match known.get(&u.href) {
                    Some(true) => changed += 1,
                    _ => added += 1,
                }
                tx.execute(
                    "INSERT INTO items (calendar_id, href, etag, deleted_at) VALUES (?1, ?2, ?3, NULL)
                     ON CONFLICT (calendar_id, href) DO UPDATE SET etag = excluded.etag, deleted_at = NULL",
                    params![cal, u.href, u.etag],
                )
                .map_err(q("upsert item"))?;
                // The item's old events go; those it still holds come back below, same ids.
                tx.execute(
                    "UPDATE events SET deleted_at = ?3 WHERE calendar_id = ?1 AND href = ?2 AND deleted_at IS NULL",
                    params![cal, u.href, now],
                )
                .map_err(q("retire events"))?;
            }
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO events (id, calendar_id, href, uid, recurrence_id, summary, location,
                       description, attendees, start_utc, end_utc, event, deleted_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, NULL)
                     ON CONFLICT (id) DO UPDATE SET href = excluded.href, summary = excluded.summary,
                       location = excluded.location, description = excluded.description,
                       attendees = excluded.attendees, start_utc = excluded.start_utc,
                       end_utc = excluded.end_utc, event = excluded.event, deleted_at = NULL",
                )
                .map_err(q("prepare event"))?;
            for (href, e, rid, json, start, end) in &rows {
                stmt.execute(params![
                    event_id(&cal, &e.uid, rid),
                    cal,
                    href,
                    e.uid,
                    rid,
                    e.summary,
                    e.location.clone().unwrap_or_default(),
                    e.description.clone().unwrap_or_default(),
                    attendees_text(e),
                    start,
                    end,
                    json,
                ])
                .map_err(q("upsert event"))?;
            }
            let present: std::collections::BTreeSet<&str> = sync.present.iter().map(String::as_str).collect();
            for (href, _) in known.iter().filter(|(h, live)| **live && !present.contains(h.as_str())) {
                tx.execute(
                    "UPDATE items SET deleted_at = ?3 WHERE calendar_id = ?1 AND href = ?2",
                    params![cal, href, now],
                )
                .map_err(q("retire item"))?;
                tx.execute(
                    "UPDATE events SET deleted_at = ?3 WHERE calendar_id = ?1 AND href = ?2 AND deleted_at IS NULL",
                    params![cal, href, now],
                )
                .map_err(q("retire item events"))?;
                removed += 1;
            }
            if added + changed + removed > 0 {
                snapshot::bump(tx)?;
            }
            Ok::<_, StoreError>((added, changed, removed))
        })?;
        report.calendars += 1;
        report.added += added;
        report.changed += changed;
        report.removed += removed;
        report.unchanged += sync.present.len().saturating_sub(added + changed);
        report.events = self.count(account)?;
        Ok(())
    }

    /// Retires every calendar of `account` whose collection is not in `listed` (the source
    /// listed all of its collections, and these are they): its items and events are
    /// soft-deleted and its sync token dropped, so a calendar removed at the source leaves the
    /// agenda, and one listed again is read whole. Returns how many items went.
    pub fn retire_unlisted(
        &self,
        account: &str,
        listed: &[String],
        now: i64,
        report: &mut CalendarReport,
    ) -> Result<usize, CalendarStoreError> {
        let keep: std::collections::BTreeSet<String> =
            listed.iter().map(|c| format!("{account}/{c}")).collect();
        let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
        let removed = self.db.write(|tx| {
            let live: Vec<String> = {
                let mut stmt = tx
                    .prepare("SELECT id FROM calendars WHERE account = ?1 AND retired_at IS NULL")
                    .map_err(q("prepare calendars of account"))?;
                let rows = stmt.query_map([account], |r| r.get(0)).map_err(q("calendars"))?;
                rows.collect::<Result<_, _>>().map_err(q("calendar row"))?
            };
            let mut removed = 0;
            for cal in live.iter().filter(|c| !keep.contains(*c)) {
                removed += tx
                    .execute(
                        "UPDATE items SET deleted_at = ?2 WHERE calendar_id = ?1 AND deleted_at IS NULL",
                        params![cal, now],
                    )
                    .map_err(q("retire calendar items"))?;
                tx.execute(
                    "UPDATE events SET deleted_at = ?2 WHERE calendar_id = ?1 AND deleted_at IS NULL",
                    params![cal, now],
                )
                .map_err(q("retire calendar events"))?;
                tx.execute(
                    "UPDATE calendars SET retired_at = ?2, sync_token = NULL WHERE id = ?1",
                    params![cal, now],
                )
                .map_err(q("retire calendar"))?;
            }
            if removed > 0 || live.iter().any(|c| !keep.contains(c)) {
                snapshot::bump(tx)?;
            }
            Ok::<_, StoreError>(removed)
        })?;
        report.removed += removed;
        report.events = self.count(account)?;
        Ok(removed)
    }

    fn count(&self, account: &str) -> Result<usize, CalendarStoreError> {
        let n: i64 = self.db.read(|c| {
            c.query_row(
                "SELECT count(*) FROM events e JOIN calendars c ON c.id = e.calendar_id
                 WHERE c.account = ?1 AND e.deleted_at IS NULL",
                [account],
                |r| r.get(0),
            )
            .map_err(|e| StoreError::query("count events", e))
        })?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// The live events (grouped by calendar) that can fall in `[from, to)` — a day of slack on
    /// each side for floating and all-day times — with the other parts (master, overrides) of
    /// each recurring one.
    /// Every live event parsed and grouped, while the store holds at most
    /// [`MAX_CACHED_EVENTS`].
    fn cached_groups(&self) -> Result<Option<std::sync::Arc<Vec<Group>>>, CalendarStoreError> {
        self.events.get(&self.db, |c| {
            let mut stmt = c
                .prepare(
                    "SELECT calendar_id, uid, start_utc, end_utc, event FROM events
                     WHERE deleted_at IS NULL LIMIT ?1",
                )
                .map_err(|e| StoreError::query("prepare cache", e))?;
            let rows = stmt
                .query_map([i64::try_from(MAX_CACHED_EVENTS + 1).unwrap_or(i64::MAX)], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })
                .map_err(|e| StoreError::query("cache", e))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| StoreError::query("cache row", e))?;
            if rows.len() > MAX_CACHED_EVENTS {
                return Ok(None);
            }
            groups(rows).map(Some)
        })
    }

    /// The events (masters and overrides) of every UID with a row overlapping the window (a
    /// day of slack each side), grouped by calendar and UID; at most [`MAX_WINDOW_EVENTS`].
    fn window(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<Window, CalendarStoreError> {
        let (lo, hi) =
            ((from - Duration::days(1)).timestamp(), (to + Duration::days(1)).timestamp());
        if !self.warm() {
            // The first question: no copy is made.
        } else if let Some(all) = self.cached_groups()? {
            let mut n = 0;
            let mut picked = Vec::new();
            for (i, g) in all.iter().enumerate().filter(|(_, g)| g.overlaps(lo, hi)) {
                n += g.events.len();
                if n > MAX_WINDOW_EVENTS {
                    return Err(CalendarStoreError::TooManyEvents);
                }
                picked.push(i);
            }
            return Ok(Window::Cached(all, picked));
        }
        let rows: Vec<(String, String, i64, Option<i64>, String)> = self.db.read(|c| {
            let mut stmt = c
                .prepare_cached(
                    "SELECT e.calendar_id, e.uid, e.start_utc, e.end_utc, e.event FROM events e
                     WHERE e.deleted_at IS NULL AND EXISTS (
                       SELECT 1 FROM events w WHERE w.calendar_id = e.calendar_id AND w.uid = e.uid
                         AND w.deleted_at IS NULL AND w.start_utc < ?2
                         AND (w.end_utc IS NULL OR w.end_utc > ?1))
                     LIMIT ?3",
                )
                .map_err(|e| StoreError::query("prepare window", e))?;
            let rows = stmt
                .query_map(
                    params![lo, hi, i64::try_from(MAX_WINDOW_EVENTS + 1).unwrap_or(i64::MAX)],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                )
                .map_err(|e| StoreError::query("window", e))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(|e| StoreError::query("window row", e))
        })?;
        if rows.len() > MAX_WINDOW_EVENTS {
            return Err(CalendarStoreError::TooManyEvents);
        }
        Ok(Window::Read(groups(rows)?))
    }

    /// How many times the occurrences around now were expanded whole and kept.
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn expansions(&self) -> usize {
        self.expansions.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether this handle has been asked before (see `questions`).
    fn warm(&self) -> bool {
        self.questions.load(std::sync::atomic::Ordering::Relaxed) > 1
    }

    /// Counts a question (agenda, free/busy, search).
    fn asked(&self) {
        self.questions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The expanded occurrences covering `[from, to)` for `zone` and `me`, built now when the
    /// events changed or the window lies outside the ones held (and inside the span around now
    /// that is kept); `None` when the window is elsewhere or the store is not held in memory.
    fn expanded(
        &self,
        zone: Tz,
        me: Option<&[String]>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Option<std::sync::Arc<Expanded>>, CalendarStoreError> {
        if !self.warm() {
            return Ok(None);
        }
        let Some(groups) = self.cached_groups()? else { return Ok(None) };
        let mut slots = self.expanded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let held = &mut slots[usize::from(me.is_some())];
        if let Some(x) = held.as_ref()
            && std::sync::Arc::ptr_eq(&x.groups, &groups)
            && x.zone == zone
            && x.me.as_deref() == me
            && x.from <= from
            && to <= x.to
        {
            return Ok(Some(std::sync::Arc::clone(x)));
        }
        let now = Utc::now();
        let (hfrom, hto) =
            (now - Duration::days(EXPANDED_DAYS_BACK), now + Duration::days(EXPANDED_DAYS_AHEAD));
        if from < hfrom || to > hto {
            return Ok(None);
        }
        let list = (|| -> Result<_, RecurError> {
            let mut all = Vec::new();
            let mut bytes = 0usize;
            for g in groups.iter() {
                let items = match me {
                    None => agenda(&g.events, zone, hfrom, hto, super::MAX_INSTANCES)?,
                    Some(m) => {
                        let kept = super::free::busy_events(&g.events, m);
                        agenda(&kept, zone, hfrom, hto, super::MAX_INSTANCES)?
                    }
                };
                for item in items {
                    let o = StoredOccurrence { calendar: g.calendar.clone(), item };
                    bytes += occurrence_bytes(&o);
                    all.push(o);
                }
                if all.len() > MAX_EXPANDED || bytes > MAX_EXPANDED_BYTES {
                    return Err(RecurError::TooMany { max: MAX_EXPANDED });
                }
            }
            all.sort_by(|a, b| {
                a.item.start.cmp(&b.item.start).then_with(|| a.item.uid.cmp(&b.item.uid))
            });
            Ok(all)
        })()
        .ok();
        if list.is_some() {
            self.expansions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let longest = list.as_ref().map_or(0, |all| {
            all.iter().map(|o| (o.item.end - o.item.start).num_seconds()).max().unwrap_or(0)
        });
        let x = std::sync::Arc::new(Expanded {
            groups,
            zone,
            me: me.map(<[String]>::to_vec),
            from: hfrom,
            to: hto,
            list,
            longest,
        });
        *held = Some(std::sync::Arc::clone(&x));
        Ok(Some(x))
    }

    /// The occurrences in `[from, to)` of every calendar, by start, at most `max`.
    pub fn agenda(
        &self,
        person: Tz,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        max: usize,
    ) -> Result<Vec<StoredOccurrence>, CalendarStoreError> {
        super::check_window(from, to)?;
        self.asked();
        let max = max.min(super::MAX_INSTANCES);
        if let Some(x) = self.expanded(person, None, from, to)?
            && let Some(all) = &x.list
        {
            let out: Vec<StoredOccurrence> =
                in_window(all, x.longest, from, to, |o| (o.item.start, o.item.end))
                    .take(max + 1)
                    .cloned()
                    .collect();
            if out.len() > max {
                return Err(RecurError::TooMany { max }.into());
            }
            return Ok(out);
        }
        let mut out = Vec::new();
        let window = self.window(from, to)?;
        for g in window.groups() {
            for item in agenda(&g.events, person, from, to, max)? {
                out.push(StoredOccurrence { calendar: g.calendar.clone(), item });
            }
            if out.len() > max {
                return Err(RecurError::TooMany { max }.into());
            }
        }
        out.sort_by(|a, b| {
            a.item.start.cmp(&b.item.start).then_with(|| a.item.uid.cmp(&b.item.uid))
        });
        Ok(out)
    }

    /// The busy time and free slots of every calendar in `[from, to)` (see [`free_busy`]).
    pub fn free_busy(
        &self,
        person: Tz,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        min_minutes: i64,
        hours: &WorkingHours,
        me: &[String],
    ) -> Result<FreeBusy, CalendarStoreError> {
        super::check_window(from, to)?;
        super::free::check_minutes(min_minutes)?;
        self.asked();
        if let Some(x) = self.expanded(person, Some(me), from, to)?
            && let Some(all) = &x.list
        {
            let items: Vec<AgendaItem> =
                in_window(all, x.longest, from, to, |o| (o.item.start, o.item.end))
                    .take(super::MAX_INSTANCES + 1)
                    .map(|o| o.item.clone())
                    .collect();
            if items.len() > super::MAX_INSTANCES {
                return Err(RecurError::TooMany { max: super::MAX_INSTANCES }.into());
            }
            let busy: Vec<Busy> = super::free::busy_of(items);
            let free = super::free::free_slots(&busy, person, from, to, min_minutes, hours)?;
            return Ok(FreeBusy { busy, free });
        }
        // Each UID of each calendar on its own, as the agenda reads them (the same UID in two
        // calendars is two events).
        let mut items = Vec::new();
        for g in self.window(from, to)?.groups() {
            let kept = super::free::busy_events(&g.events, me);
            items.extend(agenda(&kept, person, from, to, super::MAX_INSTANCES)?);
            if items.len() > super::MAX_INSTANCES {
                return Err(RecurError::TooMany { max: super::MAX_INSTANCES }.into());
            }
        }
        items.sort_by(|a, b| a.start.cmp(&b.start).then_with(|| a.uid.cmp(&b.uid)));
        let busy = super::free::busy_of(items);
        let free = super::free::free_slots(&busy, person, from, to, min_minutes, hours)?;
        Ok(FreeBusy { busy, free })
    }

    /// Events matching `q` (see [`EventQuery`]): with words, by BM25 rank then start; without,
    /// the window's events by start. Each hit is an event with its first occurrence in the
    /// window; an event with none there is not a hit.
    pub fn search(&self, person: Tz, q: &EventQuery) -> Result<Vec<EventHit>, CalendarStoreError> {
        self.search_near(person, q, &[])
    }

    /// [`CalendarStore::search`], fused (reciprocal rank fusion) with the events of the rows
    /// `near` (the nearest to the text by their vectors, nearest first) that pass the same
    /// window and filters.
    pub fn search_near(
        &self,
        person: Tz,
        q: &EventQuery,
        near: &[i64],
    ) -> Result<Vec<EventHit>, CalendarStoreError> {
        let now = Utc::now();
        let from = q.from.unwrap_or(now - Duration::days(30));
        let to = q.to.unwrap_or(now + Duration::days(90));
        super::check_window(from, to)?;
        self.asked();
        let limit = q.limit.clamp(1, MAX_SEARCH_RESULTS);
        let text = match q.text.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            Some(t) if t.chars().count() > MAX_SEARCH_CHARS => {
                return Err(CalendarStoreError::BadQuery);
            }
            Some(t) => Some(fts_query(t).ok_or(CalendarStoreError::BadQuery)?),
            None => None,
        };
        // Attendees are stored lowercased (in Rust: every script, not only ASCII).
        let attendee =
            q.attendee.as_deref().map(|a| a.trim().to_lowercase()).filter(|a| !a.is_empty());
        let (lo, hi) =
            ((from - Duration::days(1)).timestamp(), (to + Duration::days(1)).timestamp());
        let calendars = if q.calendars.is_empty() {
            String::new()
        } else {
            format!("\u{1f}{}\u{1f}", q.calendars.join("\u{1f}"))
        };
        // Matching (calendar, uid) pairs with their best rank.
        let matched: Vec<(String, String, Option<f64>)> = match &text {
            Some(fts) => self.db.read(|c| {
                let mut stmt = c
                    .prepare_cached(
                        "WITH m AS MATERIALIZED (
                           SELECT rowid, bm25(events_fts) AS rank FROM events_fts
                           WHERE events_fts MATCH ?1)
                         SELECT e.calendar_id, e.uid, min(m.rank) FROM m
                         JOIN events e ON e.rowid = m.rowid
                         WHERE e.deleted_at IS NULL AND (?2 IS NULL OR instr(e.attendees, ?2) > 0)
                           AND e.start_utc < ?5 AND (e.end_utc IS NULL OR e.end_utc > ?4)
                           AND (?6 = '' OR instr(?6, char(31) || e.calendar_id || char(31)) > 0)
                         GROUP BY e.calendar_id, e.uid ORDER BY 3 LIMIT ?3",
                    )
                    .map_err(|e| StoreError::query("prepare search", e))?;
                let rows = stmt
                    .query_map(
                        params![
                            fts,
                            attendee,
                            i64::try_from(MAX_SEARCH_MATCHES).unwrap_or(500),
                            lo,
                            hi,
                            calendars
                        ],
                        |r| Ok((r.get(0)?, r.get(1)?, Some(r.get(2)?))),
                    )
                    .map_err(|e| StoreError::query("search", e))?;
                rows.collect::<Result<Vec<_>, _>>().map_err(|e| StoreError::query("search row", e))
            })?,
            None => Vec::new(),
        };
        let matched = if text.is_some() && !near.is_empty() {
            let near = self.near_keys(near, attendee.as_deref(), (lo, hi), &calendars)?;
            fuse(&matched, &near)
        } else {
            matched
        };
        let window = self.window(from, to)?;
        let by_key: std::collections::HashMap<(&str, &str), &Group> =
            window.groups().map(|g| ((g.calendar.as_str(), g.uid.as_str()), g)).collect();
        let wanted = |cal: &str| q.calendars.is_empty() || q.calendars.iter().any(|c| c == cal);
        let mut hits = Vec::new();
        let mut hit = |g: &Group, rank: Option<f64>| -> Result<(), CalendarStoreError> {
            let (cal, uid, parts) = (g.calendar.as_str(), g.uid.as_str(), &g.events);
            let items = agenda(parts, person, from, to, super::MAX_INSTANCES)?;
            if let Some(first) = items.first() {
                let rid = first.recurrence_id.clone().unwrap_or_default();
                let master_rid = if parts.iter().any(|p| p.recurrence_id.is_none()) {
                    String::new()
                } else {
                    rid
                };
                hits.push(EventHit {
                    id: event_id(cal, uid, &master_rid),
                    calendar: cal.to_owned(),
                    item: first.clone(),
                    more_occurrences: items.len() - 1,
                    rank,
                });
            }
            Ok(())
        };
        if text.is_some() {
            for (cal, uid, rank) in &matched {
                if !wanted(cal) {
                    continue;
                }
                if let Some(g) = by_key.get(&(cal.as_str(), uid.as_str())) {
                    hit(g, *rank)?;
                }
            }
        } else {
            for g in window.groups() {
                let attends =
                    |e: &Event| attendee.as_deref().is_none_or(|a| attendees_text(e).contains(a));
                if wanted(&g.calendar) && g.events.iter().any(attends) {
                    hit(g, None)?;
                }
            }
        }
        hits.sort_by(|a, b| {
            let ra = a.rank.unwrap_or(0.0);
            let rb = b.rank.unwrap_or(0.0);
            ra.total_cmp(&rb).then(a.item.start.cmp(&b.item.start)).then_with(|| a.id.cmp(&b.id))
        });
        hits.truncate(limit);
        Ok(hits)
    }

    /// The store's generation: it moves with every write that changes an event.
    pub fn generation(&self) -> Result<i64, CalendarStoreError> {
        Ok(self.db.read(snapshot::generation)?)
    }

    /// Every live event's row and the text its vector is made of (title, location,
    /// description, attendees), cut at `max_chars`; at most [`MAX_CACHED_EVENTS`].
    pub fn embed_sources(
        &self,
        max_chars: usize,
    ) -> Result<Vec<(i64, String)>, CalendarStoreError> {
        Ok(self.db.read(|c| {
            let mut stmt = c
                .prepare(
                    "SELECT rowid, summary, location, description, attendees FROM events
                     WHERE deleted_at IS NULL ORDER BY rowid LIMIT ?1",
                )
                .map_err(|e| StoreError::query("prepare embed sources", e))?;
            let rows = stmt
                .query_map([i64::try_from(MAX_CACHED_EVENTS).unwrap_or(i64::MAX)], |r| {
                    let parts: [String; 4] = [r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?];
                    let text = parts
                        .iter()
                        .filter(|p| !p.trim().is_empty())
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join("\n");
                    Ok((r.get(0)?, text.chars().take(max_chars).collect()))
                })
                .map_err(|e| StoreError::query("embed sources", e))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(|e| StoreError::query("embed source", e))
        })?)
    }

    /// The (calendar, uid) of the live rows `rows` that pass the search's filters, in order.
    fn near_keys(
        &self,
        rows: &[i64],
        attendee: Option<&str>,
        (lo, hi): (i64, i64),
        calendars: &str,
    ) -> Result<Vec<(String, String)>, CalendarStoreError> {
        Ok(self.db.read(|c| {
            let mut stmt = c
                .prepare_cached(
                    "SELECT e.calendar_id, e.uid FROM events e
                     WHERE e.rowid = ?1 AND e.deleted_at IS NULL
                       AND (?2 IS NULL OR instr(e.attendees, ?2) > 0)
                       AND e.start_utc < ?4 AND (e.end_utc IS NULL OR e.end_utc > ?3)
                       AND (?5 = '' OR instr(?5, char(31) || e.calendar_id || char(31)) > 0)",
                )
                .map_err(|e| StoreError::query("prepare near", e))?;
            let mut out: Vec<(String, String)> = Vec::new();
            for row in rows.iter().take(super::vectors::EVENT_VECTOR_CANDIDATES) {
                let key: Option<(String, String)> = stmt
                    .query_row(params![row, attendee, lo, hi, calendars], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })
                    .optional()
                    .map_err(|e| StoreError::query("near", e))?;
                if let Some(k) = key.filter(|k| !out.contains(k)) {
                    out.push(k);
                }
            }
            Ok::<_, StoreError>(out)
        })?)
    }

    /// The item holding the event `id` (Steward's id: the master's, or an occurrence's, or an
    /// alias of one), with
    /// the tag the store knows for it; `None` when no live event has that id.
    pub fn event_item(&self, id: &str) -> Result<Option<EventItem>, CalendarStoreError> {
        let id = &self.resolve_id(id)?;
        Ok(self.db.read(|c| {
            c.query_row(
                "SELECT e.calendar_id, e.href, e.uid, e.summary, i.etag,
                   (SELECT count(DISTINCT o.uid) FROM events o WHERE o.calendar_id = e.calendar_id
                      AND o.href = e.href AND o.deleted_at IS NULL)
                 FROM events e
                 JOIN items i ON i.calendar_id = e.calendar_id AND i.href = e.href
                 WHERE e.id = ?1 AND e.deleted_at IS NULL AND i.deleted_at IS NULL",
                [id],
                |r| {
                    Ok(EventItem {
                        calendar: r.get(0)?,
                        href: r.get(1)?,
                        uid: r.get(2)?,
                        summary: r.get(3)?,
                        etag: r.get(4)?,
                        uids: usize::try_from(r.get::<_, i64>(5)?).unwrap_or(usize::MAX),
                    })
                },
            )
            .optional()
            .map_err(|e| StoreError::query("event item", e))
        })?)
    }

    /// Records that the source of `calendar` keeps the event Steward wrote with UID `alias`
    /// under `uid`: Steward's id for `alias` goes on naming it.
    pub fn record_alias(
        &self,
        calendar: &str,
        alias: &str,
        uid: &str,
        now: i64,
    ) -> Result<(), CalendarStoreError> {
        let alias_id = event_id(calendar, alias, "");
        Ok(self.db.write(|tx| {
            tx.execute(
                "INSERT INTO uid_aliases (alias_id, calendar_id, alias, uid, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (alias_id) DO UPDATE SET uid = excluded.uid",
                params![alias_id, calendar, alias, uid, now],
            )
            .map(|_| ())
            .map_err(|e| StoreError::query("record alias", e))
        })?)
    }

    /// `id`, or the id its UID alias stands for now (see [`CalendarStore::record_alias`]).
    pub fn resolve_id(&self, id: &str) -> Result<String, CalendarStoreError> {
        let aliased: Option<(String, String)> = self.db.read(|c| {
            c.query_row("SELECT calendar_id, uid FROM uid_aliases WHERE alias_id = ?1", [id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
            .map_err(|e| StoreError::query("alias", e))
        })?;
        Ok(aliased.map_or_else(|| id.to_owned(), |(cal, uid)| event_id(&cal, &uid, "")))
    }

    /// The live event `id` (or its alias) as the store parsed it; `None` when there is none.
    pub fn event(&self, id: &str) -> Result<Option<Event>, CalendarStoreError> {
        let id = &self.resolve_id(id)?;
        let json: Option<String> = self.db.read(|c| {
            c.query_row(
                "SELECT event FROM events WHERE id = ?1 AND deleted_at IS NULL",
                [id],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| StoreError::query("event", e))
        })?;
        json.map(|j| {
            serde_json::from_str(&j).map_err(|e| CalendarStoreError::Corrupt(e.to_string()))
        })
        .transpose()
    }

    /// The calendars, by id.
    pub fn calendars(&self) -> Result<Vec<CalendarInfo>, CalendarStoreError> {
        Ok(self.db.read(|c| {
            let mut stmt = c
                .prepare(
                    "SELECT id, name, color FROM calendars WHERE retired_at IS NULL ORDER BY id",
                )
                .map_err(|e| StoreError::query("prepare calendars", e))?;
            let rows = stmt
                .query_map([], |r| {
                    Ok(CalendarInfo { id: r.get(0)?, name: r.get(1)?, color: r.get(2)? })
                })
                .map_err(|e| StoreError::query("calendars", e))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(|e| StoreError::query("calendar", e))
        })?)
    }
}
