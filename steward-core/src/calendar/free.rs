//! Free and busy time: what of a window the person's events take, and the free slots left in
//! their working hours.
//!
//! An occurrence makes the person busy unless it leaves the time free (TRANSP:TRANSPARENT), is
//! cancelled, or is one the person declined (an attendee whose address is one of theirs with
//! PARTSTAT=DECLINED). A declined or transparent override frees its one occurrence; a master
//! declined frees every occurrence that no override accepts. All-day events are busy for their
//! whole days in the person's zone unless transparent (birthdays and holidays usually are).

use chrono::{DateTime, Datelike as _, Duration, FixedOffset, NaiveTime, Utc, Weekday};
use chrono_tz::Tz;
use serde::Serialize;

use super::{AgendaItem, Event, MAX_INSTANCES, RecurError, agenda, place};

/// When the person works: a daily span on some weekdays, in their zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WorkingHours {
    /// The day's first working minute.
    pub start: NaiveTime,
    /// The day's end (after `start`).
    pub end: NaiveTime,
    /// The working days, Monday first.
    pub days: [bool; 7],
}

impl Default for WorkingHours {
    /// 09:00–18:00, Monday to Friday.
    fn default() -> Self {
        Self {
            start: NaiveTime::from_hms_opt(9, 0, 0).unwrap_or(NaiveTime::MIN),
            end: NaiveTime::from_hms_opt(18, 0, 0).unwrap_or(NaiveTime::MIN),
            days: [true, true, true, true, true, false, false],
        }
    }
}

impl WorkingHours {
    /// Every hour of every day (slots are found anywhere in the window).
    pub fn any_time() -> Self {
        Self { start: NaiveTime::MIN, end: NaiveTime::MIN, days: [true; 7] }
    }

    /// `HH:MM-HH:MM` on the default days; `00:00-00:00` is the whole day.
    pub fn parse_span(text: &str) -> Result<Self, RecurError> {
        let bad = || RecurError::BadHours(text.chars().take(40).collect());
        let (a, b) = text.trim().split_once('-').ok_or_else(bad)?;
        let t = |s: &str| NaiveTime::parse_from_str(s.trim(), "%H:%M").map_err(|_| bad());
        let (start, end) = (t(a)?, t(b)?);
        if end <= start && end != NaiveTime::MIN {
            return Err(bad());
        }
        Ok(Self { start, end, ..Self::default() })
    }

    fn works_on(&self, day: Weekday) -> bool {
        self.days[day.num_days_from_monday() as usize]
    }
}

/// A span of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Span {
    /// From.
    pub start: DateTime<FixedOffset>,
    /// To (not included).
    pub end: DateTime<FixedOffset>,
}

impl Span {
    /// Its length in whole minutes.
    pub fn minutes(&self) -> i64 {
        (self.end - self.start).num_minutes()
    }
}

/// A busy span and what makes it busy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Busy {
    /// When.
    #[serde(flatten)]
    pub span: Span,
    /// The event's UID.
    pub uid: String,
    /// What it is.
    pub summary: String,
    /// Whether it takes whole days.
    pub all_day: bool,
    /// Whether it is only tentative.
    pub tentative: bool,
}

/// A window's busy occurrences and its free slots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FreeBusy {
    /// The occurrences that take time, by start.
    pub busy: Vec<Busy>,
    /// The free slots of at least the asked length inside working hours, by start.
    pub free: Vec<Span>,
}

/// Whether one of `me` declined `e`.
fn declined(e: &Event, me: &[String]) -> bool {
    e.attendees.iter().any(|a| {
        a.partstat.as_deref() == Some("declined")
            && me.iter().any(|m| m.eq_ignore_ascii_case(&a.email))
    })
}

/// Shortest free slot shown when the question does not say, minutes.
/// Fixed (not a setting).
pub const DEFAULT_SLOT_MINUTES: i64 = 30;
/// Shortest free slot that can be asked for, minutes.
/// Fixed (not a setting).
pub const MIN_SLOT_MINUTES: i64 = 5;
/// Longest shortest free slot that can be asked for, minutes (a day).
/// Fixed (not a setting).
pub const MAX_SLOT_MINUTES: i64 = 1_440;

/// The busy time and free slots of `[from, to)`: see the module's rules. `me` are the person's
/// addresses (for declined invitations); slots shorter than `min_minutes` are left out (it
/// must be [`MIN_SLOT_MINUTES`] to [`MAX_SLOT_MINUTES`], else [`RecurError::BadMinutes`]). The
/// window's bounds are the agenda's ([`agenda`]: at most 366 days, at most [`MAX_INSTANCES`]
/// occurrences).
pub fn free_busy(
    events: &[Event],
    person: Tz,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    min_minutes: i64,
    hours: &WorkingHours,
    me: &[String],
) -> Result<FreeBusy, RecurError> {
    check_minutes(min_minutes)?;
    let items = agenda(&busy_events(events, me), person, from, to, MAX_INSTANCES)?;
    let busy = busy_of(items);
    let free = free_slots(&busy, person, from, to, min_minutes, hours)?;
    Ok(FreeBusy { busy, free })
}

