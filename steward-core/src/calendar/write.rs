//! Calendar writes through the journal: an event created in, or deleted from, the source it
//! lives in (a vdir, a CalDAV server), like a mail through the outbox.
//!
//! The write is prepared whole first ([`CalendarWrite`]: the item's name, its UID and its exact
//! iCalendar text, or the tag the deleted item must still have), journaled, then applied once
//! by the source's [`CalendarTarget`]; nothing ever applies it a second time. Confirmation
//! re-reads the source ([`Steward::confirm_calendar_writes`]): the item with our UID is there
//! (created) or gone (deleted) — `confirmed` with that evidence — or, after
//! [`crate::journal::CONFIRMATION_LIMIT`] checks, `retry_exhausted`. A crash anywhere leaves a
//! journaled operation that confirmation settles; none writes twice.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{
    Steward, StewardError,
    error::ErrorKind,
    journal::{Confirmation, JournalError, NewOperation, OpState, OpUpdate, Operation},
};

/// Longest an event created through Steward may last, days.
/// Fixed (not a setting).
pub const MAX_EVENT_DAYS: i64 = 366;
/// Operations one confirmation pass checks.
/// Fixed (not a setting).
pub const CONFIRM_BATCH: usize = 100;
/// Seconds a started write is left to its caller before confirmation looks at it.
/// Fixed (not a setting).
pub const STALE_SECS: i64 = 60;

/// Why a calendar write could not be prepared or journaled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CalendarWriteError {
    /// The request cannot be written (times, lengths, a calendar that is not there).
    #[error("{0}")]
    Invalid(String),
    /// No configured source can write that calendar.
    #[error(
        "no writable calendar source for {0:?} (vdir and CalDAV sources are; an .ics file is not)"
    )]
    NotWritable(String),
    /// The event is not in the store.
    #[error("no event {0:?}")]
    NoEvent(String),
    /// The item changed (or went) at its source since the store read it.
    #[error("{0}")]
    Changed(String),
    /// The source could not be read.
    #[error("{0}")]
    SourceUnavailable(String),
    /// The journal.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The store.
    #[error(transparent)]
    Store(#[from] super::store::CalendarStoreError),
}

impl StewardError for CalendarWriteError {
    fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "CALENDAR_WRITE_INVALID",
            Self::NotWritable(_) => "CALENDAR_NOT_WRITABLE",
            Self::NoEvent(_) => "CALENDAR_EVENT_NOT_FOUND",
            Self::Changed(_) => "CALENDAR_ITEM_CHANGED",
            Self::SourceUnavailable(_) => "CALENDAR_SOURCE_UNAVAILABLE",
            Self::Journal(e) => e.code(),
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Invalid(_) => ErrorKind::InvalidInput,
            Self::NotWritable(_) | Self::NoEvent(_) => ErrorKind::NotFound,
            Self::Changed(_) => ErrorKind::Conflict,
            Self::SourceUnavailable(_) => ErrorKind::Unavailable,
            Self::Journal(e) => e.kind(),
            Self::Store(e) => e.kind(),
        }
    }
}

/// What a write does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteAction {
    /// A new item (never overwrites one).
    Create,
    /// The item replaced by its edited text (only while it still has the tag it had when the
    /// edit was prepared; its name is kept).
    Update,
    /// The item removed (only while it still has the tag it had when the write was prepared).
    Delete,
}

/// A write, complete: what is journaled and what the target applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CalendarWrite {
    /// Create or delete.
    pub action: WriteAction,
    /// The account of the source.
    pub account: String,
    /// The collection in it.
    pub collection: String,
    /// The item's name in the collection.
    pub href: String,
    /// The event's UID.
    pub uid: String,
    /// What it is, for people (the journal's list, the approval card).
    pub summary: String,
    /// Create: the exact iCalendar text written.
    pub text: Option<String>,
    /// Delete and update: the item's tag when the write was prepared (a changed item is not
    /// touched).
    pub etag: Option<String>,
    /// Create and update: the event as the source must show it afterwards (what confirmation
    /// reads back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<ExpectedEvent>,
}

/// An event as a confirmed create or update leaves it in its source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedEvent {
    /// The occurrence it replaces (`2025-04-07T09:00:00`, wall clock), for an override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recurrence_id: Option<String>,
    /// Its title.
    pub summary: String,
    /// Its start, Unix seconds (an all-day event: midnight in the person's zone).
    pub start: i64,
    /// Its end, Unix seconds (an all-day event: the midnight after its last day).
    pub end: i64,
    /// An update: the SEQUENCE it writes (above anything the item held before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<i64>,
    /// An update that sets the location: the location (empty: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// An update that sets the description: the description (empty: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl ExpectedEvent {
    /// Whether `e` (read back from the source) is this event.
    fn seen_in(&self, uid: &str, e: &super::Event, person: chrono_tz::Tz) -> bool {
        let rid = e.recurrence_id.map(|r| r.wall().format("%Y-%m-%dT%H:%M:%S").to_string());
        let start = e.start.instant(person).timestamp();
        // Days end at a midnight of the person's zone (23 or 25 hours across a change).
        let end = match e.start {
            super::EventTime::Date(d) => {
                let days = (e.duration_secs / 86_400).max(1);
                super::EventTime::Date(d + chrono::Duration::days(days)).instant(person).timestamp()
            }
            _ => start + e.duration_secs,
        };
        let same = |want: &Option<String>, got: &Option<String>| {
            want.as_ref().is_none_or(|w| w.trim() == got.as_deref().unwrap_or_default().trim())
        };
        e.uid == uid
            && rid == self.recurrence_id
            && e.summary == self.summary
            && start == self.start
            && end == self.end
            && self.sequence.is_none_or(|n| e.sequence == n)
            && same(&self.location, &e.location)
            && same(&self.description, &e.description)
    }
}

/// Text a person gave for an event, as it is written: control characters (which iCalendar
/// text cannot hold) dropped, but a description's line breaks.
fn clean(text: &str, lines: bool) -> String {
    text.chars().filter(|c| !c.is_control() || (lines && *c == '\n')).collect()
}

impl CalendarWrite {
    /// The journal's kind.
    pub fn kind(&self) -> &'static str {
        match self.action {
            WriteAction::Create => "calendar.create_event",
            WriteAction::Delete => "calendar.delete_event",
            WriteAction::Update => "calendar.update_event",
        }
    }

    /// What confirmation looks for.
    pub fn expected(&self) -> serde_json::Value {
        json!({
            "action": self.action,
            "calendar": format!("{}/{}", self.account, self.collection),
            "href": self.href,
            "uid": self.uid,
        })
    }
}

