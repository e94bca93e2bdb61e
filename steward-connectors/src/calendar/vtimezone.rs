//! Time zones a calendar defines itself: a TZID that names no IANA zone (`/Europe/CUSTOM`,
//! `Western/Central Europe`, `posix/Europe/Vaduz`, a globally unique `/vendor/…/Europe/Berlin`)
//! is read from its VTIMEZONE's observances (RFC 5545 §3.6.5: the offset in force is the one
//! of the observance with the last onset before the time) and matched to the IANA zone that
//! keeps the same offsets through the year of the time and the next — so recurrences follow
//! the zone's real DST changes. A definition no IANA zone matches still gives the exact
//! instant of each time it is asked about.
//!
//! calcard resolves a TZID by its name, `X-LIC-LOCATION` and Microsoft's ids; this is what it
//! leaves to the reader.

use std::{cell::RefCell, collections::HashMap};

use calcard::icalendar::{
    ICalendar, ICalendarComponent, ICalendarComponentType, ICalendarProperty, ICalendarValue,
};
use chrono::{Datelike as _, NaiveDate, NaiveDateTime, Offset as _, TimeZone as _};
use chrono_tz::Tz;

/// Most onsets read from one VTIMEZONE.
/// Fixed (not a setting).
const MAX_ONSETS: usize = 2_000;
/// Most VTIMEZONEs of one calendar read.
/// Fixed (not a setting).
const MAX_DEFINITIONS: usize = 100;
/// Most observances (STANDARD, DAYLIGHT) read from one VTIMEZONE.
/// Fixed (not a setting).
const MAX_OBSERVANCES: usize = 16;
/// Most onsets one observance's rule yields (a yearly rule from 1601 to 2100 is 500).
/// Fixed (not a setting).
const MAX_RULE_ONSETS: usize = 600;
/// The last year onsets are built for.
/// Fixed (not a setting).
const LAST_ONSET_YEAR: i32 = 2100;
/// Most (zone, year) guesses one calendar makes; past it a time is read by its definition.
/// Fixed (not a setting).
const MAX_GUESSES: usize = 64;
/// Longest TZID looked into, bytes (a longer one names no zone).
/// Fixed (not a setting).
const MAX_TZID_BYTES: usize = 256;

/// One observance (STANDARD or DAYLIGHT): its first local start, the offsets before and after,
/// its rule without UNTIL (UNTIL, a UTC instant, is applied to onsets), its extra starts.
struct Observance {
    start: NaiveDateTime,
    from: i32,
    to: i32,
    rule: Option<String>,
    until: Option<i64>,
    rdates: Vec<NaiveDateTime>,
}

/// A definition's onsets: (UTC seconds, the offset from then on), in order.
type Onsets = std::rc::Rc<Vec<(i64, i32)>>;

/// The zones a calendar defines.
#[derive(Default)]
pub(crate) struct Defined {
    by_id: HashMap<String, Vec<Observance>>,
    resolved: RefCell<HashMap<(String, i32), Option<Tz>>>,
    /// Onsets by definition (each is built once).
    onsets: RefCell<HashMap<String, Onsets>>,
}

fn offset(comp: &ICalendarComponent, p: &ICalendarProperty) -> Option<i32> {
    let v = comp.property(p)?.values.first()?;
    let (h, m, minus) = match v {
        ICalendarValue::PartialDateTime(d) => (d.tz_hour?, d.tz_minute.unwrap_or(0), d.tz_minus),
        ICalendarValue::Text(t) => {
            let t = t.trim();
            let minus = t.starts_with('-');
            let digits = t.trim_start_matches(['+', '-']);
            (digits.get(..2)?.parse().ok()?, digits.get(2..4).unwrap_or("0").parse().ok()?, minus)
        }
        _ => return None,
    };
    let s = i32::from(h) * 3600 + i32::from(m) * 60;
    (s < 86_400).then_some(if minus { -s } else { s })
}

fn local(v: &ICalendarValue) -> Option<NaiveDateTime> {
    let d = v.as_partial_date_time()?.to_date_time()?;
    Some(d.date_time)
}

