//! Recurrence: an event's start and rule expanded into its occurrences, bounded.
//!
//! The rule engine is the `rrule` crate (a port of python-dateutil's), driven on wall-clock
//! times only: every time is expanded as a naive wall-clock time with UTC as a stand-in zone,
//! and each occurrence is placed in its real zone afterwards by this module's own rules —
//! RFC 5545 §3.3.5: a wall time in a DST gap is read with the offset before the gap (09:30 in a
//! gap that skips 09:00–10:00 is 10:30), one in an overlap is the earlier instant. So the
//! engine's own zone handling (and the machine's local zone) never enters, floating and
//! all-day events expand in the person's zone, and a rule in any zone behaves the same.
//!
//! What this module adds to the engine, per RFC 5545: DTSTART is always the first occurrence;
//! RDATEs join and EXDATEs remove by wall-clock time in the event's zone; duplicates are
//! dropped; UNTIL is read by us (a UTC UNTIL of a zoned event becomes that zone's wall time, a
//! DATE UNTIL includes its whole day) so the engine never reads a time in the machine's zone.
//! Everything is bounded: a window of at most [`MAX_WINDOW_DAYS`], at most [`MAX_INSTANCES`]
//! occurrences in it (more is an error, never a silent cut), at most
//! [`MAX_EXPANSION_STEPS`] candidates looked at.

use std::collections::BTreeSet;

use chrono::{
    DateTime, Duration, FixedOffset, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, Offset,
    TimeZone, Utc,
};
use chrono_tz::Tz;
use serde::Serialize;

use crate::error::{ErrorKind, StewardError};

/// Most days one query window may span.
/// Fixed (not a setting): the upper end of a window.
pub const MAX_WINDOW_DAYS: i64 = 366;
/// Most occurrences one expansion may return; a window holding more is an error.
/// Fixed (not a setting).
pub const MAX_INSTANCES: usize = 1_000;
/// Most candidates one expansion looks at (a rule that yields little over a long span, or
/// starts long before the window, stops here with an error).
/// Fixed (not a setting).
pub const MAX_EXPANSION_STEPS: usize = 200_000;
/// Longest rule text read, bytes.
/// Fixed (not a setting).
pub const MAX_RULE_BYTES: usize = 1_024;

/// Why an expansion failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecurError {
    /// The rule cannot be read or is not valid for its start.
    #[error("recurrence rule {rule:?}: {reason}")]
    BadRule {
        /// The rule.
        rule: String,
        /// Why.
        reason: String,
    },
    /// The window is empty, reversed or longer than [`MAX_WINDOW_DAYS`].
    #[error("the window must end after it starts and span at most {MAX_WINDOW_DAYS} days")]
    BadWindow,
    /// The window holds more occurrences than asked for (at most [`MAX_INSTANCES`]).
    #[error("more than {max} occurrences in the window: ask for a shorter window")]
    TooMany {
        /// The most asked for.
        max: usize,
    },
    /// Finding the window's occurrences would look at more than [`MAX_EXPANSION_STEPS`]
    /// candidates.
    #[error("the rule needs more than {MAX_EXPANSION_STEPS} steps to reach the window")]
    TooFar,
    /// A time that is neither `YYYY-MM-DD` nor RFC 3339.
    #[error("{0:?} is neither YYYY-MM-DD nor RFC 3339")]
    BadTime(String),
    /// Working hours that cannot be read (`HH:MM-HH:MM`, the end after the start).
    #[error("working hours {0:?}: expected HH:MM-HH:MM with the end after the start")]
    BadHours(String),
    /// A shortest free slot outside [`super::free::MIN_SLOT_MINUTES`] to
    /// [`super::free::MAX_SLOT_MINUTES`].
    #[error(
        "min_minutes {0}: from {min} to {max}",
        min = super::free::MIN_SLOT_MINUTES,
        max = super::free::MAX_SLOT_MINUTES
    )]
    BadMinutes(i64),
}