/// Why a target could not apply or observe a write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct WriteError {
    /// Whether the write may have been applied (a timeout after sending): confirmation
    /// decides; otherwise it certainly was not.
    pub maybe_applied: bool,
    /// What happened.
    pub message: String,
}

/// An item as a target reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// It is there, with this tag and text.
    Present {
        /// Its tag.
        etag: String,
        /// Its text.
        text: String,
        /// Its events as the source's reader reads them (empty when they cannot be read).
        events: Vec<super::Event>,
    },
    /// It is not there.
    Absent,
}

/// A source that takes writes (a vdir, a CalDAV account): implemented in the connectors.
pub trait CalendarTarget: Send + Sync {
    /// The account it writes (the store's account of its events).
    fn account(&self) -> &str;
    /// Applies `w` once: a create never overwrites an item, an update replaces and a delete
    /// removes only an item whose tag is still `w.etag`. Returns the item's new tag when the source gives one.
    fn apply(&self, w: &CalendarWrite) -> Result<Option<String>, WriteError>;
    /// Reads the item of `w` back.
    fn observe(&self, w: &CalendarWrite) -> Result<Observed, WriteError>;
}

impl std::fmt::Debug for dyn CalendarTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CalendarTarget").field("account", &self.account()).finish()
    }
}

/// A new event as asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    /// Its title.
    pub title: String,
    /// Start, RFC 3339 with an offset.
    pub start: String,
    /// End, RFC 3339 with an offset.
    pub end: String,
    /// Where.
    pub location: Option<String>,
    /// More.
    pub description: Option<String>,
    /// Attendee addresses (listed in the event; invitations are mails of their own).
    pub attendees: Vec<String>,
    /// The person's address, written as ORGANIZER when there are attendees (so replies to
    /// an invitation come back to them).
    pub organizer: Option<String>,
}

/// iCalendar TEXT escaping (RFC 5545 §3.3.11).
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\;"),
            ',' => out.push_str("\\,"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// [`escape`] undone.
pub(crate) fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('n' | 'N') => out.push('\n'),
                Some(x) => out.push(x),
                None => out.push('\\'),
            },
            (c, false) => out.push(c),
        }
    }
    out
}

/// One content line, folded at 75 octets (RFC 5545 §3.1), with its CRLF.
pub(crate) fn line(out: &mut String, text: &str) {
    let mut width = 0;
    for c in text.chars() {
        if width + c.len_utf8() > 75 {
            out.push_str("\r\n ");
            width = 1;
        }
        out.push(c);
        width += c.len_utf8();
    }
    out.push_str("\r\n");
}

fn utc(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y%m%dT%H%M%SZ").to_string()
}

/// `NAME:time` in `zone` (`NAME;TZID=Europe/Rome:20260310T170000`), or in UTC for UTC.
fn zoned(name: &str, t: chrono::DateTime<chrono::Utc>, zone: chrono_tz::Tz) -> String {
    if zone == chrono_tz::Tz::UTC {
        format!("{name}:{}", utc(t))
    } else {
        format!("{name};TZID={}:{}", zone.name(), t.with_timezone(&zone).format("%Y%m%dT%H%M%S"))
    }
}

/// `±HHMM` (or `±HHMMSS`) of an offset in seconds.
fn offset_text(secs: i32) -> String {
    let sign = if secs < 0 { '-' } else { '+' };
    let a = secs.unsigned_abs();
    let (h, m, s) = (a / 3600, a / 60 % 60, a % 60);
    if s == 0 { format!("{sign}{h:02}{m:02}") } else { format!("{sign}{h:02}{m:02}{s:02}") }
}

/// Days around a created event whose zone changes its VTIMEZONE lists.
/// Fixed (not a setting).
const VTIMEZONE_SPAN_DAYS: i64 = 366;

/// The VTIMEZONE of `zone` (RFC 5545 §3.6.5) around `[from, to]`: one observance per offset
/// change from a year before to a year after (so every time of the event falls after the
/// onset of one), found in the zone's own rules; a zone without a change there gets one
/// standard observance.
pub(crate) fn vtimezone(
    zone: chrono_tz::Tz,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
) -> Vec<String> {
    use chrono::{Offset as _, TimeZone as _};
    use chrono_tz::{OffsetComponents as _, OffsetName as _};
    let at = |t: chrono::DateTime<chrono::Utc>| {
        let o = zone.offset_from_utc_datetime(&t.naive_utc());
        (o.fix().local_minus_utc(), !o.dst_offset().is_zero(), o.abbreviation().map(str::to_owned))
    };
    let day = chrono::Duration::days(1);
    let (start, end) = (
        from - chrono::Duration::days(VTIMEZONE_SPAN_DAYS),
        to + chrono::Duration::days(VTIMEZONE_SPAN_DAYS),
    );
    let mut changes = Vec::new();
    let (mut t, mut now) = (start, at(start));
    let first = now.clone();
    while t < end {
        let next = at(t + day);
        if (next.0, next.1) != (now.0, now.1) {
            // The second it changes: the last one with the old offset is `lo`.
            let (mut lo, mut hi) = (t, t + day);
            while hi - lo > chrono::Duration::seconds(1) {
                let mid = lo + (hi - lo) / 2;
                if (at(mid).0, at(mid).1) == (now.0, now.1) { lo = mid } else { hi = mid }
            }
            changes.push((hi, now.0, next.clone()));
        }
        now = next;
        t += day;
    }
    let mut out = vec!["BEGIN:VTIMEZONE".to_owned(), format!("TZID:{}", zone.name())];
    let mut observance = |kind: &str,
                          onset: chrono::NaiveDateTime,
                          off_from: i32,
                          to: &(i32, bool, Option<String>)| {
        out.push(format!("BEGIN:{kind}"));
        out.push(format!("DTSTART:{}", onset.format("%Y%m%dT%H%M%S")));
        out.push(format!("TZOFFSETFROM:{}", offset_text(off_from)));
        out.push(format!("TZOFFSETTO:{}", offset_text(to.0)));
        if let Some(n) = to.2.as_deref().filter(|n| !n.is_empty()) {
            out.push(format!("TZNAME:{}", escape(n)));
        }
        out.push(format!("END:{kind}"));
    };
    if changes.is_empty() {
        let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)
            .unwrap_or_default()
            .and_time(chrono::NaiveTime::MIN);
        observance("STANDARD", epoch, first.0, &first);
    }
    for (when, off_from, to) in &changes {
        // The onset is written in the wall-clock time it had before the change.
        let onset = when.naive_utc() + chrono::Duration::seconds(i64::from(*off_from));
        observance(if to.1 { "DAYLIGHT" } else { "STANDARD" }, onset, *off_from, to);
    }
    out.push("END:VTIMEZONE".to_owned());
    out
}

