//! iCalendar (RFC 5545) files read into [`Event`]s with `calcard`: every VEVENT, its times in
//! their own frame (a date, a wall-clock time in the IANA zone its TZID names — VTIMEZONE
//! `X-LIC-LOCATION`, Microsoft and Outlook names resolved — UTC, or floating), its length
//! (DTEND, DURATION, or RFC 5545's defaults), its recurrence and its attendees. A bad event is
//! a per-item error with a stable code; the rest of the file is read.

use super::vtimezone::Defined;
use calcard::{
    common::{IanaString as _, PartialDateTime, timezone::Tz as CalTz},
    icalendar::{
        ICalendar, ICalendarComponent, ICalendarComponentType, ICalendarEntry,
        ICalendarParameterName, ICalendarParameterValue, ICalendarProperty, ICalendarStatus,
        ICalendarTransparency, ICalendarValue, timezone::TzResolver,
    },
};
use chrono::Duration;
use serde::Serialize;
use steward_core::calendar::{
    Attendee, Event, EventTime, MAX_ATTENDEES, MAX_DATES, MAX_DESCRIPTION_CHARS, MAX_EVENT_DAYS,
    MAX_LOCATION_CHARS, MAX_SUMMARY_CHARS, Recurrence,
};

/// Largest iCalendar text read, bytes.
/// Fixed (not a setting).
pub const MAX_ICS_BYTES: usize = 16 * 1024 * 1024;
/// Most events read from one file (the rest are one error).
/// Fixed (not a setting).
pub const MAX_FILE_EVENTS: usize = 20_000;
/// Most per-item errors kept from one file.
/// Fixed (not a setting).
pub const MAX_FILE_ERRORS: usize = 100;

/// A VEVENT that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ItemError {
    /// Its UID, when it had one.
    pub uid: Option<String>,
    /// A stable code: `ICS_NO_DTSTART`, `ICS_BAD_TIME`, `ICS_TOO_MANY_EVENTS` (the event is
    /// not read), or `ICS_BAD_DTEND`, `ICS_BAD_RRULE` (it is read, with RFC 5545's default
    /// length or as one occurrence).
    pub code: &'static str,
    /// What was wrong.
    pub message: String,
}

/// What one iCalendar text held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IcsRead {
    /// Its events, masters and overrides, in file order.
    pub events: Vec<Event>,
    /// The events that could not be read.
    pub errors: Vec<ItemError>,
}

/// Why a whole text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IcsError {
    /// Larger than [`MAX_ICS_BYTES`].
    #[error("larger than {MAX_ICS_BYTES} bytes")]
    TooLarge,
    /// Not iCalendar.
    #[error("not an iCalendar text: {0}")]
    Invalid(String),
}

impl steward_core::StewardError for IcsError {
    fn code(&self) -> &'static str {
        match self {
            Self::TooLarge => "ICS_TOO_LARGE",
            Self::Invalid(_) => "ICS_INVALID",
        }
    }

    fn kind(&self) -> steward_core::ErrorKind {
        steward_core::ErrorKind::InvalidInput
    }
}

/// A UID for an event that has none: `steward-` and a digest of its start, summary and
/// description (the same event read again gets the same one).
fn synthetic_uid(comp: &ICalendarComponent, start: &EventTime) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(format!("{start:?}").as_bytes());
    for p in [ICalendarProperty::Summary, ICalendarProperty::Description] {
        h.update([0]);
        h.update(text(comp, &p, usize::MAX).unwrap_or_default().as_bytes());
    }
    let digest = h.finalize();
    let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    format!("steward-{hex}")
}

/// `text` without the blank lines some writers leave before a folded line's continuation
/// (`UID` CRLF CRLF ` :123`): the continuation joins the line it continues.
fn join_split_folds(text: &str) -> std::borrow::Cow<'_, str> {
    if !(text.contains("\n\r\n ") || text.contains("\n\n ") || text.contains("\n\r\n\t")) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        let blank = line.trim_end_matches(['\r', '\n']).is_empty();
        let continues = lines.peek().is_some_and(|n| n.starts_with([' ', '\t']));
        if blank && continues && !out.is_empty() {
            continue;
        }
        out.push_str(line);
    }
    std::borrow::Cow::Owned(out)
}

