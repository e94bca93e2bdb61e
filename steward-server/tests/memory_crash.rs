//! Mail → memory promotion under crashes, proved: the `steward` binary built with the
//! `failpoints` feature aborts (what `kill -9` leaves behind) after a thread's proposals are
//! written and before its outcome is recorded, at each thread in turn; a plain re-run then
//! finishes the pass. Afterwards: every thread has its outcome, every fact is in the inbox
//! exactly once, and the model was asked again only for the thread the crash interrupted.

use std::{path::Path, process::Output};

use serde_json::json;
use steward_connectors::testing::models::{Reply, ScriptedServer, chat_answer};

const THREADS: usize = 4;

fn run(home: &Path, base_url: &str, failpoint: Option<&str>) -> Output {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_steward"));
    c.arg("--home").arg(home).args(["memory", "promote", "--json"]);
    c.env("STEWARD_LLM_BASE_URL", base_url).env("STEWARD_LLM_MODEL", "m");
    match failpoint {
        Some(fp) => c.env("FAILPOINTS", fp),
        None => c.env_remove("FAILPOINTS"),
    };
    c.output().expect("run steward")
}

fn aborted(o: &Output) -> bool {
    use std::os::unix::process::ExitStatusExt as _;
    o.status.signal() == Some(6)
}

/// The fact the model finds in a thread: its code word, quoted.
fn answer(req: &steward_connectors::testing::models::Recorded) -> String {
    let user = req.body["messages"][1]["content"].as_str().unwrap_or("");
    let code =
        user.split("the code word is ").nth(1).and_then(|r| r.split('.').next()).unwrap_or("");
    json!({"durable": true, "facts": [{
        "text": format!("Ada's code word for the project is {code}."), "kind": "fact",
        "subject": null, "message": 1, "quote": format!("the code word is {code}"),
        "valid_from": null, "valid_to": null, "confidence": 0.8}]})
    .to_string()
}