/// The iCalendar text of `e` with `uid`, its times in `zone` (the person's: the event keeps
/// its wall-clock time across DST changes as they see it), stamped `now`.
pub fn render_event(
    e: &NewEvent,
    uid: &str,
    (start, end): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
    zone: chrono_tz::Tz,
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    let mut out = String::new();
    for l in ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//Steward//Steward//EN"] {
        line(&mut out, l);
    }
    // The zone its TZID names, defined in the item (RFC 5545 §3.2.19): a reader that does not
    // know IANA names still places the times.
    if zone != chrono_tz::Tz::UTC {
        for l in vtimezone(zone, start, end) {
            line(&mut out, &l);
        }
    }
    line(&mut out, "BEGIN:VEVENT");
    line(&mut out, &format!("UID:{}", escape(uid)));
    line(&mut out, &format!("DTSTAMP:{}", utc(now)));
    line(&mut out, &zoned("DTSTART", start, zone));
    line(&mut out, &zoned("DTEND", end, zone));
    line(&mut out, &format!("SUMMARY:{}", escape(&e.title)));
    if let Some(l) = &e.location {
        line(&mut out, &format!("LOCATION:{}", escape(l)));
    }
    if let Some(d) = &e.description {
        line(&mut out, &format!("DESCRIPTION:{}", escape(d)));
    }
    if let Some(o) = e.organizer.as_ref().filter(|_| !e.attendees.is_empty()) {
        line(&mut out, &format!("ORGANIZER:mailto:{o}"));
    }
    for a in &e.attendees {
        line(&mut out, &format!("ATTENDEE;PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:{a}"));
    }
    for l in ["END:VEVENT", "END:VCALENDAR"] {
        line(&mut out, l);
    }
    out
}

fn invalid(m: impl Into<String>) -> CalendarWriteError {
    CalendarWriteError::Invalid(m.into())
}

impl Steward {
    /// The write creating `e` in `calendar` (`account/collection`), its UID and name derived
    /// from `key` (the same request prepared again is the same write).
    pub fn prepare_event_create(
        &self,
        e: &NewEvent,
        calendar: &str,
        key: &str,
        now: i64,
    ) -> Result<CalendarWrite, CalendarWriteError> {
        use sha2::Digest as _;
        let time = |t: &str, what: &str| {
            chrono::DateTime::parse_from_rfc3339(t.trim())
                .map(|t| t.with_timezone(&chrono::Utc))
                .map_err(|_| invalid(format!("{what} {t:?}: expected RFC 3339 with an offset")))
        };
        let (start, end) = (time(&e.start, "start")?, time(&e.end, "end")?);
        if end <= start || end - start > chrono::Duration::days(MAX_EVENT_DAYS) {
            return Err(invalid(format!(
                "the end must come after the start, at most {MAX_EVENT_DAYS} days later"
            )));
        }
        let title = clean(&e.title, false);
        let title = title.trim();
        if title.is_empty() || title.chars().count() > super::MAX_SUMMARY_CHARS {
            return Err(invalid(format!(
                "a title of 1 to {} characters",
                super::MAX_SUMMARY_CHARS
            )));
        }
        if e.location.as_ref().is_some_and(|l| l.chars().count() > super::MAX_LOCATION_CHARS)
            || e.description
                .as_ref()
                .is_some_and(|d| d.chars().count() > super::MAX_DESCRIPTION_CHARS)
        {
            return Err(invalid("the location or description is too long"));
        }
        let mut attendees = Vec::new();
        for a in &e.attendees {
            let n = crate::contacts::normalize_email(a)
                .ok_or_else(|| invalid(format!("attendee {a:?} is not an address")))?;
            attendees.push(n);
        }
        let (account, collection) = calendar
            .split_once('/')
            .filter(|(a, c)| !a.is_empty() && !c.is_empty() && !c.contains('/'))
            .ok_or_else(|| {
                invalid(format!("calendar {calendar:?}: expected account/collection"))
            })?;
        let digest: String = sha2::Sha256::digest(key.as_bytes())
            .iter()
            .take(12)
            .map(|b| format!("{b:02x}"))
            .collect();
        let uid = format!("{digest}@steward");
        let stamp = chrono::DateTime::from_timestamp(now, 0).unwrap_or_default();
        let organizer = e.organizer.as_deref().and_then(crate::contacts::normalize_email);
        let event = NewEvent {
            title: title.to_owned(),
            attendees,
            organizer,
            location: e.location.as_deref().map(|l| clean(l, false)),
            description: e.description.as_deref().map(|d| clean(d, true)),
            ..e.clone()
        };
        Ok(CalendarWrite {
            action: WriteAction::Create,
            account: account.to_owned(),
            collection: collection.to_owned(),
            href: format!("{digest}.ics"),
            uid: uid.clone(),
            summary: title.to_owned(),
            text: Some(render_event(
                &event,
                &uid,
                (start, end),
                self.calendar_settings().zone,
                stamp,
            )),
            etag: None,
            expect: Some(ExpectedEvent {
                recurrence_id: None,
                summary: title.to_owned(),
                start: start.timestamp(),
                end: end.timestamp(),
                sequence: None,
                location: None,
                description: None,
            }),
        })
    }

    /// The write deleting the item of the event `event_id` (every occurrence of it), while the
    /// item still has the tag the store knows.
    pub fn prepare_event_delete(
        &self,
        event_id: &str,
    ) -> Result<CalendarWrite, CalendarWriteError> {
        let item = self
            .calendar_store()?
            .event_item(event_id)?
            .ok_or_else(|| CalendarWriteError::NoEvent(event_id.to_owned()))?;
        if item.uids > 1 {
            return Err(invalid(format!(
                "{} also holds {} other event(s): Steward deletes only a file of one event",
                item.href,
                item.uids - 1
            )));
        }
        let (account, collection) = item
            .calendar
            .split_once('/')
            .ok_or_else(|| CalendarWriteError::NoEvent(event_id.to_owned()))?;
        Ok(CalendarWrite {
            action: WriteAction::Delete,
            account: account.to_owned(),
            collection: collection.to_owned(),
            href: item.href,
            uid: item.uid,
            summary: item.summary,
            text: None,
            etag: Some(item.etag),
            expect: None,
        })
    }