fn observance(comp: &ICalendarComponent) -> Option<Observance> {
    let start = local(comp.property(&ICalendarProperty::Dtstart)?.values.first()?)?;
    let (from, to) = (
        offset(comp, &ICalendarProperty::Tzoffsetfrom)?,
        offset(comp, &ICalendarProperty::Tzoffsetto)?,
    );
    let (mut rule, mut until) = (None, None);
    if let Some(ICalendarValue::RecurrenceRule(r)) =
        comp.property(&ICalendarProperty::Rrule).and_then(|e| e.values.first())
    {
        let mut r = r.as_ref().clone();
        until = r.until.take().and_then(|u| u.to_date_time()).map(|u| {
            // UNTIL is UTC (RFC 5545 §3.8.5.3 for observances); a local one is read as such.
            let off = u.offset.map_or(0, |o| i64::from(o.local_minus_utc()));
            u.date_time.and_utc().timestamp() - off
        });
        rule = Some(r.to_string());
    }
    let rdates = comp
        .properties(&ICalendarProperty::Rdate)
        .flat_map(|e| e.values.iter().filter_map(local))
        .take(MAX_ONSETS)
        .collect();
    Some(Observance { start, from, to, rule, until, rdates })
}

impl Defined {
    /// The VTIMEZONEs of `ical` whose TZID calcard could not resolve.
    pub(crate) fn of(ical: &ICalendar) -> Self {
        let mut by_id = HashMap::new();
        for tz in ical
            .components
            .iter()
            .filter(|c| c.component_type == ICalendarComponentType::VTimezone)
            .take(MAX_DEFINITIONS)
        {
            let Some(id) = tz
                .property(&ICalendarProperty::Tzid)
                .and_then(|e| e.values.first())
                .and_then(|v| v.as_text())
            else {
                continue;
            };
            let observances: Vec<Observance> = tz
                .component_ids
                .iter()
                .filter_map(|i| ical.components.get(*i as usize))
                .filter(|c| {
                    matches!(
                        c.component_type,
                        ICalendarComponentType::Standard | ICalendarComponentType::Daylight
                    )
                })
                .filter_map(observance)
                .take(MAX_OBSERVANCES)
                .collect();
            if !observances.is_empty() {
                by_id.insert(id.to_owned(), observances);
            }
        }
        Self { by_id, resolved: RefCell::default(), onsets: RefCell::default() }
    }

