//! `steward calendar agenda` and `steward calendar free`: the occurrences of a vdir's or an
//! `.ics` file's events in a window, recurrences expanded (bounded: at most 366 days, at most
//! 1,000 occurrences), and the free slots left in working hours.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use steward_connectors::calendar::{
    CalendarRead, agenda_of, free_busy_of, read_ics_file, read_vdir, system_zone,
};
use steward_core::calendar::{MAX_INSTANCES, WorkingHours};

use super::{Failure, json_line, usage};

/// Where the events come from and the window asked about.
#[derive(Debug, Args)]
pub(super) struct Window {
    /// A vdir root (a folder of calendars, each a folder of `.ics` items).
    #[arg(long, conflicts_with = "ics")]
    vdir: Option<PathBuf>,
    /// One `.ics` file.
    #[arg(long)]
    ics: Option<PathBuf>,
    /// From (a date, at midnight in the zone, or RFC 3339).
    #[arg(long)]
    from: String,
    /// To, not included.
    #[arg(long)]
    to: String,
    /// The zone for floating and all-day times and for dates given here (an IANA name;
    /// default TZ, else the system's).
    #[arg(long)]
    tz: Option<String>,
    /// Print JSON lines: one per occurrence or slot, then the read errors.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub(super) enum CalendarCmd {
    /// The occurrences between two times, in order.
    Agenda {
        #[command(flatten)]
        window: Window,
    },
    /// The free slots between two times: working hours less every busy occurrence
    /// (transparent, cancelled and declined ones take no time).
    Free {
        #[command(flatten)]
        window: Window,
        /// The shortest slot shown, minutes.
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(i64).range(1..=1440))]
        min_minutes: i64,
        /// Working hours, `HH:MM-HH:MM`, Monday to Friday (default 09:00-18:00).
        #[arg(long, conflicts_with = "any_time")]
        hours: Option<String>,
        /// Look for slots at any hour of any day.
        #[arg(long)]
        any_time: bool,
        /// The person's addresses (repeatable): invitations they declined take no time.
        #[arg(long)]
        me: Vec<String>,
    },
}

/// `YYYY-MM-DD` (midnight in `zone`) or RFC 3339, as a UTC instant.
fn instant(text: &str, zone: chrono_tz::Tz) -> Result<chrono::DateTime<chrono::Utc>, Failure> {
    use chrono::TimeZone as _;
    if let Ok(d) = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        let w = d.and_time(chrono::NaiveTime::MIN);
        return Ok(steward_core::calendar::place(zone, w).with_timezone(&chrono::Utc));
    }
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| chrono::Utc.from_utc_datetime(&t.naive_utc()))
        .map_err(|_| usage(format!("{text:?} is neither YYYY-MM-DD nor RFC 3339")))
}

struct Read {
    zone: chrono_tz::Tz,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
    calendars: Vec<CalendarRead>,
}

fn read(w: &Window) -> Result<Read, Failure> {
    let zone = match &w.tz {
        Some(t) => t.parse().map_err(|_| usage(format!("{t:?} is not an IANA zone")))?,
        None => system_zone(),
    };
    let (from, to) = (instant(&w.from, zone)?, instant(&w.to, zone)?);
    let calendars = match (&w.vdir, &w.ics) {
        (Some(root), None) => read_vdir(root).map_err(|e| Failure {
            code: "CALENDAR_SOURCE_UNREADABLE".into(),
            kind: steward_core::ErrorKind::NotFound,
            message: format!("{}: {e}", root.display()),
        })?,
        (None, Some(file)) => vec![read_ics_file(file)],
        _ => return Err(usage("one of --vdir or --ics is required".to_owned())),
    };
    Ok(Read { zone, from, to, calendars })
}

fn print_errors(calendars: &[CalendarRead], json: bool) {
    for e in calendars.iter().flat_map(|c| c.errors.iter()) {
        if json {
            json_line(&serde_json::json!({ "error": e }));
        } else {
            eprintln!("{}: {} {}", e.path.display(), e.code, e.message);
        }
    }
}

pub(super) fn calendar(cmd: CalendarCmd) -> Result<(), Failure> {
    match cmd {
        CalendarCmd::Agenda { window } => {
            let r = read(&window)?;
            let items = agenda_of(&r.calendars, r.zone, r.from, r.to, MAX_INSTANCES)
                .map_err(Failure::from)?;
            for i in &items {
                if window.json {
                    json_line(i);
                    continue;
                }
                let o = &i.item;
                let when = if o.all_day {
                    format!("{} (all day)", o.start.date_naive())
                } else {
                    format!("{} – {}", o.start.format("%Y-%m-%d %H:%M %:z"), o.end.format("%H:%M"))
                };
                let at = o.location.as_deref().map_or_else(String::new, |l| format!(" @ {l}"));
                out!("{when}  {}{at}  [{}]", o.summary, i.calendar);
            }
            print_errors(&r.calendars, window.json);
            Ok(())
        }
        CalendarCmd::Free { window, min_minutes, hours, any_time, me } => {
            let hours = match (hours, any_time) {
                (_, true) => WorkingHours::any_time(),
                (Some(h), false) => WorkingHours::parse_span(&h).map_err(Failure::from)?,
                (None, false) => WorkingHours::default(),
            };
            let r = read(&window)?;
            let fb = free_busy_of(&r.calendars, r.zone, r.from, r.to, min_minutes, &hours, &me)
                .map_err(Failure::from)?;
            for s in &fb.free {
                if window.json {
                    json_line(&serde_json::json!({
                        "start": s.start, "end": s.end, "minutes": s.minutes(),
                    }));
                } else {
                    let (h, m) = (s.minutes() / 60, s.minutes() % 60);
                    out!(
                        "{} – {}  free {h}h{m:02}",
                        s.start.format("%a %Y-%m-%d %H:%M %:z"),
                        s.end.format("%H:%M")
                    );
                }
            }
            if !window.json && fb.free.is_empty() {
                out!("no free slot of {min_minutes} minutes or more");
            }
            print_errors(&r.calendars, window.json);
            Ok(())
        }
    }
}