    /// Checks the change `u` against the store (the event, the occurrence, times against the
    /// boundary left unchanged) and says what it does: what an approval card shows, before
    /// the source is read.
    pub fn plan_event_update(&self, u: &EventUpdate) -> Result<UpdatePlan, CalendarWriteError> {
        let person = self.calendar_settings().zone;
        let store = self.calendar_store()?;
        let (item, master) = self.event_and_item(&u.event_id)?;
        let u = &EventUpdate {
            title: u.title.as_deref().map(|t| clean(t, false).trim().to_owned()),
            location: u.location.as_deref().map(|l| clean(l, false)),
            description: u.description.as_deref().map(|d| clean(d, true)),
            ..u.clone()
        };
        if u.title.is_none()
            && u.start.is_none()
            && u.end.is_none()
            && u.location.is_none()
            && u.description.is_none()
        {
            return Err(invalid("nothing to change: give a title, times, location or description"));
        }
        if let Some(t) = &u.title
            && (t.trim().is_empty() || t.trim().chars().count() > super::MAX_SUMMARY_CHARS)
        {
            return Err(invalid(format!(
                "a title of 1 to {} characters",
                super::MAX_SUMMARY_CHARS
            )));
        }
        if u.location.as_ref().is_some_and(|l| l.chars().count() > super::MAX_LOCATION_CHARS)
            || u.description
                .as_ref()
                .is_some_and(|d| d.chars().count() > super::MAX_DESCRIPTION_CHARS)
        {
            return Err(invalid("the location or description is too long"));
        }
        let repeats = master.repeats();
        // The event the change applies to: the master, or one occurrence of a repeating one
        // (its override when it has one).
        let (rid, current, over_rid) = match &u.occurrence {
            None => (None, master.clone(), None),
            Some(_) if !repeats => {
                return Err(invalid("the event does not repeat: leave occurrence out"));
            }
            Some(o) => {
                let wall = chrono::NaiveDateTime::parse_from_str(o.trim(), "%Y-%m-%dT%H:%M:%S")
                    .map_err(|_| {
                        invalid(format!(
                            "occurrence {o:?}: its recurrence_id as the agenda shows it \
                             (2025-04-07T09:00:00)"
                        ))
                    })?;
                let rid = wall.format("%Y-%m-%dT%H:%M:%S").to_string();
                let over = store.event(&super::store::event_id(&item.calendar, &item.uid, &rid))?;
                let at = master.start.with_wall(wall);
                let around = at.instant(person).with_timezone(&chrono::Utc);
                let day = chrono::Duration::days(1);
                let real = super::recur::occurrences(
                    &master.start,
                    master.duration(),
                    &master.recurrence,
                    person,
                    around - day,
                    around + day,
                    super::MAX_INSTANCES,
                )
                .map_err(|e| invalid(e.to_string()))?
                .iter()
                .any(|x| x.recurrence_id == wall);
                match over {
                    Some(e) => {
                        let written = e.recurrence_id;
                        (Some(wall), e, written)
                    }
                    None if real => {
                        (Some(wall), super::Event { start: at, ..master.clone() }, None)
                    }
                    None => {
                        return Err(invalid(format!(
                            "{} has no occurrence at {rid}",
                            item.summary
                        )));
                    }
                }
            }
        };
        if repeats && rid.is_none() && (u.start.is_some() || u.end.is_some()) {
            return Err(invalid(
                "the event repeats: give occurrence to change one occurrence's times",
            ));
        }
        let before = Span::of(&current, person);
        let after = before.changed(u.start.as_deref(), u.end.as_deref(), person)?;
        let mut what = Vec::new();
        if let Some(t) = &u.title {
            what.push(format!("title \"{}\"", t.trim()));
        }
        if after != before {
            what.push(format!("from {} to {}", before.show(person), after.show(person)));
        }
        if let Some(l) = &u.location {
            what.push(if l.trim().is_empty() {
                "no location".into()
            } else {
                format!("location {l:?}")
            });
        }
        if u.description.is_some() {
            what.push("a new description".into());
        }
        let of = rid.map_or_else(String::new, |r| {
            format!(" (the occurrence of {})", r.format("%Y-%m-%d %H:%M"))
        });
        let summary =
            u.title.as_deref().map_or_else(|| current.summary.clone(), |t| t.trim().to_owned());
        Ok(UpdatePlan {
            describe: format!(
                "Change \"{}\"{of} in {}: {}",
                current.summary,
                item.calendar,
                what.join(", ")
            ),
            item,
            master,
            rid,
            over_rid,
            times: (after != before || u.occurrence.is_some()).then_some(after),
            summary,
            update: u.clone(),
        })
    }

    /// Reads the item `probe` names from its source and confirms the writes to it still
    /// waiting whose effect shows there: before another write replaces what they wrote, so a
    /// change made soon after another never leaves the first to end `retry_exhausted`.
    pub fn settle_calendar_item(
        &self,
        target: &dyn CalendarTarget,
        probe: &CalendarWrite,
        now: i64,
    ) -> Result<Observed, WriteError> {
        let seen = target.observe(probe)?;
        let person = self.calendar_settings().zone;
        let same = |w: &CalendarWrite| {
            (&w.account, &w.collection, &w.href) == (&probe.account, &probe.collection, &probe.href)
        };
        let settle = || -> Result<(), CalendarWriteError> {
            let journal = self.journal()?;
            // A write started and not yet recorded is confirmed too when what it wrote shows
            // (its SEQUENCE and fields, the item's tag moved): a crash may have come between
            // its write and its record, and the next change would hide the evidence.
            for op in journal.confirmable("calendar.", now, CONFIRM_BATCH)? {
                let Ok(w) = serde_json::from_value::<CalendarWrite>(op.input.clone()) else {
                    continue;
                };
                if let Some(evidence) =
                    same(&w).then(|| evidence_of(&w, Ok(&seen), person)).flatten()
                {
                    record_alias(self, &w, &evidence, now)?;
                    journal.confirm(op.id, Confirmation::observed(evidence), now)?;
                }
            }
            Ok(())
        };
        // Settling is a courtesy: the confirmation pass does it too.
        if let Err(e) = settle() {
            tracing::warn!(error = %e, "calendar writes not settled");
        }
        Ok(seen)
    }