/// Refuses a shortest slot outside [`MIN_SLOT_MINUTES`] to [`MAX_SLOT_MINUTES`].
pub(crate) fn check_minutes(min_minutes: i64) -> Result<(), RecurError> {
    if (MIN_SLOT_MINUTES..=MAX_SLOT_MINUTES).contains(&min_minutes) {
        Ok(())
    } else {
        Err(RecurError::BadMinutes(min_minutes))
    }
}

/// The events that take time: masters that leave it free (transparent, cancelled, declined by
/// one of `me`) are dropped, such overrides become cancelled (so the agenda drops the
/// occurrence they replace too).
pub(crate) fn busy_events(events: &[Event], me: &[String]) -> Vec<Event> {
    let frees =
        |e: &Event| e.transparent || e.status.as_deref() == Some("cancelled") || declined(e, me);
    events
        .iter()
        .filter(|e| e.recurrence_id.is_some() || !frees(e))
        .map(|e| {
            let mut e = e.clone();
            if e.recurrence_id.is_some() && frees(&e) {
                e.status = Some("cancelled".to_owned());
            }
            e
        })
        .collect()
}

/// The busy spans of the occurrences of [`busy_events`] (in their order; empty ones left out).
pub(crate) fn busy_of(items: impl IntoIterator<Item = AgendaItem>) -> Vec<Busy> {
    items
        .into_iter()
        .filter(|i| i.end > i.start)
        .map(|i| Busy {
            span: Span { start: i.start, end: i.end },
            uid: i.uid,
            summary: i.summary,
            all_day: i.all_day,
            tentative: i.status.as_deref() == Some("tentative"),
        })
        .collect()
}

/// The free slots of at least `min_minutes` in working hours of `[from, to)` around `busy`
/// (by start).
pub(crate) fn free_slots(
    busy: &[Busy],
    person: Tz,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    min_minutes: i64,
    hours: &WorkingHours,
) -> Result<Vec<Span>, RecurError> {
    check_minutes(min_minutes)?;
    let min = Duration::minutes(min_minutes);
    let mut free = Vec::new();
    for day in working_spans(person, from, to, hours)? {
        let mut cursor = day.start;
        // Busy spans by start: each one cuts the day.
        for b in busy.iter().filter(|b| b.span.start < day.end && b.span.end > day.start) {
            if b.span.start > cursor && b.span.start - cursor >= min {
                free.push(Span { start: cursor, end: b.span.start });
            }
            cursor = cursor.max(b.span.end);
        }
        if day.end > cursor && day.end - cursor >= min {
            free.push(Span { start: cursor, end: day.end });
        }
    }
    Ok(free)
}