/// Whether a time value is malformed: `YYYYMMDDThhmmss` with other than six time digits
/// (`19970701T13000Z`), which calcard would read as a floating 13:00.
fn short_time(value: &str) -> bool {
    value.split(',').any(|v| {
        let v = v.split('/').next().unwrap_or(v).trim().trim_end_matches(['Z', 'z']);
        match v.split_once(['T', 't']) {
            Some((d, t)) => {
                d.len() == 8
                    && d.bytes().all(|b| b.is_ascii_digit())
                    && t.bytes().all(|b| b.is_ascii_digit())
                    && t.len() != 6
            }
            None => false,
        }
    })
}

/// `text` with every malformed time of a date property (see [`short_time`]) made unreadable,
/// so its event is a per-item `ICS_BAD_TIME` instead of a time read wrong.
fn refuse_short_times(text: &str) -> std::borrow::Cow<'_, str> {
    const NAMES: [&str; 6] = ["DTSTART", "DTEND", "DUE", "RECURRENCE-ID", "EXDATE", "RDATE"];
    let bad = |line: &str| {
        let name = line.split([';', ':']).next().unwrap_or("");
        NAMES.iter().any(|n| n.eq_ignore_ascii_case(name))
            && line.rsplit_once(':').is_some_and(|(_, v)| short_time(v.trim_end()))
    };
    if !text.lines().any(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        match line.rsplit_once(':') {
            Some((head, _)) if bad(line) => {
                out.push_str(head);
                out.push_str(":INVALID\r\n");
            }
            _ => out.push_str(line),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Reads `text`.
pub fn read_ics(text: &str) -> Result<IcsRead, IcsError> {
    if text.len() > MAX_ICS_BYTES {
        return Err(IcsError::TooLarge);
    }
    // A file may hold several VCALENDAR objects (exports, mailboxes of invitations).
    let joined = join_split_folds(text);
    let checked = refuse_short_times(&joined);
    let mut parser = calcard::Parser::new(&checked);
    let mut calendars = Vec::new();
    let mut first_error = None;
    for _ in 0..=MAX_FILE_EVENTS {
        match parser.entry() {
            calcard::Entry::ICalendar(ical) => calendars.push(ical),
            calcard::Entry::Eof => break,
            other => {
                if first_error.is_none() {
                    let why = format!("{other:?}");
                    first_error = Some(why.chars().take(200).collect::<String>());
                }
                // A line the parser could not take: it has moved past it; go on.
                if matches!(other, calcard::Entry::TooManyComponents) {
                    break;
                }
            }
        }
    }
    if calendars.is_empty() {
        return Err(IcsError::Invalid(first_error.unwrap_or_else(|| "no VCALENDAR".to_owned())));
    }
    let mut out = IcsRead::default();
    let error = |out: &mut IcsRead, e: ItemError| {
        if out.errors.len() < MAX_FILE_ERRORS {
            out.errors.push(e);
        }
    };
    for ical in &calendars {
        read_calendar(ical, &mut out, &error);
        if out.events.len() >= MAX_FILE_EVENTS {
            break;
        }
    }
    Ok(out)
}

/// The zones a calendar's TZIDs name: calcard's resolution (IANA names, `X-LIC-LOCATION`,
/// Microsoft's ids), then the calendar's own definitions ([`Defined`]).
struct Zones<'a> {
    named: TzResolver<&'a str>,
    defined: Defined,
}

fn read_calendar(ical: &ICalendar, out: &mut IcsRead, error: &dyn Fn(&mut IcsRead, ItemError)) {
    let tz = Zones { named: ical.build_tz_resolver(), defined: Defined::of(ical) };
    for comp in &ical.components {
        if comp.component_type != ICalendarComponentType::VEvent {
            continue;
        }
        if out.events.len() == MAX_FILE_EVENTS {
            error(
                out,
                ItemError {
                    uid: None,
                    code: "ICS_TOO_MANY_EVENTS",
                    message: format!("only the first {MAX_FILE_EVENTS} events are read"),
                },
            );
            break;
        }
        let mut warnings = Vec::new();
        match event(comp, &tz, &mut warnings) {
            Ok(e) => out.events.push(e),
            Err(e) => error(out, e),
        }
        for w in warnings {
            error(out, w);
        }
    }
}

fn text(comp: &ICalendarComponent, p: &ICalendarProperty, max: usize) -> Option<String> {
    let t = comp.property(p)?.values.first()?.as_text()?.trim();
    (!t.is_empty()).then(|| t.chars().take(max).collect())
}

/// A DATE or DATE-TIME value in its frame.
fn time_of(pdt: &PartialDateTime, tz_id: Option<&str>, tz: &Zones<'_>) -> Option<EventTime> {
    let r = pdt.to_date_time()?;
    // A time must have its hour, minute and second (`T13000Z` is no time, not a floating one).
    if pdt.has_time() && (pdt.minute.is_none() || pdt.second.is_none()) {
        return None;
    }
    if !pdt.has_time() {
        return Some(EventTime::Date(r.date_time.date()));
    }
    if let Some(off) = r.offset {
        let utc = r.date_time - Duration::seconds(i64::from(off.local_minus_utc()));
        return Some(EventTime::Utc(utc));
    }
    Some(match tz_id.and_then(|id| tz.named.resolve(id)) {
        Some(CalTz::Tz(zone)) => EventTime::Zoned(r.date_time, zone),
        Some(CalTz::Fixed(off)) => {
            EventTime::Utc(r.date_time - Duration::seconds(i64::from(off.local_minus_utc())))
        }
        // A zone the calendar defines itself: the IANA zone that keeps its offsets, else the
        // instant its definition gives.
        _ if tz_id.is_some_and(|id| tz.defined.defines(id)) => {
            let id = tz_id.unwrap_or_default();
            let wall = r.date_time;
            match tz.defined.zone(id, chrono::Datelike::year(&wall)) {
                Some(zone) => EventTime::Zoned(wall, zone),
                None => {
                    tz.defined.instant(id, wall).map_or(EventTime::Floating(wall), EventTime::Utc)
                }
            }
        }
        // A TZID no definition explains that holds an IANA name (`/vendor/Europe/Berlin`,
        // `US-Eastern`).
        _ if tz_id.and_then(super::vtimezone::named).is_some() => EventTime::Zoned(
            r.date_time,
            tz_id.and_then(super::vtimezone::named).unwrap_or_default(),
        ),
        // No TZID, or one that names no zone: floating (RFC 5545 leaves it to the reader).
        Some(CalTz::Floating) | None => EventTime::Floating(r.date_time),
    })
}

fn entry_time(e: &ICalendarEntry, tz: &Zones<'_>) -> Option<EventTime> {
    time_of(e.values.first()?.as_partial_date_time()?, e.tz_id(), tz)
}

/// Every time of every `p` entry (EXDATE, RDATE: lists, each with its own TZID).
fn times(comp: &ICalendarComponent, p: &ICalendarProperty, tz: &Zones<'_>) -> Vec<EventTime> {
    comp.properties(p)
        .flat_map(|e| {
            e.values.iter().filter_map(move |v| match v {
                ICalendarValue::PartialDateTime(d) => time_of(d, e.tz_id(), tz),
                ICalendarValue::Period(p) => match p {
                    calcard::icalendar::ICalendarPeriod::Range { start, .. }
                    | calcard::icalendar::ICalendarPeriod::Duration { start, .. } => {
                        time_of(start, e.tz_id(), tz)
                    }
                },
                _ => None,
            })
        })
        .take(MAX_DATES)
        .collect()
}

/// The wall-clock time of `t` (an end compared with its start in the same frame).
fn seconds_between(start: &EventTime, end: &EventTime) -> i64 {
    // In UTC as the stand-in zone: floating and dates compare by wall clock, zoned and UTC
    // times by instant.
    let utc = chrono_tz::Tz::UTC;
    (end.instant(utc) - start.instant(utc)).num_seconds()
}

fn event(
    comp: &ICalendarComponent,
    tz: &Zones<'_>,
    warn: &mut Vec<ItemError>,
) -> Result<Event, ItemError> {
    let uid = comp.uid().map(|u| u.trim().chars().take(500).collect::<String>());
    let fail = |code: &'static str, message: &str| ItemError {
        uid: uid.clone(),
        code,
        message: message.to_owned(),
    };
    let start_entry = comp
        .property(&ICalendarProperty::Dtstart)
        .ok_or_else(|| fail("ICS_NO_DTSTART", "no DTSTART"))?;
    let start = entry_time(start_entry, tz)
        .ok_or_else(|| fail("ICS_BAD_TIME", "DTSTART cannot be read"))?;
    // RFC 5545 requires a UID; exports without one still name their events: a stable one is
    // made from what the event is (its start, summary and description).
    let uid_text = match uid.clone().filter(|u| !u.is_empty()) {
        Some(u) => u,
        None => synthetic_uid(comp, &start),
    };
    let end = comp.property(&ICalendarProperty::Dtend).map(|e| entry_time(e, tz));
    if let Some(None) = end {
        // The event is still worth having: it keeps its start, with RFC 5545's default length.
        warn.push(fail("ICS_BAD_DTEND", "DTEND cannot be read: the default length is used"));
    }
    let duration_secs = if let Some(Some(end)) = end {
        seconds_between(&start, &end).max(0)
    } else if let Some(d) = comp
        .property(&ICalendarProperty::Duration)
        .and_then(|e| e.values.first())
        .and_then(|v| match v {
            ICalendarValue::Duration(d) => d.to_time_delta(),
            _ => None,
        })
    {
        d.num_seconds().max(0)
    } else if start.is_date() {
        // RFC 5545: an all-day event without an end lasts one day.
        86_400
    } else {
        // … and a timed one ends when it starts.
        0
    };
    let rule_entry = comp.property(&ICalendarProperty::Rrule);
    let rule = rule_entry.and_then(|e| e.values.first()).and_then(|v| match v {
        ICalendarValue::RecurrenceRule(r) => Some(r.to_string()),
        _ => None,
    });
    if rule_entry.is_some() && rule.is_none() {
        warn.push(fail(
            "ICS_BAD_RRULE",
            "RRULE cannot be read: the event is kept as one occurrence",
        ));
    }
    let recurrence = Recurrence {
        rule,
        rdates: times(comp, &ICalendarProperty::Rdate, tz),
        exdates: times(comp, &ICalendarProperty::Exdate, tz),
    };
    let recurrence_id = comp
        .property(&ICalendarProperty::RecurrenceId)
        .map(|e| {
            entry_time(e, tz).ok_or_else(|| fail("ICS_BAD_TIME", "RECURRENCE-ID cannot be read"))
        })
        .transpose()?;
    let status = comp.status().map(|s| {
        match s {
            ICalendarStatus::Tentative => "tentative",
            ICalendarStatus::Cancelled => "cancelled",
            _ => "confirmed",
        }
        .to_owned()
    });
    let transparent = matches!(comp.transparency(), Some(ICalendarTransparency::Transparent));
    let address = |e: &ICalendarEntry| {
        e.values
            .first()
            .and_then(|v| v.as_text())
            .map(|a| {
                let a = a.trim();
                let a =
                    a.get(..7).filter(|p| p.eq_ignore_ascii_case("mailto:")).map_or(a, |_| &a[7..]);
                a.to_lowercase()
            })
            .filter(|a| !a.is_empty())
    };
    let attendees = comp
        .properties(&ICalendarProperty::Attendee)
        .filter_map(|e| {
            let email = address(e)?;
            let name = e
                .parameters(&ICalendarParameterName::Cn)
                .find_map(|v| v.as_text())
                .map(|n| n.trim().chars().take(200).collect());
            let partstat = e.parameters(&ICalendarParameterName::Partstat).find_map(|v| match v {
                ICalendarParameterValue::Partstat(p) => Some(p.as_str().to_ascii_lowercase()),
                _ => None,
            });
            Some(Attendee { email, name, partstat })
        })
        .take(MAX_ATTENDEES)
        .collect();
    let organizer = comp.property(&ICalendarProperty::Organizer).and_then(address);
    let sequence = comp
        .property(&ICalendarProperty::Sequence)
        .and_then(|e| e.values.first())
        .and_then(ICalendarValue::as_integer)
        .unwrap_or(0);
    let duration_secs = duration_secs.min(MAX_EVENT_DAYS * 86_400);
    Ok(Event {
        uid: uid_text,
        recurrence_id,
        sequence,
        summary: text(comp, &ICalendarProperty::Summary, MAX_SUMMARY_CHARS).unwrap_or_default(),
        location: text(comp, &ICalendarProperty::Location, MAX_LOCATION_CHARS),
        description: text(comp, &ICalendarProperty::Description, MAX_DESCRIPTION_CHARS),
        start,
        duration_secs,
        recurrence,
        status,
        transparent,
        organizer,
        attendees,
    })
}