    /// The item holding the event `event_id` as its source (`target`) holds it now: its text
    /// and tag (writes still waiting on it settled first, see
    /// [`Steward::settle_calendar_item`]).
    pub fn read_event_source(
        &self,
        item: &super::store::EventItem,
        target: &dyn CalendarTarget,
        now: i64,
    ) -> Result<(String, String), CalendarWriteError> {
        let (account, collection) = item
            .calendar
            .split_once('/')
            .ok_or_else(|| CalendarWriteError::NoEvent(item.calendar.clone()))?;
        let probe = CalendarWrite {
            action: WriteAction::Update,
            account: account.to_owned(),
            collection: collection.to_owned(),
            href: item.href.clone(),
            uid: item.uid.clone(),
            summary: item.summary.clone(),
            text: None,
            etag: None,
            expect: None,
        };
        match self.settle_calendar_item(target, &probe, now) {
            Ok(Observed::Present { etag, text, .. }) => Ok((text, etag)),
            Ok(Observed::Absent) => Err(CalendarWriteError::Changed(format!(
                "{} is no longer in its calendar: index the calendar again",
                item.href
            ))),
            Err(e) => Err(CalendarWriteError::SourceUnavailable(e.message)),
        }
    }

    /// Reads the item of `plan` from its source (`target`) and prepares the write over it
    /// (see [`Steward::prepare_event_update`]).
    pub fn read_and_prepare_update(
        &self,
        plan: &UpdatePlan,
        target: &dyn CalendarTarget,
        now: i64,
    ) -> Result<CalendarWrite, CalendarWriteError> {
        let (text, etag) = self.read_event_source(&plan.item, target, now)?;
        self.prepare_event_update(plan, &text, &etag, now)
    }

    /// The event `event_id` (or its alias): its item as the store knows it, and its master.
    fn event_and_item(
        &self,
        event_id: &str,
    ) -> Result<(super::store::EventItem, super::Event), CalendarWriteError> {
        let store = self.calendar_store()?;
        let no_event = || CalendarWriteError::NoEvent(event_id.to_owned());
        let item = store.event_item(event_id)?.ok_or_else(no_event)?;
        let master = store
            .event(&super::store::event_id(&item.calendar, &item.uid, ""))?
            .ok_or_else(no_event)?;
        Ok((item, master))
    }

    /// The write of `plan` over the item's current `text` (read from its source with tag
    /// `etag`): refused when the item changed since the store read it.
    pub fn prepare_event_update(
        &self,
        plan: &UpdatePlan,
        text: &str,
        etag: &str,
        now: i64,
    ) -> Result<CalendarWrite, CalendarWriteError> {
        if etag != plan.item.etag {
            return Err(CalendarWriteError::Changed(format!(
                "{} changed since it was read: index the calendar again",
                plan.item.href
            )));
        }
        let person = self.calendar_settings().zone;
        let uid = &plan.item.uid;
        let edit_error = |e: super::edit::EditError| invalid(e.0);
        let form = super::edit::master_form(text, uid).map_err(edit_error)?;
        let zone = plan.master.start.zone(person);
        let times = plan.times.map(|t| t.lines(&form, zone));
        let occurrence = plan.rid.map(|wall| {
            // An override the store holds is found as its item writes it (UTC, a date or
            // another zone's wall clock); a new one takes the master's form.
            let written = match plan.over_rid {
                Some(super::EventTime::Date(d)) => d.format("%Y%m%d").to_string(),
                Some(super::EventTime::Utc(w)) => w.format("%Y%m%dT%H%M%SZ").to_string(),
                Some(t) => t.wall().format("%Y%m%dT%H%M%S").to_string(),
                None => match form {
                    super::edit::Form::Date => wall.format("%Y%m%d").to_string(),
                    _ => wall.format("%Y%m%dT%H%M%S").to_string(),
                },
            };
            super::edit::Occurrence {
                rid: written,
                line: form.line("RECURRENCE-ID", wall),
                exists: plan.over_rid.is_some(),
            }
        });
        let stamp = chrono::DateTime::from_timestamp(now, 0).unwrap_or_default();
        let changes = super::edit::Changes {
            summary: plan.update.title.as_ref().map(|t| t.trim().to_owned()),
            location: plan.update.location.clone(),
            description: plan.update.description.clone(),
            times,
            stamp: utc(stamp),
        };
        let (new, sequence) =
            super::edit::edit(text, uid, occurrence.as_ref(), &changes).map_err(edit_error)?;
        let (account, collection) = plan
            .item
            .calendar
            .split_once('/')
            .ok_or_else(|| CalendarWriteError::NoEvent(plan.update.event_id.clone()))?;
        let span = plan.times.unwrap_or_else(|| Span::of(&plan.master, person));
        let (start, end) = span.instants(person);
        Ok(CalendarWrite {
            action: WriteAction::Update,
            account: account.to_owned(),
            collection: collection.to_owned(),
            href: plan.item.href.clone(),
            uid: uid.clone(),
            summary: plan.summary.clone(),
            text: Some(new),
            etag: Some(plan.item.etag.clone()),
            // Confirmation reads the changed event back: what this write put there and the
            // item held before it did not (its SEQUENCE, its fields).
            expect: Some(ExpectedEvent {
                recurrence_id: plan.rid.map(|r| r.format("%Y-%m-%dT%H:%M:%S").to_string()),
                summary: plan.summary.clone(),
                start: start.timestamp(),
                end: end.timestamp(),
                sequence: Some(sequence),
                location: plan.update.location.clone(),
                description: plan.update.description.clone(),
            }),
        })
    }

    /// Journals `w` under `key` and applies it once through `target`. The same key with the
    /// same write returns the operation already journaled **without** applying it again;
    /// with another write it is refused (`JOURNAL_KEY_REUSED`).
    pub fn write_calendar(
        &self,
        w: &CalendarWrite,
        key: &str,
        approval_id: Option<i64>,
        target: &dyn CalendarTarget,
        now: i64,
    ) -> Result<Operation, CalendarWriteError> {
        if target.account() != w.account {
            return Err(CalendarWriteError::NotWritable(format!("{}/{}", w.account, w.collection)));
        }
        let journal = self.journal()?;
        let input = serde_json::to_value(w).map_err(|e| invalid(e.to_string()))?;
        let (op, inserted) = journal.record_new(
            &NewOperation {
                kind: w.kind().to_owned(),
                idempotency_key: key.to_owned(),
                input,
                expected: w.expected(),
                approval_id,
                scheduled_for: None,
            },
            now,
        )?;
        if !inserted || op.state != OpState::Started {
            return Ok(op);
        }
        fail::fail_point!("calendar::after_journal", |_| std::process::abort());
        let (to, update) = match target.apply(w) {
            Ok(etag) => (
                OpState::BackendReturned,
                OpUpdate { backend_result: Some(json!({ "etag": etag })), ..OpUpdate::default() },
            ),
            Err(e) => (
                if e.maybe_applied { OpState::Unknown } else { OpState::Failed },
                OpUpdate { error: Some(e.message), ..OpUpdate::default() },
            ),
        };
        fail::fail_point!("calendar::after_write", |_| std::process::abort());
        let op = match journal.transition(op.id, to, &update, crate::time::now_secs().max(now)) {
            Ok(op) => op,
            // Confirmed meanwhile from the source (another call settled the item): done.
            Err(JournalError::IllegalTransition { from: OpState::Confirmed, .. }) => {
                journal.get(op.id)?
            }
            Err(e) => return Err(e.into()),
        };
        fail::fail_point!("calendar::after_record", |_| std::process::abort());
        Ok(op)
    }