/// The working spans of each day of `[from, to)` in the person's zone, clipped to the window.
fn working_spans(
    person: Tz,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    hours: &WorkingHours,
) -> Result<Vec<Span>, RecurError> {
    super::check_window(from, to)?;
    let (from, to) = (from.fixed_offset(), to.fixed_offset());
    let mut day = from.with_timezone(&person).date_naive();
    let last = to.with_timezone(&person).date_naive();
    let mut out = Vec::new();
    while day <= last {
        if hours.works_on(day.weekday()) {
            let start = place(person, day.and_time(hours.start));
            let end = if hours.end == NaiveTime::MIN {
                place(person, (day + Duration::days(1)).and_time(NaiveTime::MIN))
            } else {
                place(person, day.and_time(hours.end))
            };
            let (start, end) = (start.max(from), end.min(to));
            if end > start {
                out.push(Span { start, end });
            }
        }
        day += Duration::days(1);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use chrono::{NaiveDate, TimeZone as _};

    use super::*;
    use crate::calendar::{Attendee, EventTime, Recurrence};

    fn at(d: u32, h: u32, m: u32) -> EventTime {
        let date = NaiveDate::from_ymd_opt(2025, 3, d).unwrap_or_default();
        EventTime::Zoned(date.and_hms_opt(h, m, 0).unwrap_or_default(), chrono_tz::Europe::Rome)
    }

    fn ev(uid: &str, start: EventTime, minutes: i64) -> Event {
        Event {
            uid: uid.into(),
            recurrence_id: None,
            sequence: 0,
            summary: uid.into(),
            location: None,
            description: None,
            start,
            duration_secs: minutes * 60,
            recurrence: Recurrence::default(),
            status: None,
            transparent: false,
            organizer: None,
            attendees: Vec::new(),
        }
    }

    fn hm(s: &Span) -> String {
        format!("{}-{}", s.start.format("%d %H:%M"), s.end.format("%H:%M"))
    }

    #[test]
    fn slots_skip_busy_transparent_cancelled_and_declined_time() {
        let rome = chrono_tz::Europe::Rome;
        let me = vec!["me@example.org".to_owned()];
        let mut daily = ev("daily", at(3, 9, 0), 30);
        daily.recurrence.rule = Some("FREQ=DAILY".into());
        // Tuesday's stand-up declined by me: that occurrence frees its time.
        let mut declined_one = ev("daily", at(4, 9, 0), 30);
        declined_one.recurrence_id = Some(at(4, 9, 0));
        declined_one.attendees = vec![Attendee {
            email: "me@example.org".into(),
            name: None,
            partstat: Some("declined".into()),
        }];
        let lunch = ev("lunch", at(3, 12, 30), 90);
        let mut holiday = ev(
            "holiday",
            EventTime::Date(NaiveDate::from_ymd_opt(2025, 3, 4).unwrap_or_default()),
            24 * 60,
        );
        holiday.transparent = true;
        let mut off = ev("off", at(3, 16, 0), 60);
        off.status = Some("cancelled".into());
        let mut other = ev("other", at(4, 14, 0), 60);
        other.attendees = vec![Attendee {
            email: "ME@example.org".into(),
            name: None,
            partstat: Some("declined".into()),
        }];
        let events = vec![daily, declined_one, lunch, holiday, off, other];
        let from = rome.with_ymd_and_hms(2025, 3, 3, 0, 0, 0).unwrap().with_timezone(&Utc);
        let to = rome.with_ymd_and_hms(2025, 3, 5, 0, 0, 0).unwrap().with_timezone(&Utc);
        let fb = free_busy(&events, rome, from, to, 30, &WorkingHours::default(), &me).unwrap();
        let busy: Vec<String> =
            fb.busy.iter().map(|b| format!("{} {}", b.uid, hm(&b.span))).collect();
        assert_eq!(busy, ["daily 03 09:00-09:30", "lunch 03 12:30-14:00"]);
        let free: Vec<String> = fb.free.iter().map(hm).collect();
        assert_eq!(free, ["03 09:30-12:30", "03 14:00-18:00", "04 09:00-18:00"]);
        // A 4 h minimum keeps only the long slots; an hour's window inside one meeting has none.
        let fb = free_busy(&events, rome, from, to, 241, &WorkingHours::default(), &me).unwrap();
        assert_eq!(fb.free.iter().map(hm).collect::<Vec<_>>(), ["04 09:00-18:00"]);
        // Without my address, the declined meeting is busy.
        let fb = free_busy(&events, rome, from, to, 30, &WorkingHours::default(), &[]).unwrap();
        assert_eq!(fb.busy.len(), 4);
    }

    #[test]
    fn an_all_day_event_takes_the_day_and_working_hours_follow_the_zone_across_dst() {
        let rome = chrono_tz::Europe::Rome;
        let trip = ev(
            "trip",
            EventTime::Date(NaiveDate::from_ymd_opt(2025, 3, 28).unwrap_or_default()),
            24 * 60,
        );
        // Friday 28 (busy all day) to Monday 31 March, after the change to summer time.
        let from = rome.with_ymd_and_hms(2025, 3, 28, 0, 0, 0).unwrap().with_timezone(&Utc);
        let to = rome.with_ymd_and_hms(2025, 4, 1, 0, 0, 0).unwrap().with_timezone(&Utc);
        let fb = free_busy(&[trip], rome, from, to, 30, &WorkingHours::default(), &[]).unwrap();
        assert_eq!(fb.free.len(), 1, "{:?}", fb.free);
        assert_eq!(fb.free[0].start.to_rfc3339(), "2025-03-31T09:00:00+02:00");
        assert_eq!(fb.free[0].minutes(), 9 * 60);
        // Any time: the weekend is free too, and the Sunday of the change has 23 hours.
        let fb = free_busy(&[], rome, from, to, 30, &WorkingHours::any_time(), &[]).unwrap();
        assert_eq!(fb.free.iter().map(Span::minutes).collect::<Vec<_>>(), [1440, 1440, 1380, 1440]);
        // Hours are read strictly; a reversed window is refused.
        assert!(WorkingHours::parse_span("18:00-09:00").is_err());
        assert!(WorkingHours::parse_span("9-18").is_err());
        assert_eq!(WorkingHours::parse_span("08:30-12:00").unwrap().end.to_string(), "12:00:00");
        assert_eq!(
            free_busy(&[], rome, to, from, 30, &WorkingHours::default(), &[]),
            Err(RecurError::BadWindow)
        );
        // The shortest slot is bounded both ways.
        for bad in [0, MIN_SLOT_MINUTES - 1, MAX_SLOT_MINUTES + 1, -30] {
            assert_eq!(
                free_busy(&[], rome, from, to, bad, &WorkingHours::default(), &[]),
                Err(RecurError::BadMinutes(bad))
            );
        }
    }
}