impl StewardError for RecurError {
    fn code(&self) -> &'static str {
        match self {
            Self::BadRule { .. } => "CALENDAR_BAD_RRULE",
            Self::BadWindow => "CALENDAR_BAD_WINDOW",
            Self::TooMany { .. } => "CALENDAR_TOO_MANY_OCCURRENCES",
            Self::TooFar => "CALENDAR_RRULE_TOO_FAR",
            Self::BadHours(_) => "CALENDAR_BAD_HOURS",
            Self::BadTime(_) => "CALENDAR_BAD_TIME",
            Self::BadMinutes(_) => "CALENDAR_BAD_MINUTES",
        }
    }

    fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

/// A time as an iCalendar source wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum EventTime {
    /// A whole day (an all-day event).
    Date(NaiveDate),
    /// A wall-clock time in an IANA zone.
    Zoned(NaiveDateTime, #[serde(serialize_with = "tz_name", deserialize_with = "tz_of_name")] Tz),
    /// An instant, written in UTC.
    Utc(NaiveDateTime),
    /// A wall-clock time in no zone: read in the person's.
    Floating(NaiveDateTime),
}

fn tz_name<S: serde::Serializer>(tz: &Tz, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(tz.name())
}

fn tz_of_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Tz, D::Error> {
    let name = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
    name.parse().map_err(|_| serde::de::Error::custom(format!("unknown zone {name:?}")))
}

impl EventTime {
    /// Its wall-clock time (a date at midnight).
    pub fn wall(&self) -> NaiveDateTime {
        match *self {
            Self::Date(d) => d.and_time(NaiveTime::MIN),
            Self::Zoned(w, _) | Self::Utc(w) | Self::Floating(w) => w,
        }
    }

    /// The zone its wall clock runs in: its own, UTC, or the person's.
    pub fn zone(&self, person: Tz) -> Tz {
        match *self {
            Self::Zoned(_, tz) => tz,
            Self::Utc(_) => Tz::UTC,
            Self::Date(_) | Self::Floating(_) => person,
        }
    }

    /// Whether it is a whole day.
    pub fn is_date(&self) -> bool {
        matches!(self, Self::Date(_))
    }

    /// The same kind of time (its zone, or a day) at the wall-clock time `wall`.
    pub fn with_wall(&self, wall: NaiveDateTime) -> Self {
        match *self {
            Self::Date(_) => Self::Date(wall.date()),
            Self::Zoned(_, tz) => Self::Zoned(wall, tz),
            Self::Utc(_) => Self::Utc(wall),
            Self::Floating(_) => Self::Floating(wall),
        }
    }

    /// Its instant (see [`place`]).
    pub fn instant(&self, person: Tz) -> DateTime<FixedOffset> {
        place(self.zone(person), self.wall())
    }

    /// Its wall-clock time in `zone` (an exception date in another zone than its event's
    /// compares by the same instant).
    fn wall_in(&self, zone: Tz, person: Tz) -> NaiveDateTime {
        match self {
            Self::Date(d) => d.and_time(NaiveTime::MIN),
            _ if self.zone(person) == zone => self.wall(),
            _ => self.instant(person).with_timezone(&zone).naive_local(),
        }
    }
}

/// The instant of wall-clock time `wall` in `zone` (RFC 5545 §3.3.5): in a gap, read with
/// the offset before the gap; in an overlap, the earlier instant.
pub fn place(zone: Tz, wall: NaiveDateTime) -> DateTime<FixedOffset> {
    match zone.from_local_datetime(&wall) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => t.fixed_offset(),
        LocalResult::None => {
            // The offset in force a day before (gaps are shorter than a day).
            let before = zone.offset_from_utc_datetime(&(wall - Duration::days(1))).fix();
            let utc = wall - Duration::seconds(i64::from(before.local_minus_utc()));
            Utc.from_utc_datetime(&utc).with_timezone(&zone).fixed_offset()
        }
    }
}

/// How an event repeats.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Recurrence {
    /// The RRULE value (`FREQ=WEEKLY;BYDAY=MO`), when it has one.
    pub rule: Option<String>,
    /// Extra occurrences (RDATE).
    pub rdates: Vec<EventTime>,
    /// Removed occurrences (EXDATE).
    pub exdates: Vec<EventTime>,
}

/// One occurrence of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Occurrence {
    /// Its original wall-clock start in the event's zone (what a RECURRENCE-ID names).
    pub recurrence_id: NaiveDateTime,
    /// When it starts.
    pub start: DateTime<FixedOffset>,
    /// When it ends.
    pub end: DateTime<FixedOffset>,
}