    /// Re-reads the source of every calendar write waiting for confirmation: the created item
    /// with our UID there, or the deleted one gone, confirms it with that evidence; otherwise
    /// the check is counted (the last allowed ends it `retry_exhausted`). A write whose
    /// account no target serves waits.
    pub fn confirm_calendar_writes(
        &self,
        targets: &[std::sync::Arc<dyn CalendarTarget>],
        now: i64,
    ) -> Result<CalendarConfirmReport, CalendarWriteError> {
        let journal = self.journal()?;
        let mut report = CalendarConfirmReport::default();
        for op in journal.confirmable("calendar.", now - STALE_SECS, CONFIRM_BATCH)? {
            let Ok(w) = serde_json::from_value::<CalendarWrite>(op.input.clone()) else {
                continue;
            };
            let Some(target) = targets.iter().find(|t| t.account() == w.account) else {
                report.no_target += 1;
                continue;
            };
            report.checked += 1;
            fail::fail_point!("calendar::during_confirm", |_| std::process::abort());
            let seen = target.observe(&w);
            let done = evidence_of(&w, seen.as_ref(), self.calendar_settings().zone);
            match done {
                Some(evidence) => {
                    record_alias(self, &w, &evidence, now)?;
                    journal.confirm(op.id, Confirmation::observed(evidence), now)?;
                    report.confirmed += 1;
                }
                None => {
                    let evidence = match seen {
                        Ok(Observed::Present { etag, .. }) => {
                            json!({ "seen": "present", "etag": etag })
                        }
                        Ok(Observed::Absent) => json!({ "seen": "absent" }),
                        Err(e) => json!({ "error": e.message }),
                    };
                    let after = journal.confirmation_missed(op.id, now, Some(evidence))?;
                    if after.state == OpState::RetryExhausted {
                        report.exhausted += 1;
                    } else {
                        report.pending += 1;
                    }
                }
            }
        }
        Ok(report)
    }
}

/// Why an invitation cannot be sent (see [`Steward::invitation_draft`]).
fn not_invitable(e: super::edit::EditError) -> CalendarWriteError {
    invalid(e.0)
}

impl Steward {
    /// Who `calendar.invite` invites to the event `event_id` and the line its approval card
    /// shows: `only` (each of whom must be an attendee), or when empty every attendee but
    /// `organizer`. Refused for another's event and for one with nobody to invite.
    pub fn invitation_card(
        &self,
        event_id: &str,
        organizer: &str,
        only: &[String],
    ) -> Result<(Vec<String>, String), CalendarWriteError> {
        let person = self.calendar_settings().zone;
        let (_, master) = self.event_and_item(event_id)?;
        let me = organizer.trim().to_lowercase();
        if let Some(o) = master.organizer.as_ref().filter(|o| o.to_lowercase() != me) {
            return Err(invalid(format!(
                "the event's organizer is {o}: only the organizer sends invitations"
            )));
        }
        let all: Vec<String> =
            master.attendees.iter().map(|a| a.email.to_lowercase()).filter(|a| *a != me).collect();
        let mut who: Vec<String> = if only.is_empty() {
            all
        } else {
            let asked: Vec<String> = only.iter().map(|a| a.trim().to_lowercase()).collect();
            if let Some(a) = asked.iter().find(|a| !all.contains(a)) {
                return Err(invalid(format!("{a} is not an attendee of the event")));
            }
            asked
        };
        who.sort();
        who.dedup();
        if who.is_empty() {
            return Err(invalid("the event has no attendees to invite: add them first"));
        }
        let card = format!(
            "Invite {} to \"{}\" ({}{})",
            who.join(", "),
            master.summary,
            Span::of(&master, person).show(person),
            if master.repeats() { ", repeating" } else { "" }
        );
        Ok((who, card))
    }

    /// The invitation mail for the event `event_id` to `approved` (the attendees its card
    /// named), from `sender` (the organizer): its body says what and when, and the iTIP
    /// request built from `text` — the item as its source holds it now — goes as the body's
    /// `text/calendar` alternative. Refused when one of them is no longer an attendee there;
    /// an attendee added since is not invited by it.
    pub fn invitation_draft(
        &self,
        event_id: &str,
        text: &str,
        sender: &crate::outbox::Sender,
        approved: &[String],
        now: i64,
    ) -> Result<crate::outbox::MailDraft, CalendarWriteError> {
        let person = self.calendar_settings().zone;
        let (who, _) = self.invitation_card(event_id, &sender.from, approved)?;
        let (item, master) = self.event_and_item(event_id)?;
        let stamp = utc(chrono::DateTime::from_timestamp(now, 0).unwrap_or_default());
        let inv = super::edit::itip_request(text, &item.uid, &sender.from, &stamp)
            .map_err(not_invitable)?;
        if let Some(gone) = who.iter().find(|a| !inv.attendees.contains(a)) {
            return Err(CalendarWriteError::Changed(format!(
                "{gone} is no longer an attendee of the event: ask again"
            )));
        }
        let when = Span::of(&master, person).show(person);
        let mut body = format!("{}\n{when}\n", master.summary);
        if let Some(l) = &master.location {
            body.push_str(&format!("{l}\n"));
        }
        let from = sender.from_name.clone().unwrap_or_else(|| sender.from.clone());
        body.push_str(&format!(
            "\nAn invitation from {from}: your calendar app can accept or decline it.\n"
        ));
        Ok(crate::outbox::MailDraft {
            account: sender.account.clone(),
            from: sender.from.clone(),
            from_name: sender.from_name.clone(),
            to: who,
            subject: format!("Invitation: {} @ {when}", master.summary),
            body,
            calendar: Some(inv.text),
            ..crate::outbox::MailDraft::default()
        })
    }
}

