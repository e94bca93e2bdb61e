//! Calendars: events as their sources wrote them (a start in its own frame — a date, a zoned
//! wall-clock time, UTC or floating — a length, a recurrence), expanded into occurrences in a
//! bounded window ([`recur`]).

mod edit;
pub mod free;
pub mod recur;
pub mod store;
pub mod vectors;
pub mod write;

pub use free::{
    Busy, DEFAULT_SLOT_MINUTES, FreeBusy, MAX_SLOT_MINUTES, MIN_SLOT_MINUTES, Span, WorkingHours,
    free_busy,
};

pub use recur::{
    EventTime, MAX_EXPANSION_STEPS, MAX_INSTANCES, MAX_RULE_BYTES, MAX_WINDOW_DAYS, Occurrence,
    RecurError, Recurrence, check_window, first_walls, occurrences, place,
};

use serde::Serialize;

/// What Steward knows of the person for calendar questions: their zone (floating and all-day
/// times, dates given without a time), their addresses (invitations they declined take no
/// time) and their working hours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarSettings {
    /// The person's zone.
    pub zone: chrono_tz::Tz,
    /// The person's addresses, lowercase.
    pub me: Vec<String>,
    /// When they work.
    pub hours: WorkingHours,
}

impl Default for CalendarSettings {
    /// The system's zone ([`system_zone`]), no address, 09:00–18:00 Monday to Friday.
    fn default() -> Self {
        Self { zone: system_zone(), me: Vec::new(), hours: WorkingHours::default() }
    }
}

/// The person's zone when nothing names one: `TZ`, else `/etc/localtime`'s zone, else UTC.
pub fn system_zone() -> chrono_tz::Tz {
    let from_tz = std::env::var("TZ").ok().and_then(|t| t.trim_start_matches(':').parse().ok());
    from_tz
        .or_else(|| {
            let link = std::fs::read_link("/etc/localtime").ok()?;
            let s = link.to_string_lossy().into_owned();
            let (_, name) = s.split_once("zoneinfo/")?;
            name.parse().ok()
        })
        .unwrap_or(chrono_tz::Tz::UTC)
}

/// `YYYY-MM-DD` (midnight in `zone`) or RFC 3339, as an instant.
pub fn instant_in(
    text: &str,
    zone: chrono_tz::Tz,
) -> Result<chrono::DateTime<chrono::Utc>, RecurError> {
    let t = text.trim();
    if let Ok(d) = chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return Ok(place(zone, d.and_time(chrono::NaiveTime::MIN)).with_timezone(&chrono::Utc));
    }
    chrono::DateTime::parse_from_rfc3339(t)
        .map(|x| x.with_timezone(&chrono::Utc))
        .map_err(|_| RecurError::BadTime(t.chars().take(60).collect()))
}

/// Longest summary kept, characters.
/// Fixed (not a setting).
pub const MAX_SUMMARY_CHARS: usize = 1_000;
/// Longest location kept, characters.
/// Fixed (not a setting).
pub const MAX_LOCATION_CHARS: usize = 1_000;
/// Longest description kept, characters.
/// Fixed (not a setting).
pub const MAX_DESCRIPTION_CHARS: usize = 32_000;
/// Most attendees kept per event.
/// Fixed (not a setting).
pub const MAX_ATTENDEES: usize = 500;
/// Longest event kept (a longer one is cut to this), days.
/// Fixed (not a setting).
pub const MAX_EVENT_DAYS: i64 = 3_660;
/// Most RDATEs or EXDATEs kept per event, each.
/// Fixed (not a setting).
pub const MAX_DATES: usize = 1_000;

/// An attendee of an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Attendee {
    /// The address (lowercase, without `mailto:`).
    pub email: String,
    /// The name it was given (CN).
    pub name: Option<String>,
    /// Their answer: `accepted`, `declined`, `tentative`, `needs-action`, `delegated`.
    pub partstat: Option<String>,
}

/// An event as its source wrote it: a master (with its recurrence) or the override of one
/// occurrence (`recurrence_id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Event {
    /// Its UID.
    pub uid: String,
    /// The occurrence it replaces, when it is an override.
    pub recurrence_id: Option<EventTime>,
    /// Its revision (SEQUENCE).
    pub sequence: i64,
    /// What it is (cut to [`MAX_SUMMARY_CHARS`]).
    pub summary: String,
    /// Where (cut to [`MAX_LOCATION_CHARS`]).
    pub location: Option<String>,
    /// More (cut to [`MAX_DESCRIPTION_CHARS`]).
    pub description: Option<String>,
    /// When it starts.
    pub start: EventTime,
    /// How long each occurrence lasts, seconds (all-day: whole days).
    pub duration_secs: i64,
    /// How it repeats.
    pub recurrence: Recurrence,
    /// `tentative`, `confirmed` or `cancelled`.
    pub status: Option<String>,
    /// Whether it leaves the time free (TRANSP:TRANSPARENT).
    pub transparent: bool,
    /// The organizer's address.
    pub organizer: Option<String>,
    /// Its attendees (at most [`MAX_ATTENDEES`]).
    pub attendees: Vec<Attendee>,
}