    /// The onsets of `id`'s definition up to [`LAST_ONSET_YEAR`]: (UTC seconds, offset), at
    /// most [`MAX_ONSETS`] (the earliest), built once per definition.
    fn onsets(&self, id: &str) -> Onsets {
        if let Some(o) = self.onsets.borrow().get(id) {
            return std::rc::Rc::clone(o);
        }
        let mut out = Vec::new();
        for o in self.by_id.get(id).into_iter().flatten() {
            let mut starts = vec![o.start];
            if let Some(rule) = &o.rule {
                let walls =
                    steward_core::calendar::first_walls(o.start, false, rule, MAX_RULE_ONSETS)
                        .unwrap_or_default();
                starts.extend(walls.into_iter().take_while(|w| w.year() <= LAST_ONSET_YEAR));
            }
            starts.extend(o.rdates.iter().copied());
            for s in starts {
                let at = s.and_utc().timestamp() - i64::from(o.from);
                if o.until.is_none_or(|u| at <= u) && s.year() <= LAST_ONSET_YEAR {
                    out.push((at, o.to));
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out.truncate(MAX_ONSETS);
        let out = std::rc::Rc::new(out);
        self.onsets.borrow_mut().insert(id.to_owned(), std::rc::Rc::clone(&out));
        out
    }

    /// Whether `id` is a zone this calendar defines.
    pub(crate) fn defines(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    /// The IANA zone that `id` stands for around `year`, when one keeps its offsets.
    pub(crate) fn zone(&self, id: &str, year: i32) -> Option<Tz> {
        let key = (id.to_owned(), year);
        if let Some(z) = self.resolved.borrow().get(&key) {
            return *z;
        }
        if self.resolved.borrow().len() >= MAX_GUESSES {
            return None;
        }
        let z = self.guess(id, year);
        self.resolved.borrow_mut().insert(key, z);
        z
    }

    /// The UTC instant of wall-clock `wall` in `id`'s definition (the offset in force an
    /// instant before: in a gap, the offset before it).
    pub(crate) fn instant(&self, id: &str, wall: NaiveDateTime) -> Option<NaiveDateTime> {
        let onsets = self.onsets(id);
        let approx = wall.and_utc().timestamp();
        // Every offset in force within two days: the wall time read with each one is a
        // candidate when that offset is in force at the instant it gives; in an overlap the
        // earlier instant wins, in a gap (no candidate) the offset before the gap is used.
        let near: Vec<i32> = (-2..=2)
            .filter_map(|d| offset_at(&onsets, approx + d * 86_400))
            .chain(
                onsets.iter().filter(|(at, _)| (at - approx).abs() < 2 * 86_400).map(|(_, o)| *o),
            )
            .collect();
        let earliest = near
            .iter()
            .map(|off| approx - i64::from(*off))
            .filter(|at| {
                near.iter().any(|off| {
                    approx - i64::from(*off) == *at && offset_at(&onsets, *at) == Some(*off)
                })
            })
            .min();
        let at = match earliest {
            Some(at) => at,
            None => approx - i64::from(offset_at(&onsets, approx - 2 * 86_400)?),
        };
        Some(chrono::DateTime::from_timestamp(at, 0)?.naive_utc())
    }

    fn guess(&self, id: &str, year: i32) -> Option<Tz> {
        let onsets = self.onsets(id);
        if onsets.is_empty() {
            return None;
        }
        // Probes: twice a month through the two years, and either side of every onset in them.
        let first =
            NaiveDate::from_ymd_opt(year, 1, 1)?.and_hms_opt(12, 0, 0)?.and_utc().timestamp();
        let last =
            NaiveDate::from_ymd_opt(year + 2, 1, 1)?.and_hms_opt(0, 0, 0)?.and_utc().timestamp();
        let mut probes: Vec<i64> =
            (0..48).map(|i| first + i * 15 * 86_400 + (i / 2) * 86_400).collect();
        for (at, _) in onsets.iter().filter(|(at, _)| (first..last).contains(at)) {
            probes.extend([at - 1, at + 1]);
        }
        let want = |ps: &[i64]| -> Vec<(i64, i32)> {
            ps.iter().filter_map(|p| Some((*p, offset_at(&onsets, *p)?))).collect()
        };
        let (regular, edges) = (want(&probes[..48]), want(&probes[48..]));
        let agree = |tz: &Tz, w: &[(i64, i32)]| {
            w.iter()
                .filter(|(at, off)| {
                    chrono::Utc.timestamp_opt(*at, 0).single().is_some_and(|t| {
                        tz.offset_from_utc_datetime(&t.naive_utc()).fix().local_minus_utc() == *off
                    })
                })
                .count()
        };
        // A name that holds an IANA name (`posix/Europe/Vaduz`, `/vendor/…/Europe/Berlin`).
        if let Some(tz) = named(id).filter(|tz| agree(tz, &regular) == regular.len()) {
            return Some(tz);
        }
        // Else a zone with the same offsets through the two years (twice a month), ranked by
        // how many of the definition's changes it makes at the same instant (definitions
        // written by hand are often an hour off at one of them), then by the words it shares
        // with the TZID, then region/city names over aliases.
        let words: Vec<String> = id
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 3)
            .map(str::to_lowercase)
            .collect();
        let mut best: Option<((usize, usize, bool), Tz)> = None;
        for tz in chrono_tz::TZ_VARIANTS.iter().filter(|tz| agree(tz, &regular) == regular.len()) {
            let name = tz.name().to_lowercase();
            let shared = words.iter().filter(|w| name.contains(w.as_str())).count();
            let canonical = [
                "africa/",
                "america/",
                "asia/",
                "atlantic/",
                "australia/",
                "europe/",
                "indian/",
                "pacific/",
            ]
            .iter()
            .any(|p| name.starts_with(p));
            let rank = (agree(tz, &edges), shared, canonical);
            if best.as_ref().is_none_or(|(r, _)| rank > *r) {
                best = Some((rank, *tz));
            }
        }
        best.map(|(_, tz)| tz)
    }
}

/// The IANA zone a TZID holds: its own name, one after a vendor prefix (`posix/Europe/Vaduz`,
/// `/freeassociation.sourceforge.net/Europe/Berlin`), or with `-` for `/` (`US-Eastern`).
pub(crate) fn named(id: &str) -> Option<Tz> {
    let id = id.trim().trim_matches('"');
    if id.len() > MAX_TZID_BYTES {
        return None;
    }
    let parts: Vec<&str> = id.split('/').filter(|p| !p.is_empty()).collect();
    // IANA names have at most three parts (`America/Argentina/Buenos_Aires`).
    let first = parts.len().saturating_sub(3);
    (first..parts.len())
        .find_map(|i| parts[i..].join("/").parse::<Tz>().ok())
        .or_else(|| id.replace('-', "/").parse().ok())
}

fn offset_at(onsets: &[(i64, i32)], at: i64) -> Option<i32> {
    let i = onsets.partition_point(|(onset, _)| *onset <= at);
    // Before the first onset: the first observance's offset (the earliest rule in force).
    Some(onsets.get(i.saturating_sub(1))?.1)
}
