//! Mirror benchmark: generates a realistic Maildir (50,000 files, ≈ 250 MB, English and Italian,
//! threads, attachments, HTML mail), mirrors it into a fresh home, reconciles it unchanged, and
//! runs `notmuch new` on the same Maildir when notmuch is installed. Prints a Markdown table.
//!
//! `cargo bench -p steward-connectors --bench mirror` (or `scripts/bench`, which installs
//! notmuch). Environment: `STEWARD_BENCH_MESSAGES` (default 50000), `STEWARD_BENCH_DIR`
//! (default `target/bench-data`). The process measures only the ingest: the Maildir is written
//! by a child process, so peak RSS (VmHWM) is the mirror's own.

mod common;

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use common::dir_size;
use steward_connectors::mail::{
    MaildirSource,
    demo::{DemoOptions, generate_maildir},
};
use steward_core::{Limits, Steward, mirror::SyncOptions};

const RUNS: usize = 3;

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn count_files(p: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            if !e.file_name().to_string_lossy().starts_with(".notmuch") {
                n += count_files(&path);
            }
        } else {
            n += 1;
        }
    }
    n
}

fn main() {
    // `cargo bench` passes `--bench`; a child invocation generates the Maildir.
    let args: Vec<String> = std::env::args().collect();
    if let Some(pos) = args.iter().position(|a| a == "--generate") {
        let dir = PathBuf::from(&args[pos + 1]);
        let messages: usize = args[pos + 2].parse().expect("message count");
        let mut opts = DemoOptions::new(messages);
        opts.gmail_copies = false; // one file per message: N messages = N files
        let report = generate_maildir(&dir, &opts).expect("generate");
        println!("{} files, {} bytes", report.files, report.bytes);
        return;
    }
    let messages: usize =
        std::env::var("STEWARD_BENCH_MESSAGES").ok().and_then(|v| v.parse().ok()).unwrap_or(50_000);
    let base = std::env::var_os("STEWARD_BENCH_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench-data"),
        PathBuf::from,
    );
    // The generator's version is in the name: a changed generator writes a new Maildir.
    let maildir = base.join(format!("maildir-v2-{messages}"));
    if !maildir.join(".complete").exists() {
        let _ = std::fs::remove_dir_all(&maildir);
        let t = Instant::now();
        let status = Command::new(std::env::current_exe().expect("exe"))
            .arg("--generate")
            .arg(&maildir)
            .arg(messages.to_string())
            .status()
            .expect("spawn generator");
        assert!(status.success());
        std::fs::write(maildir.join(".complete"), b"").expect("marker");
        eprintln!("generated {} in {:.1} s", maildir.display(), t.elapsed().as_secs_f64());
    }
    let files = count_files(&maildir) - 1; // minus the marker
    let bytes = dir_size(&maildir);

    // Three fresh ingests: this machine is a shared VM and single runs vary by ±20%; the
    // median is reported, with the best and worst.
    let source = MaildirSource::new(&maildir);
    let opts = SyncOptions { account: Some("bench".into()), cancel: None };
    let home = base.join("home");
    let mut runs = Vec::new();
    let mut first = None;
    let mut reconcile = 0.0;
    for run in 0..RUNS {
        let _ = std::fs::remove_dir_all(&home);
        let steward =
            Steward::builder().home(&home).limits(Limits::default()).open().expect("open");
        let t = Instant::now();
        let summary = steward.mirror().sync(&source, &opts, &mut |_| {}).expect("backfill");
        runs.push(t.elapsed().as_secs_f64());
        if run == RUNS - 1 {
            let t = Instant::now();
            let again = steward.mirror().sync(&source, &opts, &mut |_| {}).expect("reconcile");
            reconcile = t.elapsed().as_secs_f64();
            assert_eq!(again.added + again.updated, 0);
        }
        first = Some(summary);
    }
    let first = first.expect("at least one run");
    let rss = vm_hwm_kib().unwrap_or(0);
    runs.sort_by(f64::total_cmp);
    let ingest = runs[runs.len() / 2];
    let mirror_bytes = dir_size(&home.join("mirror.db"))
        + dir_size(&home.join("mirror.db-wal"))
        + dir_size(&home.join("blobs"));

    let notmuch = run_notmuch(&maildir, &base);

    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!("| Maildir | {files} files, {:.0} MB |", bytes as f64 / 1e6);
    let rate = |secs: f64| f64::from(u32::try_from(files).unwrap_or(u32::MAX)) / secs;
    println!(
        "| mirror-only ingest, median of {RUNS} | {:.2} s, **{:.0} messages/s** ({} added, {} errors) |",
        ingest,
        rate(ingest),
        first.added,
        first.error_count
    );
    println!(
        "| best / worst run | {:.0} / {:.0} messages/s |",
        rate(runs[0]),
        rate(runs[runs.len() - 1])
    );
    println!("| peak RSS (VmHWM) | {:.0} MB |", rss as f64 / 1024.0);
    println!("| mirror size (mirror.db + blobs) | {:.0} MB |", mirror_bytes as f64 / 1e6);
    println!("| reconcile, unchanged | {:.2} s |", reconcile);
    match notmuch {
        Some((secs, n)) => println!(
            "| `notmuch new` (same Maildir) | {:.1} s, {:.0} messages/s ({n} messages) |",
            secs,
            f64::from(u32::try_from(files).unwrap_or(u32::MAX)) / secs
        ),
        None => println!("| `notmuch new` | not installed (scripts/bench installs it) |"),
    }
}

/// Times `notmuch new` on a fresh database for the Maildir; returns (seconds, messages indexed).
fn run_notmuch(maildir: &Path, base: &Path) -> Option<(f64, String)> {
    if Command::new("notmuch").arg("--version").output().is_err() {
        return None;
    }
    let _ = std::fs::remove_dir_all(maildir.join(".notmuch"));
    let cfg = base.join("notmuch-config");
    std::fs::write(
        &cfg,
        format!("[database]\npath={}\n[user]\nname=Bench\nprimary_email=bench@example.org\n[new]\ntags=unread;inbox;\n[maildir]\nsynchronize_flags=true\n", maildir.display()),
    )
    .ok()?;
    let t = Instant::now();
    let out = Command::new("notmuch")
        .arg(format!("--config={}", cfg.display()))
        .arg("new")
        .output()
        .ok()?;
    let secs = t.elapsed().as_secs_f64();
    if !out.status.success() {
        eprintln!("notmuch new failed: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    let count = Command::new("notmuch")
        .arg(format!("--config={}", cfg.display()))
        .args(["count", "*"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let _ = std::fs::remove_dir_all(maildir.join(".notmuch"));
    Some((secs, count))
}