/// A change to an event, as asked for (see `calendar.update_event`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventUpdate {
    /// The event's id.
    pub event_id: String,
    /// One occurrence of a repeating event: its recurrence id as the agenda shows it.
    pub occurrence: Option<String>,
    /// A new title.
    pub title: Option<String>,
    /// A new start: RFC 3339 with an offset, or `YYYY-MM-DD` (all day). Alone, the event keeps
    /// its length.
    pub start: Option<String>,
    /// A new end (exclusive for days).
    pub end: Option<String>,
    /// A new location (empty: none).
    pub location: Option<String>,
    /// A new description (empty: none).
    pub description: Option<String>,
}

/// A checked change: what it does, and what the write needs.
#[derive(Debug, Clone)]
pub struct UpdatePlan {
    /// One line for the approval card.
    pub describe: String,
    /// The item holding the event, as the store knows it.
    pub item: super::store::EventItem,
    master: super::Event,
    rid: Option<chrono::NaiveDateTime>,
    /// The RECURRENCE-ID of the override the store holds for `rid`, as its item writes it.
    over_rid: Option<super::EventTime>,
    times: Option<Span>,
    summary: String,
    update: EventUpdate,
}

/// When an event takes place: whole days, or a span of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Span {
    Days(chrono::NaiveDate, chrono::NaiveDate),
    Timed(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
}

/// A time as asked for: a day, or an instant.
enum When {
    Day(chrono::NaiveDate),
    At(chrono::DateTime<chrono::Utc>),
}

fn when(t: &str, what: &str) -> Result<When, CalendarWriteError> {
    let t = t.trim();
    if let Ok(d) = chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return Ok(When::Day(d));
    }
    chrono::DateTime::parse_from_rfc3339(t)
        .map(|x| When::At(x.with_timezone(&chrono::Utc)))
        .map_err(|_| {
            invalid(format!("{what} {t:?}: expected RFC 3339 with an offset, or YYYY-MM-DD"))
        })
}

impl Span {
    fn of(e: &super::Event, person: chrono_tz::Tz) -> Self {
        match e.start {
            super::EventTime::Date(d) => {
                Self::Days(d, d + chrono::Duration::days((e.duration_secs / 86_400).max(1)))
            }
            _ => {
                let s = e.start.instant(person).with_timezone(&chrono::Utc);
                Self::Timed(s, s + e.duration())
            }
        }
    }

    fn length(self) -> chrono::Duration {
        match self {
            Self::Days(a, b) => b - a,
            Self::Timed(a, b) => b - a,
        }
    }

    /// This span with a new start (keeping the length when the end is not given) or end.
    fn changed(
        self,
        start: Option<&str>,
        end: Option<&str>,
        _person: chrono_tz::Tz,
    ) -> Result<Self, CalendarWriteError> {
        let (start, end) = (
            start.map(|s| when(s, "start")).transpose()?,
            end.map(|e| when(e, "end")).transpose()?,
        );
        let out = match (start, end, self) {
            (None, None, s) => s,
            (Some(When::Day(a)), Some(When::Day(b)), _) => Self::Days(a, b),
            (Some(When::At(a)), Some(When::At(b)), _) => Self::Timed(a, b),
            (Some(When::Day(a)), None, s) => {
                Self::Days(a, a + chrono::Duration::days(s.length().num_days().max(1)))
            }
            (Some(When::At(a)), None, s) => Self::Timed(a, a + s.length()),
            (None, Some(When::Day(b)), Self::Days(a, _)) => Self::Days(a, b),
            (None, Some(When::At(b)), Self::Timed(a, _)) => Self::Timed(a, b),
            _ => {
                return Err(invalid(
                    "start and end must both be days (YYYY-MM-DD) or both times: give both",
                ));
            }
        };
        let ok = match out {
            Self::Days(a, b) => b > a && b - a <= chrono::Duration::days(MAX_EVENT_DAYS),
            Self::Timed(a, b) => b > a && b - a <= chrono::Duration::days(MAX_EVENT_DAYS),
        };
        if !ok {
            return Err(invalid(format!(
                "the end must come after the start, at most {MAX_EVENT_DAYS} days later"
            )));
        }
        Ok(out)
    }

    fn instants(
        self,
        person: chrono_tz::Tz,
    ) -> (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) {
        match self {
            Self::Days(a, b) => {
                let at = |d| super::EventTime::Date(d).instant(person).with_timezone(&chrono::Utc);
                (at(a), at(b))
            }
            Self::Timed(a, b) => (a, b),
        }
    }

    fn show(self, person: chrono_tz::Tz) -> String {
        match self {
            Self::Days(a, b) => {
                let last = b - chrono::Duration::days(1);
                if last > a { format!("{a} to {last} (all day)") } else { format!("{a} (all day)") }
            }
            Self::Timed(a, b) => {
                let (a, b) = (a.with_timezone(&person), b.with_timezone(&person));
                if a.date_naive() == b.date_naive() {
                    format!("{}–{}", a.format("%Y-%m-%d %H:%M"), b.format("%H:%M"))
                } else {
                    format!("{}–{}", a.format("%Y-%m-%d %H:%M"), b.format("%Y-%m-%d %H:%M"))
                }
            }
        }
    }

    /// Its DTSTART and DTEND lines in the item's `form` (wall clock in `zone`); days in an
    /// item of times, or times in an item of days, are written as dates or in UTC.
    fn lines(self, form: &super::edit::Form, zone: chrono_tz::Tz) -> (String, String) {
        use super::edit::Form;
        match (self, form) {
            (Self::Days(a, b), _) => (
                Form::Date.line("DTSTART", a.and_time(chrono::NaiveTime::MIN)),
                Form::Date.line("DTEND", b.and_time(chrono::NaiveTime::MIN)),
            ),
            (Self::Timed(a, b), Form::Date | Form::Utc) => {
                (Form::Utc.line("DTSTART", a.naive_utc()), Form::Utc.line("DTEND", b.naive_utc()))
            }
            (Self::Timed(a, b), f) => (
                f.line("DTSTART", a.with_timezone(&zone).naive_local()),
                f.line("DTEND", b.with_timezone(&zone).naive_local()),
            ),
        }
    }
}