impl Event {
    /// Whether it is an all-day event.
    pub fn all_day(&self) -> bool {
        self.start.is_date()
    }

    /// Whether it repeats (a rule or extra dates).
    pub fn repeats(&self) -> bool {
        self.recurrence.rule.is_some() || !self.recurrence.rdates.is_empty()
    }

    /// Its length.
    pub fn duration(&self) -> chrono::Duration {
        chrono::Duration::seconds(self.duration_secs)
    }
}

/// One occurrence on an agenda.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AgendaItem {
    /// The event's UID.
    pub uid: String,
    /// The occurrence's original start (RFC 3339), for a recurring event.
    pub recurrence_id: Option<String>,
    /// What it is.
    pub summary: String,
    /// Where.
    pub location: Option<String>,
    /// When it starts (RFC 3339 with offset).
    pub start: chrono::DateTime<chrono::FixedOffset>,
    /// When it ends.
    pub end: chrono::DateTime<chrono::FixedOffset>,
    /// Whether it takes whole days.
    pub all_day: bool,
    /// `tentative`, `confirmed` or `cancelled`.
    pub status: Option<String>,
    /// Whether it leaves the time free.
    pub transparent: bool,
}

fn item(e: &Event, o: &Occurrence, recurring: bool) -> AgendaItem {
    AgendaItem {
        uid: e.uid.clone(),
        recurrence_id: recurring.then(|| o.recurrence_id.format("%Y-%m-%dT%H:%M:%S").to_string()),
        summary: e.summary.clone(),
        location: e.location.clone(),
        start: o.start,
        end: o.end,
        all_day: e.all_day(),
        status: e.status.clone(),
        transparent: e.transparent,
    }
}

/// The occurrences of `events` (masters and their overrides, any order) that overlap
/// `[from, to)`, by start: each master expanded ([`occurrences`]), an occurrence that an
/// override of the same UID replaces (matched by RECURRENCE-ID, whatever its SEQUENCE) taken
/// from the override — or dropped when the override is cancelled. At most `max`
/// (≤ [`MAX_INSTANCES`]) in all, else [`RecurError::TooMany`].
pub fn agenda(
    events: &[Event],
    person: chrono_tz::Tz,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
    max: usize,
) -> Result<Vec<AgendaItem>, RecurError> {
    use std::collections::{BTreeMap, BTreeSet};
    let max = max.min(MAX_INSTANCES);
    // Overrides by UID: the wall-clock times (in their master's zone) they replace.
    let mut replaced: BTreeMap<&str, BTreeSet<chrono::NaiveDateTime>> = BTreeMap::new();
    let masters: BTreeMap<&str, &Event> =
        events.iter().filter(|e| e.recurrence_id.is_none()).map(|e| (e.uid.as_str(), e)).collect();
    let mut out = Vec::new();
    for o in events.iter().filter(|e| e.recurrence_id.is_some()) {
        let Some(rid) = &o.recurrence_id else { continue };
        let zone = masters.get(o.uid.as_str()).map_or(rid.zone(person), |m| m.start.zone(person));
        let wall = rid.instant(person).with_timezone(&zone).naive_local();
        let wall = if rid.is_date() { rid.wall() } else { wall };
        replaced.entry(&o.uid).or_default().insert(wall);
        if o.status.as_deref() == Some("cancelled") {
            continue;
        }
        let single = Recurrence::default();
        for occ in occurrences(&o.start, o.duration(), &single, person, from, to, max)? {
            let mut it = item(o, &occ, true);
            it.recurrence_id = Some(wall.format("%Y-%m-%dT%H:%M:%S").to_string());
            out.push(it);
        }
    }
    for m in masters.values() {
        let recurring = m.recurrence.rule.is_some() || !m.recurrence.rdates.is_empty();
        let gone = replaced.get(m.uid.as_str());
        for occ in occurrences(&m.start, m.duration(), &m.recurrence, person, from, to, max)? {
            if gone.is_some_and(|g| g.contains(&occ.recurrence_id)) {
                continue;
            }
            out.push(item(m, &occ, recurring));
        }
        if out.len() > max {
            return Err(RecurError::TooMany { max });
        }
    }
    if out.len() > max {
        return Err(RecurError::TooMany { max });
    }
    out.sort_by(|a, b| a.start.cmp(&b.start).then_with(|| a.uid.cmp(&b.uid)));
    Ok(out)
}