/// A rule read for the engine: the text without UNTIL, and UNTIL as a wall-clock time in the
/// event's zone (inclusive).
struct WallRule {
    text: String,
    until: Option<NaiveDateTime>,
    count: Option<u64>,
}

fn bad(rule: &str, reason: impl Into<String>) -> RecurError {
    RecurError::BadRule { rule: rule.chars().take(200).collect(), reason: reason.into() }
}

/// Reads UNTIL (`YYYYMMDD`, `YYYYMMDDTHHMMSS`, with `Z` for UTC) as a wall time in `zone`.
fn until_wall(v: &str, zone: Tz) -> Option<NaiveDateTime> {
    let v = v.trim();
    if let Ok(d) = NaiveDate::parse_from_str(v, "%Y%m%d") {
        // A date UNTIL includes its whole day.
        return d.and_hms_opt(23, 59, 59);
    }
    let (text, utc) = match v.strip_suffix('Z') {
        Some(t) => (t, true),
        None => (v, false),
    };
    let w = NaiveDateTime::parse_from_str(text, "%Y%m%dT%H%M%S").ok()?;
    Some(if utc { Utc.from_utc_datetime(&w).with_timezone(&zone).naive_local() } else { w })
}

fn wall_rule(rule: &str, zone: Tz, date: bool) -> Result<WallRule, RecurError> {
    if rule.len() > MAX_RULE_BYTES {
        return Err(bad(rule, format!("longer than {MAX_RULE_BYTES} bytes")));
    }
    let body = rule.trim().strip_prefix("RRULE:").unwrap_or(rule.trim());
    let mut parts = Vec::new();
    let mut until = None;
    let mut count = None;
    for part in body.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some((k, v)) if k.eq_ignore_ascii_case("UNTIL") => {
                until = Some(until_wall(v, zone).ok_or_else(|| bad(rule, "UNTIL is not a date"))?);
            }
            // A whole-day event has no time of day to vary (RFC 5545 §3.3.10).
            Some((k, _))
                if date
                    && ["BYHOUR", "BYMINUTE", "BYSECOND"]
                        .iter()
                        .any(|t| k.eq_ignore_ascii_case(t)) => {}
            Some((k, v)) => {
                if k.eq_ignore_ascii_case("COUNT") {
                    count = v.trim().parse().ok();
                }
                parts.push(part);
            }
            None => parts.push(part),
        }
    }
    Ok(WallRule { text: parts.join(";"), until, count })
}

/// The first wall-clock occurrences of `rule` from `start` (DTSTART included, whether or
/// not the rule yields it), ascending, deduplicated, while `keep` says go on; at most
/// [`MAX_EXPANSION_STEPS`] candidates.
fn walls(
    start: NaiveDateTime,
    date: bool,
    rule: &str,
    zone: Tz,
    not_before: Option<NaiveDateTime>,
    keep: impl FnMut(NaiveDateTime) -> bool,
) -> Result<Vec<NaiveDateTime>, RecurError> {
    use rrule::{RRule, RRuleSet, Unvalidated};
    let parsed = wall_rule(rule, zone, date)?;
    let mut r: RRule<Unvalidated> =
        parsed.text.parse().map_err(|e: rrule::RRuleError| bad(rule, e.to_string()))?;
    let stand_in = |w: NaiveDateTime| rrule::Tz::UTC.from_utc_datetime(&w);
    let dtstart = stand_in(start);
    if let Some(u) = parsed.until {
        if u < start {
            // Ends before it starts: only DTSTART.
            return Ok(vec![start]);
        }
        r = r.until(stand_in(u));
    }
    let valid = r.clone().validate(dtstart).map_err(|e| bad(rule, e.to_string()))?;
    // A rule without COUNT repeats its pattern every whole period (INTERVAL days, weeks,
    // months or years) from DTSTART, with the same defaults taken from DTSTART's day and time.
    // Started whole periods later, just before `not_before`, on a time that is itself an
    // occurrence of the pattern, it yields the same occurrences from there on without walking
    // the years before (DTSTART always counts, so a start off the pattern is not used).
    if let (Some(nb), None) = (not_before, parsed.count)
        && let Some(moved) = later_start(start, valid.get_freq(), valid.get_interval(), nb)
        && parsed.until.is_none_or(|u| moved <= u)
    {
        let at = stand_in(moved);
        let moved_rule = r.validate(at).map_err(|e| bad(rule, e.to_string()))?;
        let own = RRuleSet::new(at).rrule(moved_rule.clone()).into_iter().next();
        if own.is_some_and(|d| d.naive_utc() == moved) {
            return expand(RRuleSet::new(at).rrule(moved_rule), moved, None, keep);
        }
    }
    let set = RRuleSet::new(dtstart).rrule(valid);
    expand(set, start, parsed.count, keep)
}