/// The evidence that `w` took effect, from its item as `seen` now: the created or changed
/// event read back with its UID, title and times as written, or the deleted item gone.
fn evidence_of(
    w: &CalendarWrite,
    seen: Result<&Observed, &WriteError>,
    person: chrono_tz::Tz,
) -> Option<serde_json::Value> {
    match (seen, w.action, &w.expect) {
        // An update shows as the item changed since it was prepared (its tag moved) holding
        // what this write put there.
        (
            Ok(Observed::Present { etag, events, .. }),
            WriteAction::Create | WriteAction::Update,
            Some(x),
        ) if (w.action == WriteAction::Create || w.etag.as_deref() != Some(etag.as_str()))
            && events.iter().any(|e| x.seen_in(&w.uid, e, person)) =>
        {
            Some(json!({
            "href": w.href,
            "etag": etag,
            "matched_on": "uid+fields",
            "summary": x.summary,
            "start": x.start,
            "end": x.end,
            }))
        }
        // The source rewrote the UID Steward wrote (some servers assign their own): the item
        // Steward named holds one event, and it is ours by its title and times.
        (Ok(Observed::Present { etag, events, .. }), WriteAction::Create, Some(x))
            if one_uid(events).is_some_and(|e| x.seen_in(&e.uid, e, person)) =>
        {
            let uid = one_uid(events).map(|e| e.uid.clone()).unwrap_or_default();
            Some(json!({
                "href": w.href,
                "etag": etag,
                "matched_on": "alias",
                "uid": uid,
                "summary": x.summary,
                "start": x.start,
                "end": x.end,
            }))
        }
        // Journaled before expectations were recorded: the UID alone.
        (Ok(Observed::Present { etag, text, .. }), WriteAction::Create, None)
            if text.contains(&format!("UID:{}", w.uid)) =>
        {
            Some(json!({ "href": w.href, "etag": etag, "matched_on": "uid" }))
        }
        (Ok(Observed::Absent), WriteAction::Delete, _) => {
            Some(json!({ "href": w.href, "matched_on": "absent" }))
        }
        _ => None,
    }
}

/// The master of the only event (UID) `events` hold.
fn one_uid(events: &[super::Event]) -> Option<&super::Event> {
    let first = events.first()?;
    events
        .iter()
        .all(|e| e.uid == first.uid)
        .then(|| events.iter().find(|e| e.recurrence_id.is_none()))
        .flatten()
}

/// Records the UID alias a confirmation found (see [`evidence_of`]).
fn record_alias(
    steward: &Steward,
    w: &CalendarWrite,
    evidence: &serde_json::Value,
    now: i64,
) -> Result<(), CalendarWriteError> {
    if let (Some("alias"), Some(uid)) = (evidence["matched_on"].as_str(), evidence["uid"].as_str())
    {
        let calendar = format!("{}/{}", w.account, w.collection);
        steward.calendar_store()?.record_alias(&calendar, &w.uid, uid, now)?;
    }
    Ok(())
}

/// What a confirmation pass over calendar writes found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CalendarConfirmReport {
    /// Writes checked.
    pub checked: usize,
    /// Confirmed now.
    pub confirmed: usize,
    /// Not seen yet.
    pub pending: usize,
    /// Ended `retry_exhausted` now.
    pub exhausted: usize,
    /// Writes whose account no target serves (left waiting).
    pub no_target: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_long_lines_folded() {
        let e = NewEvent {
            title: "Cena, vino; e \\ amici\nalle 8".into(),
            start: String::new(),
            end: String::new(),
            location: Some("Trattoria ".repeat(12)),
            description: None,
            attendees: vec!["anna@example.it".into()],
            organizer: Some("ada@example.org".into()),
        };
        let t = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let text = render_event(
            &e,
            "u@steward",
            (t, t + chrono::Duration::hours(2)),
            chrono_tz::Tz::UTC,
            t,
        );
        assert!(text.contains("SUMMARY:Cena\\, vino\\; e \\\\ amici\\nalle 8\r\n"), "{text}");
        assert!(text.lines().all(|l| l.len() <= 75), "{text}");
        assert!(text.contains("\r\n "), "folded: {text}");
        let unfolded = text.replace("\r\n ", "");
        assert!(
            unfolded.contains(&format!("LOCATION:{}\r\n", "Trattoria ".repeat(12))),
            "{unfolded}"
        );
        assert!(text.contains("DTSTART:20231114T221320Z\r\n"));
        assert!(text.ends_with("END:VEVENT\r\nEND:VCALENDAR\r\n"));
        let rome = render_event(&e, "u", (t, t), chrono_tz::Europe::Rome, t);
        assert!(rome.contains("DTSTART;TZID=Europe/Rome:20231114T231320\r\n"), "{rome}");
        assert!(!text.contains("VTIMEZONE"), "UTC times need no zone: {text}");
    }

    #[test]
    fn a_zone_is_defined_in_the_item_with_its_changes_around_the_event() {
        let t = chrono::DateTime::parse_from_rfc3339("2026-03-10T16:00:00Z").unwrap().to_utc();
        let rome = vtimezone(chrono_tz::Europe::Rome, t, t).join("\n");
        // From a year before to a year after (2025-03-10 to 2027-03-10): four changes.
        for l in [
            "TZID:Europe/Rome",
            "BEGIN:DAYLIGHT\nDTSTART:20260329T020000\nTZOFFSETFROM:+0100\nTZOFFSETTO:+0200\nTZNAME:CEST",
            "BEGIN:STANDARD\nDTSTART:20261025T030000\nTZOFFSETFROM:+0200\nTZOFFSETTO:+0100\nTZNAME:CET",
            "DTSTART:20250330T020000",
            "DTSTART:20251026T030000",
        ] {
            assert!(rome.contains(l), "{l}:\n{rome}");
        }
        assert_eq!(rome.matches("BEGIN:DAYLIGHT").count(), 2, "{rome}");
        assert_eq!(rome.matches("BEGIN:STANDARD").count(), 2, "{rome}");
        // A zone without changes: one standard observance; odd offsets keep their minutes.
        let kolkata = vtimezone(chrono_tz::Asia::Kolkata, t, t).join("\n");
        assert!(kolkata.contains("TZOFFSETFROM:+0530\nTZOFFSETTO:+0530"), "{kolkata}");
        assert_eq!(kolkata.matches("BEGIN:STANDARD").count(), 1);
        // South of the equator, summer time spans the new year.
        let sydney = vtimezone(chrono_tz::Australia::Sydney, t, t).join("\n");
        assert!(
            sydney.contains("DTSTART:20260405T030000\nTZOFFSETFROM:+1100\nTZOFFSETTO:+1000"),
            "{sydney}"
        );
    }
}
