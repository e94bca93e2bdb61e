//! `steward calendar agenda`: the occurrences of a vdir's or an `.ics` file's events in a
//! window, recurrences expanded (bounded: at most 366 days, at most 1,000 occurrences).

use std::path::PathBuf;

use clap::Subcommand;
use steward_connectors::calendar::{
    CalendarRead, agenda_of, read_ics_file, read_vdir, system_zone,
};
use steward_core::calendar::MAX_INSTANCES;

use super::{Failure, json_line, usage};

#[derive(Debug, Subcommand)]
pub(super) enum CalendarCmd {
    /// The occurrences between two times, in order.
    Agenda {
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
        /// Print JSON lines: one per occurrence, then the read errors.
        #[arg(long)]
        json: bool,
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

pub(super) fn calendar(cmd: CalendarCmd) -> Result<(), Failure> {
    match cmd {
        CalendarCmd::Agenda { vdir, ics, from, to, tz, json } => {
            let zone = match tz {
                Some(t) => t.parse().map_err(|_| usage(format!("{t:?} is not an IANA zone")))?,
                None => system_zone(),
            };
            let (from, to) = (instant(&from, zone)?, instant(&to, zone)?);
            let calendars: Vec<CalendarRead> = match (vdir, ics) {
                (Some(root), None) => read_vdir(&root).map_err(|e| Failure {
                    code: "CALENDAR_SOURCE_UNREADABLE".into(),
                    kind: steward_core::ErrorKind::NotFound,
                    message: format!("{}: {e}", root.display()),
                })?,
                (None, Some(file)) => vec![read_ics_file(&file)],
                _ => return Err(usage("one of --vdir or --ics is required".to_owned())),
            };
            let items =
                agenda_of(&calendars, zone, from, to, MAX_INSTANCES).map_err(Failure::from)?;
            let errors = calendars.iter().flat_map(|c| c.errors.iter());
            if json {
                for i in &items {
                    json_line(i);
                }
                for e in errors {
                    json_line(&serde_json::json!({ "error": e }));
                }
                return Ok(());
            }
            for i in &items {
                let o = &i.item;
                let when = if o.all_day {
                    format!("{} (all day)", o.start.date_naive())
                } else {
                    format!("{} – {}", o.start.format("%Y-%m-%d %H:%M %:z"), o.end.format("%H:%M"))
                };
                let at = o.location.as_deref().map_or_else(String::new, |l| format!(" @ {l}"));
                out!("{when}  {}{at}  [{}]", o.summary, i.calendar);
            }
            for e in errors {
                eprintln!("{}: {} {}", e.path.display(), e.code, e.message);
            }
            Ok(())
        }
    }
}
