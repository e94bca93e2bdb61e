//! `steward index calendar`, `steward calendar agenda`, `free` and `search`: calendars
//! reconciled into `calendar.db`, and asked about — from the store, or straight from a vdir or
//! an `.ics` file (`--vdir`, `--ics`) — in a window, recurrences expanded (bounded: at most
//! 366 days, at most 1,000 occurrences).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use steward_connectors::{
    calendar::{CalendarRead, agenda_of, free_busy_of, read_ics_file, read_vdir},
    pim::{PimFrom, index_calendars},
};
use steward_core::calendar::{CalendarSettings, MAX_INSTANCES, WorkingHours, store::EventQuery};

use super::{Failure, json_line, usage};

/// Where the events come from and the window asked about.
#[derive(Debug, Args)]
pub(super) struct Window {
    /// Read a vdir root (a folder of calendars, each a folder of `.ics` items) instead of the
    /// indexed calendars.
    #[arg(long, conflicts_with = "ics")]
    vdir: Option<PathBuf>,
    /// Read one `.ics` file instead of the indexed calendars.
    #[arg(long)]
    ics: Option<PathBuf>,
    /// From (a date, at midnight in the zone, or RFC 3339).
    #[arg(long)]
    from: String,
    /// To, not included.
    #[arg(long)]
    to: String,
    /// The zone for floating and all-day times and for dates given here (an IANA name;
    /// default `[calendar] time_zone`, else TZ, else the system's).
    #[arg(long)]
    tz: Option<String>,
    /// Print JSON lines: one per occurrence or slot, then the read errors.
    #[arg(long)]
    json: bool,
}

/// Calendars to index.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("cal").required(true).multiple(false)))]
pub(super) struct IndexArgs {
    /// A vdir root (a folder of calendars, each a folder of `.ics` items).
    #[arg(long, value_name = "PATH", group = "cal")]
    vdir: Option<PathBuf>,
    /// One `.ics` file (an export or a subscription).
    #[arg(long, value_name = "FILE", group = "cal")]
    ics: Option<PathBuf>,
    /// A CalDAV server, principal or calendar home (every calendar found there).
    #[arg(long, value_name = "URL", group = "cal")]
    caldav: Option<String>,
    #[command(flatten)]
    login: super::dav::DavLogin,
    /// The account these calendars belong to.
    #[arg(long, default_value = "local")]
    account: String,
    /// Print one JSON object, then the read errors.
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
        /// The shortest slot shown, minutes (5 to 1440).
        #[arg(long, default_value_t = steward_core::calendar::DEFAULT_SLOT_MINUTES)]
        min_minutes: i64,
        /// Working hours, `HH:MM-HH:MM`, Monday to Friday (default 09:00-18:00).
        #[arg(long, conflicts_with = "any_time")]
        hours: Option<String>,
        /// Look for slots at any hour of any day.
        #[arg(long)]
        any_time: bool,
        /// The person's addresses (repeatable; default `[calendar] me`): invitations they
        /// declined take no time.
        #[arg(long)]
        me: Vec<String>,
    },
    /// Search the indexed calendars: every word must match the summary, location,
    /// description or attendees (no words: every event of the window).
    Search {
        /// The words.
        text: String,
        /// From (a date or RFC 3339; default 30 days ago).
        #[arg(long)]
        from: Option<String>,
        /// To, not included (default 90 days ahead).
        #[arg(long)]
        to: Option<String>,
        /// Only events with this attendee or organizer.
        #[arg(long)]
        attendee: Option<String>,
        /// Only this calendar (`account/collection`; repeatable).
        #[arg(long)]
        calendar: Vec<String>,
        /// The most events shown (1-50).
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=50))]
        limit: u16,
        /// The zone for dates given here (default `[calendar] time_zone`).
        #[arg(long)]
        tz: Option<String>,
        /// Print JSON lines, one per event.
        #[arg(long)]
        json: bool,
    },
}

fn instant(text: &str, zone: chrono_tz::Tz) -> Result<chrono::DateTime<chrono::Utc>, Failure> {
    steward_core::calendar::instant_in(text, zone).map_err(Failure::from)
}

struct Read {
    zone: chrono_tz::Tz,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
    /// The files' calendars, or `None`: ask the store.
    calendars: Option<Vec<CalendarRead>>,
}

/// The person's calendar settings (`[calendar]`), a bad section a typed error.
fn settings(home: Option<&PathBuf>) -> Result<CalendarSettings, Failure> {
    match home.cloned().or_else(steward_core::default_home) {
        Some(h) => Ok(steward_connectors::home::calendar_settings(&h)?),
        None => Ok(CalendarSettings::default()),
    }
}

fn zone_of(tz: Option<&String>, settings: &CalendarSettings) -> Result<chrono_tz::Tz, Failure> {
    match tz {
        Some(t) => t.parse().map_err(|_| usage(format!("{t:?} is not an IANA zone"))),
        None => Ok(settings.zone),
    }
}

fn read(w: &Window, settings: &CalendarSettings) -> Result<Read, Failure> {
    let zone = zone_of(w.tz.as_ref(), settings)?;
    let (from, to) = (instant(&w.from, zone)?, instant(&w.to, zone)?);
    let calendars = match (&w.vdir, &w.ics) {
        (Some(root), None) => Some(read_vdir(root).map_err(|e| Failure {
            code: "CALENDAR_SOURCE_UNREADABLE".into(),
            kind: steward_core::ErrorKind::NotFound,
            message: format!("{}: {e}", root.display()),
        })?),
        (None, Some(file)) => Some(vec![read_ics_file(file)]),
        _ => None,
    };
    Ok(Read { zone, from, to, calendars })
}