/// The latest of `start` + k whole periods (k ≥ 1) at least a period before `not_before` on
/// the same day of the month, if any.
fn later_start(
    start: NaiveDateTime,
    freq: rrule::Frequency,
    interval: u16,
    not_before: NaiveDateTime,
) -> Option<NaiveDateTime> {
    use chrono::Datelike as _;
    use rrule::Frequency;
    let n = i64::from(interval.max(1));
    let months = |t: NaiveDateTime| i64::from(t.year()) * 12 + i64::from(t.month0());
    let (periods, shift): (i64, Box<dyn Fn(i64) -> Option<NaiveDateTime>>) = match freq {
        Frequency::Daily | Frequency::Weekly => {
            let days = if freq == Frequency::Daily { n } else { 7 * n };
            (
                (not_before - start).num_days() / days - 1,
                Box::new(move |k| start.checked_add_signed(Duration::days(days * k))),
            )
        }
        Frequency::Monthly | Frequency::Yearly => {
            let step = if freq == Frequency::Monthly { n } else { 12 * n };
            (
                (months(not_before) - months(start)) / step - 1,
                Box::new(move |k| {
                    let m = u32::try_from(step * k).ok()?;
                    start
                        .checked_add_months(chrono::Months::new(m))
                        .filter(|t| t.day() == start.day())
                }),
            )
        }
        _ => return None,
    };
    // A month without the day (the 31st, 29 February) is passed over: a few periods back.
    (periods.saturating_sub(12).max(1)..=periods).rev().find_map(shift)
}

/// The wall times of `set` from `start` (always the first) while `keep` says so, bounded by
/// [`MAX_EXPANSION_STEPS`].
fn expand(
    set: rrule::RRuleSet,
    start: NaiveDateTime,
    count: Option<u64>,
    mut keep: impl FnMut(NaiveDateTime) -> bool,
) -> Result<Vec<NaiveDateTime>, RecurError> {
    let mut out = vec![start];
    if !keep(start) {
        return Ok(out);
    }
    // Whether the rule yields DTSTART itself; when it does not, DTSTART still counts as the
    // first of COUNT occurrences (RFC 5545 §3.3.10).
    let mut synced = None;
    let mut from_rule = 0u64;
    for (steps, dt) in set.into_iter().enumerate() {
        if steps >= MAX_EXPANSION_STEPS {
            return Err(RecurError::TooFar);
        }
        let w = dt.naive_utc();
        let synced = *synced.get_or_insert(w == start);
        if w <= start {
            continue;
        }
        from_rule += 1;
        if !synced && count.is_some_and(|c| from_rule >= c) {
            break;
        }
        if out.last() != Some(&w) {
            out.push(w);
        }
        if !keep(w) {
            break;
        }
    }
    Ok(out)
}

/// The first `n` occurrences of `rule` from the wall-clock `start` (DTSTART counts as the
/// first), as wall-clock times: for tests against other engines.
pub fn first_walls(
    start: NaiveDateTime,
    all_day: bool,
    rule: &str,
    n: usize,
) -> Result<Vec<NaiveDateTime>, RecurError> {
    let mut seen = 0usize;
    let mut out = walls(start, all_day, rule, Tz::UTC, None, |_| {
        seen += 1;
        seen < n
    })?;
    out.truncate(n);
    Ok(out)
}

/// `Ok` when `[from, to)` is a window questions may ask about: it ends after it starts and
/// spans at most [`MAX_WINDOW_DAYS`].
pub fn check_window(from: DateTime<Utc>, to: DateTime<Utc>) -> Result<(), RecurError> {
    if to <= from || to - from > Duration::days(MAX_WINDOW_DAYS) {
        return Err(RecurError::BadWindow);
    }
    Ok(())
}

