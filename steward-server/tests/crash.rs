//! Crash safety, proved: the `steward` binary built with the `failpoints` feature aborts
//! (`std::process::abort`, no unwinding, no destructors — what `kill -9` leaves behind) at each
//! of more than 200 crash points of a backfill and of a reconcile; a plain re-run must then leave
//! exactly the mirror a clean run leaves: the same messages, paths, flags and thread partition,
//! no duplicate, nothing lost, `PRAGMA integrity_check` ok. A second loop sends real SIGKILLs at
//! staggered moments.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use steward_connectors::mail::demo::{DemoOptions, generate_maildir};

const BATCH: &str = "16";

fn steward() -> Command {
    Command::new(env!("CARGO_BIN_EXE_steward"))
}

fn index(home: &Path, md: &Path, failpoint: Option<&str>) -> std::process::ExitStatus {
    index_with(home, md, failpoint, &[])
}

fn index_with(
    home: &Path,
    md: &Path,
    failpoint: Option<&str>,
    extra: &[&str],
) -> std::process::ExitStatus {
    let mut cmd = steward();
    cmd.args(["--home"]).arg(home).args(["index", "mail", "--maildir"]).arg(md);
    cmd.args(["--account", "demo", "--json", "--ingest-batch", BATCH]);
    cmd.args(extra);
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    match failpoint {
        Some(fp) => cmd.env("FAILPOINTS", fp),
        None => cmd.env_remove("FAILPOINTS"),
    };
    cmd.status().expect("run steward")
}

/// What must be identical after a crash and a re-run.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    messages: BTreeSet<(String, i64, String, bool)>,
    paths: BTreeSet<(String, String)>,
    threads: BTreeSet<Vec<String>>,
    thread_counts: BTreeSet<(Vec<String>, i64)>,
    errors: BTreeSet<String>,
    attachments: BTreeSet<(String, Option<String>)>,
}