fn print_errors(calendars: Option<&Vec<CalendarRead>>, json: bool) {
    for e in calendars.into_iter().flatten().flat_map(|c| c.errors.iter()) {
        if json {
            json_line(&serde_json::json!({ "error": e }));
        } else {
            eprintln!("{}: {} {}", e.path.display(), e.code, e.message);
        }
    }
}

fn print_occurrence(calendar: &str, o: &steward_core::calendar::AgendaItem, json: bool) {
    if json {
        // One flat object: the occurrence's fields and its calendar.
        let mut v = serde_json::to_value(o).unwrap_or_default();
        if let Some(m) = v.as_object_mut() {
            m.insert("calendar".to_owned(), serde_json::Value::from(calendar));
        }
        json_line(&v);
        return;
    }
    let when = if o.all_day {
        format!("{} (all day)", o.start.date_naive())
    } else {
        format!("{} – {}", o.start.format("%Y-%m-%d %H:%M %:z"), o.end.format("%H:%M"))
    };
    let at = o.location.as_deref().map_or_else(String::new, |l| format!(" @ {l}"));
    out!("{when}  {}{at}  [{calendar}]", o.summary);
}

pub(super) fn index_calendar(home: Option<PathBuf>, a: IndexArgs) -> Result<(), Failure> {
    let steward = super::open(home)?;
    let client = a.caldav.as_deref().map(|url| a.login.client(url)).transpose()?;
    let from = match (&a.vdir, &a.ics, &client) {
        (Some(root), None, None) => PimFrom::Vdir(root),
        (None, Some(file), None) => PimFrom::File(file),
        (None, None, Some(client)) => PimFrom::Dav(client),
        _ => return Err(usage("one of --vdir, --ics or --caldav is required".to_owned())),
    };
    let (report, errors) = index_calendars(&steward, &a.account, from).map_err(Failure::from)?;
    if a.json {
        json_line(&report);
        for e in &errors {
            json_line(&serde_json::json!({ "error": e }));
        }
    } else {
        out!(
            "{}: {} calendar(s), {} item(s) new, {} changed, {} gone, {} unchanged; {} events",
            report.account,
            report.calendars,
            report.added,
            report.changed,
            report.removed,
            report.unchanged,
            report.events
        );
        for e in &errors {
            eprintln!("{}: {} {}", e.path.display(), e.code, e.message);
        }
    }
    Ok(())
}

pub(super) fn calendar(home: Option<PathBuf>, cmd: CalendarCmd) -> Result<(), Failure> {
    let settings = settings(home.as_ref())?;
    match cmd {
        CalendarCmd::Agenda { window } => {
            let r = read(&window, &settings)?;
            match &r.calendars {
                Some(cals) => {
                    for i in agenda_of(cals, r.zone, r.from, r.to, MAX_INSTANCES)
                        .map_err(Failure::from)?
                    {
                        print_occurrence(&i.calendar, &i.item, window.json);
                    }
                }
                None => {
                    let steward = super::open(home)?;
                    let store = steward.calendar_store().map_err(Failure::from)?;
                    for o in
                        store.agenda(r.zone, r.from, r.to, MAX_INSTANCES).map_err(Failure::from)?
                    {
                        print_occurrence(&o.calendar, &o.item, window.json);
                    }
                }
            }
            print_errors(r.calendars.as_ref(), window.json);
            Ok(())
        }
        CalendarCmd::Free { window, min_minutes, hours, any_time, me } => {
            let hours = match (hours, any_time) {
                (_, true) => WorkingHours::any_time(),
                (Some(h), false) => WorkingHours::parse_span(&h).map_err(Failure::from)?,
                (None, false) => settings.hours,
            };
            let me = if me.is_empty() { settings.me.clone() } else { me };
            let r = read(&window, &settings)?;
            let fb = match &r.calendars {
                Some(cals) => free_busy_of(cals, r.zone, r.from, r.to, min_minutes, &hours, &me)
                    .map_err(Failure::from)?,
                None => {
                    let steward = super::open(home)?;
                    let store = steward.calendar_store().map_err(Failure::from)?;
                    store
                        .free_busy(r.zone, r.from, r.to, min_minutes, &hours, &me)
                        .map_err(Failure::from)?
                }
            };
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
            print_errors(r.calendars.as_ref(), window.json);
            Ok(())
        }
        CalendarCmd::Search { text, from, to, attendee, calendar, limit, tz, json } => {
            let zone = zone_of(tz.as_ref(), &settings)?;
            let at = |t: &Option<String>| t.as_deref().map(|t| instant(t, zone)).transpose();
            let q = EventQuery {
                text: Some(text).filter(|t| !t.trim().is_empty()),
                from: at(&from)?,
                to: at(&to)?,
                calendars: calendar,
                attendee,
                limit: usize::from(limit),
            };
            let steward = super::open(home)?;
            let store = steward.calendar_store().map_err(Failure::from)?;
            let hits = store.search(zone, &q).map_err(Failure::from)?;
            for h in &hits {
                if json {
                    json_line(h);
                } else {
                    print_occurrence(&h.calendar, &h.item, false);
                }
            }
            if !json && hits.is_empty() {
                out!("no event matches");
            }
            Ok(())
        }
    }
}