/// The occurrences of an event starting at `start`, lasting `duration`, repeating by `rec`,
/// that overlap the window `[from, to)` — an occurrence overlaps when it starts before `to`
/// and ends after `from` (one of no length, when it starts in the window) — in order, at most
/// `max` (≤ [`MAX_INSTANCES`]). Floating and all-day times run in `person`'s zone.
pub fn occurrences(
    start: &EventTime,
    duration: Duration,
    rec: &Recurrence,
    person: Tz,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    max: usize,
) -> Result<Vec<Occurrence>, RecurError> {
    check_window(from, to)?;
    let max = max.min(MAX_INSTANCES);
    let zone = start.zone(person);
    let first = start.wall();
    // Past the window's end in the event's wall clock (a day of slack for offsets).
    let horizon = to.with_timezone(&zone).naive_local() + Duration::days(1);
    let mut walls_found = match &rec.rule {
        Some(rule) => {
            // Nothing that starts before this can reach the window (a day of slack for
            // offsets and DST).
            let not_before = from.with_timezone(&zone).naive_local()
                - duration.max(Duration::zero())
                - Duration::days(2);
            walls(first, start.is_date(), rule, zone, Some(not_before), |w| w < horizon)?
        }
        None => vec![first],
    };
    walls_found.extend(rec.rdates.iter().map(|d| d.wall_in(zone, person)));
    let excluded: BTreeSet<NaiveDateTime> =
        rec.exdates.iter().map(|d| d.wall_in(zone, person)).collect();
    let walls_found: BTreeSet<NaiveDateTime> =
        walls_found.into_iter().filter(|w| !excluded.contains(w)).collect();
    let (from, to) = (from.fixed_offset(), to.fixed_offset());
    let mut out = Vec::new();
    for w in walls_found {
        let s = place(zone, w);
        if s >= to {
            break;
        }
        // All-day events end at a wall-clock midnight, whatever the day's length.
        // (An end past chrono's range is the start: a source's absurd length.)
        let e = if start.is_date() {
            w.checked_add_signed(duration).map_or(s, |end| place(zone, end))
        } else {
            s.checked_add_signed(duration).unwrap_or(s)
        };
        let overlaps = e > from || (e == s && s >= from);
        if !overlaps {
            continue;
        }
        if out.len() == max {
            return Err(RecurError::TooMany { max });
        }
        out.push(Occurrence { recurrence_id: w, start: s, end: e });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wall(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").unwrap()
    }

    fn utc(s: &str) -> DateTime<Utc> {
        Utc.from_utc_datetime(&wall(s))
    }

    const ROME: Tz = chrono_tz::Europe::Rome;

    #[test]
    fn a_weekly_meeting_keeps_its_wall_clock_time_across_a_dst_change() {
        // Mondays 09:00 in Rome, over the change of 2025-03-30.
        let start = EventTime::Zoned(wall("2025-03-17 09:00"), ROME);
        let rec = Recurrence { rule: Some("FREQ=WEEKLY;BYDAY=MO".into()), ..Default::default() };
        let got = occurrences(
            &start,
            Duration::hours(1),
            &rec,
            Tz::UTC,
            utc("2025-03-01 00:00"),
            utc("2025-04-15 00:00"),
            100,
        )
        .unwrap();
        let starts: Vec<String> = got.iter().map(|o| o.start.to_rfc3339()).collect();
        assert_eq!(
            starts,
            [
                "2025-03-17T09:00:00+01:00",
                "2025-03-24T09:00:00+01:00",
                "2025-03-31T09:00:00+02:00",
                "2025-04-07T09:00:00+02:00",
                "2025-04-14T09:00:00+02:00"
            ]
        );
    }

    #[test]
    fn gaps_read_with_the_offset_before_and_overlaps_take_the_earlier_instant() {
        // Rome skips 02:00–03:00 on 2025-03-30 and repeats 02:00–03:00 on 2025-10-26.
        assert_eq!(place(ROME, wall("2025-03-30 02:30")).to_rfc3339(), "2025-03-30T03:30:00+02:00");
        assert_eq!(place(ROME, wall("2025-10-26 02:30")).to_rfc3339(), "2025-10-26T02:30:00+02:00");
        // A daily 02:30 through the gap: that day's occurrence is at 03:30, none is lost.
        let start = EventTime::Zoned(wall("2025-03-29 02:30"), ROME);
        let rec = Recurrence { rule: Some("FREQ=DAILY;COUNT=3".into()), ..Default::default() };
        let got = occurrences(
            &start,
            Duration::minutes(15),
            &rec,
            Tz::UTC,
            utc("2025-03-28 00:00"),
            utc("2025-04-02 00:00"),
            10,
        )
        .unwrap();
        let starts: Vec<String> = got.iter().map(|o| o.start.to_rfc3339()).collect();
        assert_eq!(
            starts,
            ["2025-03-29T02:30:00+01:00", "2025-03-30T03:30:00+02:00", "2025-03-31T02:30:00+02:00"]
        );
    }

    #[test]
    fn exdates_rdates_until_and_all_day_events_follow_rfc_5545() {
        let start = EventTime::Date(NaiveDate::from_ymd_opt(2025, 3, 28).unwrap());
        let rec = Recurrence {
            // UNTIL as a date includes its day.
            rule: Some("FREQ=DAILY;UNTIL=20250401".into()),
            rdates: vec![EventTime::Date(NaiveDate::from_ymd_opt(2025, 4, 10).unwrap())],
            exdates: vec![EventTime::Date(NaiveDate::from_ymd_opt(2025, 3, 29).unwrap())],
        };
        let got = occurrences(
            &start,
            Duration::days(1),
            &rec,
            ROME,
            utc("2025-03-01 00:00"),
            utc("2025-05-01 00:00"),
            100,
        )
        .unwrap();
        let days: Vec<String> = got.iter().map(|o| o.recurrence_id.date().to_string()).collect();
        assert_eq!(days, ["2025-03-28", "2025-03-30", "2025-03-31", "2025-04-01", "2025-04-10"]);
        // The day of the change lasts 23 hours: midnight to midnight.
        assert_eq!(got[1].start.to_rfc3339(), "2025-03-30T00:00:00+01:00");
        assert_eq!(got[1].end.to_rfc3339(), "2025-03-31T00:00:00+02:00");
    }

    #[test]
    fn an_infinite_rule_is_fine_in_a_window_and_every_bound_is_a_typed_error() {
        let start = EventTime::Utc(wall("2020-01-01 08:00"));
        let daily = Recurrence { rule: Some("FREQ=DAILY".into()), ..Default::default() };
        let one_hour = Duration::hours(1);
        let got = occurrences(
            &start,
            one_hour,
            &daily,
            Tz::UTC,
            utc("2025-06-01 00:00"),
            utc("2025-06-08 00:00"),
            50,
        )
        .unwrap();
        assert_eq!(got.len(), 7);
        assert_eq!(got[0].start.to_rfc3339(), "2025-06-01T08:00:00+00:00");
        let e = occurrences(
            &start,
            one_hour,
            &daily,
            Tz::UTC,
            utc("2025-01-01 00:00"),
            utc("2026-06-01 00:00"),
            50,
        )
        .unwrap_err();
        assert_eq!(e, RecurError::BadWindow);
        let e = occurrences(
            &start,
            one_hour,
            &daily,
            Tz::UTC,
            utc("2025-01-01 00:00"),
            utc("2025-12-01 00:00"),
            50,
        )
        .unwrap_err();
        assert_eq!(e.code(), "CALENDAR_TOO_MANY_OCCURRENCES");
        let minutely = Recurrence { rule: Some("FREQ=SECONDLY".into()), ..Default::default() };
        let e = occurrences(
            &start,
            one_hour,
            &minutely,
            Tz::UTC,
            utc("2025-06-01 00:00"),
            utc("2025-06-02 00:00"),
            50,
        )
        .unwrap_err();
        assert_eq!(e, RecurError::TooFar);
        for rule in ["FREQ=SOMETIMES", "FREQ=DAILY;UNTIL=yesterday", &"X".repeat(2_000)] {
            let rec = Recurrence { rule: Some(rule.to_owned()), ..Default::default() };
            let e = occurrences(
                &start,
                one_hour,
                &rec,
                Tz::UTC,
                utc("2025-06-01 00:00"),
                utc("2025-06-02 00:00"),
                50,
            )
            .unwrap_err();
            assert_eq!(e.code(), "CALENDAR_BAD_RRULE", "{rule}");
        }
    }

    /// Walks `rule` from `start` whole and started later (just before `nb`), checks both give
    /// the same occurrences in `[nb, nb + days)`, and says whether the walk started later.
    fn same_from(start: NaiveDateTime, rule: &str, nb: NaiveDateTime, days: i64) -> bool {
        let horizon = nb + Duration::days(days);
        let all = walls(start, false, rule, Tz::UTC, None, |w| w < horizon).unwrap();
        let skipped = walls(start, false, rule, Tz::UTC, Some(nb), |w| w < horizon).unwrap();
        let moved = skipped[0] > start;
        let from = |v: Vec<NaiveDateTime>| -> Vec<NaiveDateTime> {
            v.into_iter().filter(|w| *w >= nb && *w < horizon).collect()
        };
        assert_eq!(from(skipped), from(all), "{rule} from {start}, {nb}");
        moved
    }

    #[test]
    fn starting_a_rule_whole_periods_later_changes_no_occurrence_from_there() {
        let start = wall("2024-01-01 09:30"); // a Monday
        let rules = [
            "FREQ=DAILY;BYMONTH=1",
            "FREQ=MONTHLY",
            "FREQ=MONTHLY;BYMONTHDAY=31",
            "FREQ=MONTHLY;INTERVAL=5;BYDAY=2MO",
            "FREQ=YEARLY",
            "FREQ=YEARLY;BYYEARDAY=1,100,366",
            "FREQ=DAILY",
            "FREQ=DAILY;INTERVAL=3",
            "FREQ=DAILY;BYHOUR=9,17;BYMINUTE=30",
            "FREQ=WEEKLY",
            "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,TH",
            "FREQ=WEEKLY;BYDAY=WE",
            "FREQ=WEEKLY;INTERVAL=3;WKST=SU;BYDAY=MO,SU",
            "FREQ=WEEKLY;UNTIL=20240610T000000Z",
            "FREQ=DAILY;UNTIL=20240301",
            "FREQ=DAILY;BYMONTH=2,3",
            "FREQ=WEEKLY;COUNT=40",
        ];
        // Also from the 31st of a month and from 29 February (the day skipped in shorter
        // months and in common years).
        for other in ["2024-01-31 09:30", "2020-02-29 09:30"] {
            let start = wall(other);
            for rule in ["FREQ=MONTHLY", "FREQ=YEARLY", "FREQ=MONTHLY;INTERVAL=2", "FREQ=DAILY"] {
                for nb in ["2024-03-02 00:00", "2025-01-15 00:00", "2028-03-01 00:00"] {
                    let nb = wall(nb);
                    let moved = same_from(start, rule, nb, 800);
                    if rule == "FREQ=MONTHLY" && nb > wall("2025-01-01 00:00") {
                        assert!(moved, "{rule} from {other}, {nb}: started later");
                    }
                }
            }
        }
        for rule in rules {
            for nb in
                ["2024-01-02 00:00", "2024-02-29 12:00", "2024-06-09 23:00", "2025-03-30 01:00"]
            {
                let nb = wall(nb);
                let moved = same_from(start, rule, nb, 40);
                // The walk is shortened where it may be, and only there.
                let may = ["COUNT", "BYDAY=WE", "UNTIL", "BYMONTH", "MONTHLY", "YEARLY"]
                    .iter()
                    .all(|p| !rule.contains(p));
                if may && nb > wall("2024-03-01 00:00") {
                    assert!(moved, "{rule} from {nb}: started later");
                }
                if rule == "FREQ=MONTHLY" && nb > wall("2024-06-01 00:00") {
                    assert!(moved, "{rule} from {nb}: started later");
                }
                if rule.contains("BYDAY=WE") || rule.contains("COUNT") {
                    assert!(
                        !moved,
                        "{rule}: DTSTART is not its own occurrence, or COUNT counts from it"
                    );
                }
            }
        }
    }
}
