//! Warm, in-process calendar and contacts questions over the benchmark's 10,000-event (30%
//! recurring) calendar vdir and 5,000-card address book (`scripts/gen-pim-vdir.py`, the same
//! data `scripts/bench pim` times whole processes on): p50 and p95 of `agenda` (a day, a week,
//! a month), `search_events`, `free_busy` of a week and `resolve_recipient`, each asked
//! `RUNS` times after two warm-up calls, printed apart: a store answers its first question
//! from SQLite alone (what a one-shot command pays) and parses and expands what it keeps in
//! memory on the second.
//!
//! `STEWARD_BENCH_DIR` (default `target/bench-data`) keeps the generated vdirs between runs.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use chrono::{Datelike as _, TimeZone as _};
use steward_core::{
    Steward,
    calendar::{CalendarSettings, WorkingHours, store::EventQuery},
};

const RUNS: usize = 200;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn time<T>(label: &str, mut f: impl FnMut() -> T, describe: impl Fn(&T) -> String) {
    let cold = Instant::now();
    let first = f();
    let cold = cold.elapsed();
    let second = Instant::now();
    std::hint::black_box(f());
    let second = second.elapsed();
    let mut t = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let start = Instant::now();
        std::hint::black_box(f());
        t.push(start.elapsed());
    }
    t.sort();
    println!(
        "{label:<36} p50 {:>6.3} ms  p95 {:>6.3} ms  1st {:>6.1} ms  2nd {:>6.1} ms  ({})",
        percentile(&t, 0.5).as_secs_f64() * 1e3,
        percentile(&t, 0.95).as_secs_f64() * 1e3,
        cold.as_secs_f64() * 1e3,
        second.as_secs_f64() * 1e3,
        describe(&first)
    );
}

/// The process's peak resident memory, MiB (Linux).
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() {
    let base = std::env::var_os("STEWARD_BENCH_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-data"),
        PathBuf::from,
    );
    let dir = base.join("pim");
    if !dir.join("cal").is_dir() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/gen-pim-vdir.py");
        let ok = std::process::Command::new("python3")
            .arg(script)
            .arg(&dir)
            .args(["10000", "5000"])
            .status()
            .expect("python3");
        assert!(ok.success(), "gen-pim-vdir.py failed");
    }
    let home = dir.join("bench-home-inprocess");
    let _ = std::fs::remove_dir_all(&home);
    let rome = chrono_tz::Europe::Rome;
    let settings = CalendarSettings {
        zone: rome,
        me: vec!["me@example.org".into()],
        hours: WorkingHours::default(),
    };
    let s = Steward::builder().home(&home).calendar_settings(settings).open().expect("open");
    let start = Instant::now();
    let (report, _) = steward_connectors::pim::index_calendars(
        &s,
        "bench",
        steward_connectors::pim::PimFrom::Vdir(&dir.join("cal")),
    )
    .expect("index calendar");
    println!("indexed {} events in {:.0} ms", report.events, start.elapsed().as_secs_f64() * 1e3);
    let people = steward_connectors::pim::index_books(
        &s,
        "bench",
        steward_connectors::pim::PimFrom::Vdir(&dir.join("contacts")),
        steward_connectors::contacts::phone::region("IT"),
    )
    .expect("index contacts")
    .report;
    println!("indexed {} cards into {} people", people.cards, people.contacts);

    let today = chrono::Utc::now().with_timezone(&rome).date_naive();
    let monday = today - chrono::Duration::days(i64::from(today.weekday().num_days_from_monday()));
    let at = |d: chrono::NaiveDate| {
        rome.from_local_datetime(&d.and_hms_opt(0, 0, 0).expect("midnight"))
            .earliest()
            .expect("a local midnight")
            .with_timezone(&chrono::Utc)
    };
    let day = (at(monday), at(monday + chrono::Duration::days(1)));
    let week = (at(monday), at(monday + chrono::Duration::days(7)));
    let month = (at(monday), at(monday + chrono::Duration::days(30)));
    let count = |r: &Result<Vec<_>, _>| match r {
        Ok(v) => format!("{} occurrences", Vec::len(v)),
        Err(e) => format!("refused: {e}"),
    };
    time("agenda, one day", || s.agenda(day.0, day.1), count);
    time("agenda, one week", || s.agenda(week.0, week.1), count);
    time("agenda, 30 days", || s.agenda(month.0, month.1), count);
    let q = EventQuery {
        text: Some("budget cliente".into()),
        from: Some(month.0),
        to: Some(month.1),
        limit: 20,
        ..EventQuery::default()
    };
    time(
        "search_events \"budget cliente\", 30 d",
        || s.search_events(&q),
        |r| match r {
            Ok(v) => format!("{} events", v.len()),
            Err(e) => format!("refused: {e}"),
        },
    );
    time(
        "free_busy, one week",
        || s.free_busy(week.0, week.1, 30),
        |r| match r {
            Ok(f) => format!("{} busy, {} free", f.busy.len(), f.free.len()),
            Err(e) => format!("refused: {e}"),
        },
    );
    time(
        "resolve_recipient \"Anna Rossi\"",
        || s.resolve_recipient("Anna Rossi"),
        |r| match r {
            Ok(r) => format!("{:?}, {} candidates", r.status, r.candidates.len()),
            Err(e) => format!("refused: {e}"),
        },
    );
    time(
        "resolve_recipient \"Giulia\"",
        || s.resolve_recipient("Giulia"),
        |r| match r {
            Ok(r) => format!("{:?}, {} candidates", r.status, r.candidates.len()),
            Err(e) => format!("refused: {e}"),
        },
    );
    println!("peak resident memory: {:.0} MiB", peak_rss_mib());
}