fn inbox_bodies(home: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(home.join("memory/inbox"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .filter_map(|t| t.lines().last().map(str::to_owned))
        .collect();
    out.sort();
    out
}

#[test]
fn a_crash_between_proposals_and_outcome_loses_nothing_and_doubles_nothing() {
    for crash_at in 0..THREADS {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let md = dir.path().join("Maildir");
        for k in 0..THREADS {
            let date = (chrono::Utc::now()
                - chrono::Duration::hours(i64::try_from(k).unwrap() + 1))
            .to_rfc2822();
            let mail = format!(
                "From: Carla <carla@example.org>\nTo: Ada <ada@example.org>\nSubject: plan {k}\n\
                 Message-ID: <plan{k}@example.org>\nDate: {date}\n\nHi, the code word is kiwi{k}.\n"
            );
            std::fs::create_dir_all(md.join("cur")).unwrap();
            std::fs::create_dir_all(md.join("new")).unwrap();
            std::fs::create_dir_all(md.join("tmp")).unwrap();
            std::fs::write(md.join(format!("cur/plan{k}:2,S")), mail).unwrap();
        }
        let index = std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
            .arg("--home")
            .arg(&home)
            .args(["index", "mail", "--maildir"])
            .arg(&md)
            .output()
            .unwrap();
        assert!(index.status.success(), "{}", String::from_utf8_lossy(&index.stderr));
        let server = ScriptedServer::start(|req, _| {
            Reply::Json(200, chat_answer("m", &answer(req), &[], (50, 20, 0)))
        });

        let fp = format!("memory::promote::before_outcome={crash_at}*off->return");
        let crashed = run(&home, &server.base_url, Some(&fp));
        assert!(aborted(&crashed), "crash at thread {crash_at}: {crashed:?}");
        assert_eq!(server.requests().len(), crash_at + 1);
        let done = run(&home, &server.base_url, None);
        assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
        let report: serde_json::Value = serde_json::from_slice(&done.stdout).unwrap();
        // The interrupted thread is asked again, the ones before it are not.
        assert_eq!(report["calls"], THREADS - crash_at, "{report}");
        assert_eq!(server.requests().len(), THREADS + 1);
        assert_eq!(
            report["known"], 1,
            "the interrupted thread's fact was already waiting: {report}"
        );
        let want: Vec<String> =
            (0..THREADS).map(|k| format!("Ada's code word for the project is kiwi{k}.")).collect();
        assert_eq!(inbox_bodies(&home), want, "crash at thread {crash_at}");
        let db = rusqlite::Connection::open(home.join("memory-promotion.db")).unwrap();
        let proposed: i64 = db
            .query_row("SELECT count(*) FROM threads WHERE outcome = 'proposed'", [], |r| r.get(0))
            .unwrap();
        let recorded: i64 = db.query_row("SELECT count(*) FROM threads", [], |r| r.get(0)).unwrap();
        // The interrupted thread's fact merged into the waiting proposal: nothing new, skipped.
        assert_eq!(
            (recorded, proposed),
            (i64::try_from(THREADS).unwrap(), i64::try_from(THREADS).unwrap() - 1)
        );
        // A third run asks nothing.
        let idle = run(&home, &server.base_url, None);
        let idle: serde_json::Value = serde_json::from_slice(&idle.stdout).unwrap();
        assert_eq!(idle["calls"], 0);
    }
}

/// An accept that replaces a note, killed after the new note is written and before the old one
/// is marked: the person's retry finishes it (the old note replaced, the proposal gone, the
/// decision audited) instead of answering that the proposal no longer exists.
#[test]
fn an_accept_interrupted_before_the_replacement_is_finished_by_the_retry() {
    use steward_core::{Steward, memory::NewMemory};
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let fact = |text: &str, supersedes: &[&str]| -> NewMemory {
        serde_json::from_value(json!({
            "text": text, "kind": "fact", "subject": "place:office", "supersedes": supersedes,
        }))
        .unwrap()
    };
    let propose = |s: &Steward, f: &NewMemory| match s.memory_propose("agent:assistant", f).unwrap()
    {
        steward_core::memory::ProposeOutcome::Proposed { id } => id,
        other => panic!("{other:?}"),
    };
    let (old, new) = {
        let s = Steward::builder().home(&home).open().unwrap();
        let ada = s.human("ada").unwrap();
        let first = propose(&s, &fact("The office is on the third floor.", &[]));
        let old = s.memory_accept(&ada, &first, None).unwrap().meta.id;
        let new = propose(&s, &fact("The office moved to the fifth floor.", &[&old]));
        (old, new)
    };
    let accept = |failpoint: Option<&str>| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_steward"));
        c.arg("--home").arg(&home).args(["memory", "accept", &new, "--as", "ada", "--json"]);
        match failpoint {
            Some(fp) => c.env("FAILPOINTS", fp),
            None => c.env_remove("FAILPOINTS"),
        };
        c.output().unwrap()
    };
    let crashed = accept(Some("memory::accept::before_supersede=return"));
    assert!(aborted(&crashed), "{crashed:?}");
    {
        let s = Steward::builder().home(&home).open().unwrap();
        assert!(s.memory_note(&new).is_ok(), "the new note was written before the crash");
        assert_eq!(s.memory_note(&old).unwrap().note.meta.superseded_by, None);
    }
    let done = accept(None);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let note: serde_json::Value = serde_json::from_slice(&done.stdout).unwrap();
    assert_eq!(note["meta"]["id"], new.as_str(), "{note}");
    let s = Steward::builder().home(&home).open().unwrap();
    let replaced = s.memory_note(&old).unwrap().note.meta;
    assert_eq!(replaced.superseded_by.as_deref(), Some(new.as_str()));
    assert!(s.memory_inbox().unwrap().is_empty());
    assert_eq!(std::fs::read_dir(home.join("memory/notes")).unwrap().count(), 2);
}
