//! The background runner's own cost (issue 19 §7): a home with a 1,000-message Maildir source
//! and 10,000 active `time` watches, the runner's five jobs that can run there (mail-reconcile,
//! watch-poll, watch-deliver, confirm-writes, approval-expiry; no embedder, no SMTP).
//!
//! 1. Cycles: `Runner::run_once` over every job, ten times after a first run that mirrors the
//!    mailbox; each job's own time (its report) and the runner's share (the cycle minus its
//!    jobs: availability, recording each run's start and end in `steward.db`).
//! 2. Idle: the runner spawned as `steward serve` spawns it, then the process's CPU time
//!    (utime + stime from /proc/self/stat) over a measured window once the first runs are
//!    over, with no watches and then with the 10,000.
//!
//! `cargo bench -p steward-connectors --bench runner` (`STEWARD_BENCH_WATCHES` sets the count,
//! `STEWARD_BENCH_IDLE_SECS` the idle window, default 60).

use std::{
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::json;
use steward_connectors::{
    home,
    mail::demo::{DemoOptions, generate_maildir},
};
use steward_core::{Steward, runner::JobName, watch::WatchDefinition};

/// utime + stime of this process, in clock ticks (100 per second on Linux).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // state is field 3 of the whole line; utime and stime are fields 14 and 15.
    f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime")
}

fn open_home(dir: &Path, maildir: &Path) -> Arc<Steward> {
    std::fs::create_dir_all(dir).expect("home");
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "[[mail.sources]]\nkind = \"maildir\"\npath = \"{}\"\naccount = \"me\"\n",
            maildir.display()
        ),
    )
    .expect("config");
    Arc::new(home::open(Some(dir.to_path_buf())).expect("open"))
}

fn add_watches(s: &Steward, n: usize) {
    let w = s.watches().expect("watches");
    let now = steward_core::time::now_secs();
    for i in 0..n {
        // Instants a year and more ahead: active, unchanged, polled every cycle.
        let at = steward_core::time::CivilTime::from_unix(now + 31_536_000 + i as i64 * 60);
        let def: WatchDefinition = serde_json::from_value(json!({
            "source": "time", "resource_ref": at.rfc3339(), "instruction": "remind me",
            "rules": [{"id": "at", "event": "time.reached"}]
        }))
        .expect("definition");
        w.create(&def, now).expect("create");
    }
}

fn idle_cpu(s: &Arc<Steward>, secs: u64) -> (f64, i64) {
    let runner = Arc::new(home::runner(s.clone()).expect("runner"));
    let handle = runner.clone().spawn().expect("spawn");
    // The first runs happen at once; wait until each available job has finished one.
    let t = Instant::now();
    loop {
        let status = runner.status().expect("status");
        let done = status
            .iter()
            .filter(|j| j.unavailable.is_none())
            .all(|j| j.record.last_finished_at.is_some() && !j.record.running);
        if done || t.elapsed() > Duration::from_secs(120) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let runs_before: i64 = runner.status().expect("status").iter().map(|j| j.record.runs).sum();
    let before = cpu_ticks();
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let ticks = cpu_ticks() - before;
    let wall = t.elapsed().as_secs_f64();
    let runs_after: i64 = runner.status().expect("status").iter().map(|j| j.record.runs).sum();
    handle.stop();
    (ticks as f64 / 100.0 / wall * 100.0, runs_after - runs_before)
}

fn main() {
    let n: usize =
        std::env::var("STEWARD_BENCH_WATCHES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let idle_secs: u64 =
        std::env::var("STEWARD_BENCH_IDLE_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    let dir = tempfile::tempdir().expect("tempdir");
    let maildir = dir.path().join("Maildir");
    let mut opts = DemoOptions::new(1_000);
    opts.malformed = false;
    generate_maildir(&maildir, &opts).expect("demo");

    println!("| measure | value | target |");
    println!("|---|---|---|");
    let s = open_home(&dir.path().join("home"), &maildir);
    let (idle_empty, runs) = idle_cpu(&s, idle_secs);
    println!(
        "| idle runner, 1,000 messages, no watches: CPU over {idle_secs} s ({runs} runs in it) | {idle_empty:.2}% | ≤ 1% |"
    );

    let t = Instant::now();
    add_watches(&s, n);
    println!("| create {n} time watches | {:.1} s | |", t.elapsed().as_secs_f64());

    let runner = home::runner(s.clone()).expect("runner");
    let first = runner.run_once(None).expect("first cycle");
    let jobs: Vec<&str> = first.iter().map(|r| r.job.as_str()).collect();
    assert_eq!(jobs.len(), 5, "five jobs can run in this home: {jobs:?}");
    let poll = first.iter().find(|r| r.job == JobName::WatchPoll).expect("watch-poll ran");
    assert_eq!(poll.detail["checked"].as_u64(), Some(n as u64), "every watch polled: {poll:?}");

    let mut cycles = Vec::new();
    let mut own = Vec::new();
    let mut per_job: Vec<(JobName, Vec<f64>)> = first.iter().map(|r| (r.job, Vec::new())).collect();
    for _ in 0..10 {
        let t = Instant::now();
        let reports = runner.run_once(None).expect("cycle");
        let total = t.elapsed().as_secs_f64() * 1e3;
        let jobs_ms: f64 = reports.iter().map(|r| r.seconds * 1e3).sum();
        cycles.push(total);
        own.push(total - jobs_ms);
        for r in &reports {
            if let Some((_, v)) = per_job.iter_mut().find(|(j, _)| *j == r.job) {
                v.push(r.seconds * 1e3);
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (job, mut v) in per_job {
        println!(
            "| `{}` in a cycle, {n} watches (p50 of 10) | {:.1} ms | |",
            job.as_str(),
            median(&mut v)
        );
    }
    println!("| a whole cycle of the five jobs (p50 of 10) | {:.1} ms | |", median(&mut cycles));
    println!(
        "| the runner's own share of a cycle (p50 of 10) | **{:.1} ms** | ≤ 100 ms |",
        median(&mut own)
    );

    let (idle_full, runs) = idle_cpu(&s, idle_secs);
    println!(
        "| idle runner, {n} active watches: CPU over {idle_secs} s ({runs} runs in it) | {idle_full:.2}% | ≤ 1% |"
    );
}