fn snapshot(home: &Path) -> Snapshot {
    let c = rusqlite::Connection::open(home.join("mirror.db")).unwrap();
    let ok: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
    let rows = |sql: &str| -> Vec<Vec<rusqlite::types::Value>> {
        let mut st = c.prepare(sql).unwrap();
        let n = st.column_count();
        st.query_map([], |r| (0..n).map(|i| r.get(i)).collect())
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let text = |v: &rusqlite::types::Value| match v {
        rusqlite::types::Value::Text(t) => t.clone(),
        rusqlite::types::Value::Integer(i) => i.to_string(),
        rusqlite::types::Value::Null => String::new(),
        other => format!("{other:?}"),
    };
    let int = |v: &rusqlite::types::Value| match v {
        rusqlite::types::Value::Integer(i) => *i,
        _ => -1,
    };
    let messages = rows("SELECT m.identity, m.flags, b.name, m.deleted_at IS NOT NULL FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id")
        .iter()
        .map(|r| (text(&r[0]), int(&r[1]), text(&r[2]), int(&r[3]) == 1))
        .collect();
    let paths = rows("SELECT f.path, m.identity FROM message_paths p JOIN source_files f ON f.id = p.file_id JOIN messages m ON m.id = p.message_id")
        .iter()
        .map(|r| (text(&r[0]), text(&r[1])))
        .collect();
    let mut threads = BTreeSet::new();
    let mut thread_counts = BTreeSet::new();
    for t in rows("SELECT id, message_count FROM threads") {
        let members: Vec<String> = rows(&format!(
            "SELECT identity FROM messages WHERE thread_id = {} ORDER BY identity",
            int(&t[0])
        ))
        .iter()
        .map(|r| text(&r[0]))
        .collect();
        assert!(!members.is_empty(), "empty thread left behind");
        thread_counts.insert((members.clone(), int(&t[1])));
        threads.insert(members);
    }
    let errors = rows("SELECT path FROM source_files WHERE error_code IS NOT NULL")
        .iter()
        .map(|r| text(&r[0]))
        .collect();
    let attachments = rows("SELECT m.identity || '#' || a.position, a.sha256 FROM attachments a JOIN messages m ON m.id = a.message_id")
        .iter()
        .map(|r| (text(&r[0]), match &r[1] { rusqlite::types::Value::Text(t) => Some(t.clone()), _ => None }))
        .collect();
    Snapshot { messages, paths, threads, thread_counts, errors, attachments }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Changes a reconcile must apply: flag renames, a move, deletions, new mail.
fn mutate(md: &Path) {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(md.join("cur")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for (i, f) in files.iter().enumerate().filter(|(_, f)| !f.to_string_lossy().contains("broken"))
    {
        match i % 9 {
            0 => std::fs::remove_file(f).unwrap(),
            1 => {
                let name = f.file_name().unwrap().to_string_lossy().replace(":2,S", ":2,FS");
                std::fs::rename(f, f.with_file_name(name)).unwrap();
            }
            2 => std::fs::rename(f, md.join(".Archive/cur").join(f.file_name().unwrap())).unwrap(),
            _ => {}
        }
    }
    let extra = md.parent().unwrap().join("extra");
    generate_maildir(
        &extra,
        &DemoOptions {
            messages: 25,
            seed: 99,
            malformed: false,
            newest: 1_770_000_000,
            gmail_copies: true,
            story: None,
        },
    )
    .unwrap();
    for e in std::fs::read_dir(extra.join("cur")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(
            e.path(),
            md.join("new").join(format!("x{}", e.file_name().to_string_lossy().replace(":2,", ""))),
        )
        .unwrap();
    }
}

struct Scenario {
    maildir: PathBuf,
    /// Extra flags for the crashing run (the re-run is plain).
    flags: Vec<&'static str>,
    /// A home to start each run from (empty for a backfill).
    start: Option<PathBuf>,
    reference: Snapshot,
}

fn run_point(sc: &Scenario, work: &Path, fp: &str) -> bool {
    let home = work.join("home");
    if home.exists() {
        std::fs::remove_dir_all(&home).unwrap();
    }
    if let Some(start) = &sc.start {
        copy_dir(start, &home);
    }
    let crashed = !index_with(&home, &sc.maildir, Some(fp), &sc.flags).success();
    assert!(index(&home, &sc.maildir, None).success(), "re-run after {fp} failed");
    let got = snapshot(&home);
    let c = rusqlite::Connection::open(home.join("mirror.db")).unwrap();
    for index in
        ["message_addresses_address", "messages_date", "attachments_sha", "message_paths_message"]
    {
        let n: i64 = c
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?1",
                [index],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 1, "after {fp}: index {index} missing");
    }
    assert!(
        got == sc.reference,
        "after crash point {fp}: mirror differs from a clean run\n{}",
        diff(&got, &sc.reference)
    );
    crashed
}

fn diff(a: &Snapshot, b: &Snapshot) -> String {
    format!(
        "messages +{:?} -{:?}\npaths +{:?} -{:?}\nthreads equal: {}, counts equal: {}, errors equal: {}, attachments equal: {}",
        a.messages.difference(&b.messages).take(3).collect::<Vec<_>>(),
        b.messages.difference(&a.messages).take(3).collect::<Vec<_>>(),
        a.paths.difference(&b.paths).take(3).collect::<Vec<_>>(),
        b.paths.difference(&a.paths).take(3).collect::<Vec<_>>(),
        a.threads == b.threads,
        a.thread_counts == b.thread_counts,
        a.errors == b.errors,
        a.attachments == b.attachments
    )
}

#[test]
fn every_crash_point_converges_to_the_clean_result() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    generate_maildir(&md, &DemoOptions::new(120)).unwrap();

    // Backfill reference.
    let ref_home = dir.path().join("ref");
    assert!(index(&ref_home, &md, None).success());
    // The backfill crashes run as bulk loads (indexes dropped and rebuilt), the re-run as a
    // normal one: the data must not depend on it, and no index may stay missing.
    let backfill = Scenario {
        maildir: md.clone(),
        flags: vec!["--bulk-load-min-files", "50"],
        start: None,
        reference: snapshot(&ref_home),
    };
    assert!(backfill.reference.messages.len() >= 120);
    assert!(backfill.reference.paths.len() >= 150, "{} paths", backfill.reference.paths.len());

    let work = dir.path().join("work");
    let mut points = 0;
    let mut crashes = 0;
    // One crash after each applied file (inside the open transaction), and around each commit.
    let mut specs: Vec<String> =
        (0..175).map(|n| format!("mirror::after_file={n}*off->return")).collect();
    specs.extend((0..14).map(|n| format!("mirror::before_commit={n}*off->return")));
    specs.extend((0..14).map(|n| format!("mirror::after_commit={n}*off->return")));
    specs.push("mirror::before_finish_commit=return".to_owned());
    for fp in &specs {
        points += 1;
        crashes += usize::from(run_point(&backfill, &work, fp));
    }

    // Reconcile: start from the finished backfill, change the store, crash while converging.
    let base_home = dir.path().join("base");
    copy_dir(&ref_home, &base_home);
    mutate(&md);
    let rec_ref = dir.path().join("ref-reconcile");
    copy_dir(&base_home, &rec_ref);
    assert!(index(&rec_ref, &md, None).success());
    let reconcile = Scenario {
        maildir: md,
        flags: Vec::new(),
        start: Some(base_home),
        reference: snapshot(&rec_ref),
    };
    assert_ne!(
        reconcile.reference.messages, backfill.reference.messages,
        "the mutation must change something"
    );
    let mut specs: Vec<String> =
        (0..40).step_by(2).map(|n| format!("mirror::after_file={n}*off->return")).collect();
    specs.extend((0..4).map(|n| format!("mirror::after_commit={n}*off->return")));
    specs.push("mirror::after_vanished_batch=return".to_owned());
    specs.push("mirror::before_finish_commit=return".to_owned());
    for fp in &specs {
        points += 1;
        crashes += usize::from(run_point(&reconcile, &work, fp));
    }
    eprintln!("crash points: {points}, of which aborted the process: {crashes}");
    assert!(points >= 200, "{points} crash points");
    assert!(crashes >= 200, "only {crashes} crash points were reached");
}

#[test]
fn sigkill_at_staggered_moments_converges() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    generate_maildir(&md, &DemoOptions::new(1500)).unwrap();
    let ref_home = dir.path().join("ref");
    assert!(index(&ref_home, &md, None).success());
    let reference = snapshot(&ref_home);
    for i in 0..12u64 {
        let home = dir.path().join(format!("k{i}"));
        let mut child = steward()
            .arg("--home")
            .arg(&home)
            .args(["index", "mail", "--maildir"])
            .arg(&md)
            .args(["--account", "demo", "--ingest-batch", BATCH])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(20 + i * 37));
        let _ = child.kill(); // SIGKILL; it may already have finished, which is fine too
        let _ = child.wait();
        assert!(index(&home, &md, None).success());
        assert!(snapshot(&home) == reference, "kill #{i}: mirror differs from a clean run");
    }
}
