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
            Self::Journal(e) => e.code(),
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Invalid(_) => ErrorKind::InvalidInput,
            Self::NotWritable(_) | Self::NoEvent(_) => ErrorKind::NotFound,
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
    /// Delete: the item's tag when the write was prepared (a changed item is not deleted).
    pub etag: Option<String>,
}

impl CalendarWrite {
    /// The journal's kind.
    pub fn kind(&self) -> &'static str {
        match self.action {
            WriteAction::Create => "calendar.create_event",
            WriteAction::Delete => "calendar.delete_event",
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
    },
    /// It is not there.
    Absent,
}

/// A source that takes writes (a vdir, a CalDAV account): implemented in the connectors.
pub trait CalendarTarget: Send + Sync {
    /// The account it writes (the store's account of its events).
    fn account(&self) -> &str;
    /// Applies `w` once: a create never overwrites an item, a delete removes only an item
    /// whose tag is still `w.etag`. Returns the item's new tag when the source gives one.
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
}

/// iCalendar TEXT escaping (RFC 5545 §3.3.11).
fn escape(text: &str) -> String {
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

/// One content line, folded at 75 octets (RFC 5545 §3.1), with its CRLF.
fn line(out: &mut String, text: &str) {
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
    for l in ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//Steward//Steward//EN", "BEGIN:VEVENT"] {
        line(&mut out, l);
    }
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
    for a in &e.attendees {
        line(&mut out, &format!("ATTENDEE;PARTSTAT=NEEDS-ACTION:mailto:{a}"));
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
        let title = e.title.trim();
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
        let event = NewEvent { title: title.to_owned(), attendees, ..e.clone() };
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
        let op = journal.transition(op.id, to, &update, crate::time::now_secs().max(now))?;
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
            let done = match (&seen, w.action) {
                (Ok(Observed::Present { etag, text }), WriteAction::Create)
                    if text.contains(&format!("UID:{}", w.uid)) =>
                {
                    Some(json!({ "href": w.href, "etag": etag, "matched_on": "uid" }))
                }
                (Ok(Observed::Absent), WriteAction::Delete) => {
                    Some(json!({ "href": w.href, "matched_on": "absent" }))
                }
                _ => None,
            };
            match done {
                Some(evidence) => {
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
    }
}
