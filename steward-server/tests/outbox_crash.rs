//! The outbox under crashes, proved: the `steward` binary built with the `failpoints` feature
//! aborts (`std::process::abort`: what `kill -9` leaves behind) after journaling, after the
//! SMTP submission and before recording it, after recording, after a scheduled claim and in the
//! middle of a confirmation pass — more than 1,000 times against a real SMTP server on loopback
//! (aiosmtpd, counting deliveries by Message-ID and filing each delivered message as the Sent
//! copy); real SIGKILLs at random moments are mixed in. Afterwards: 0 duplicate deliveries, 0
//! deliveries without a journal entry, 0 operations attempted twice, and every operation ends
//! `confirmed` (it was delivered) or `needs_review` (it was not).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::{Command, Output},
    time::Duration,
};

use steward_connectors::testing::{SinkOptions, SmtpSink};
use steward_core::{Steward, journal::OpState, time::CivilTime};

/// Crashes to inject (at least; the SIGKILL rounds come on top).
fn crash_target() -> usize {
    std::env::var("STEWARD_OUTBOX_CRASHES").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000)
}

struct Env<'a> {
    home: &'a Path,
    port: u16,
}

impl Env<'_> {
    fn cmd(&self, args: &[&str], failpoint: Option<&str>) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_steward"));
        c.arg("--home").arg(self.home).args(args);
        c.env("STEWARD_SMTP_HOST", "127.0.0.1")
            .env("STEWARD_SMTP_PORT", self.port.to_string())
            .env("STEWARD_SMTP_SECURITY", "plain")
            .env("STEWARD_MAIL_FROM", "ada@example.org")
            .env("STEWARD_MAIL_ACCOUNT", "me")
            .env("USER", "ada");
        match failpoint {
            Some(fp) => c.env("FAILPOINTS", format!("{fp}=return")),
            None => c.env_remove("FAILPOINTS"),
        };
        c
    }

    fn run(&self, args: &[&str], failpoint: Option<&str>) -> Output {
        self.cmd(args, failpoint).output().expect("run steward")
    }

    fn send(&self, subject: &str, body: &Path, at: Option<&str>, fp: Option<&str>) -> Output {
        let mut args =
            vec!["mail", "send", "--yes", "--to", "bob@example.org", "--subject", subject];
        args.extend(["--body-file", body.to_str().unwrap()]);
        if let Some(at) = at {
            args.extend(["--at", at]);
        }
        self.run(&args, fp)
    }
}

fn aborted(o: &Output) -> bool {
    use std::os::unix::process::ExitStatusExt;
    o.status.signal() == Some(6)
}

fn rfc3339(ts: i64) -> String {
    CivilTime::from_unix(ts).rfc3339()
}

#[test]
fn a_thousand_crashes_never_send_twice_or_lose_a_send() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let md = dir.path().join("Mail");
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(md.join(sub)).unwrap();
    }
    let sink = SmtpSink::start(
        dir.path(),
        &SinkOptions { sent_maildir: Some(md.join(".Sent")), ..SinkOptions::default() },
    );
    let env = Env { home: &home, port: sink.port };
    let body = dir.path().join("body.txt");
    std::fs::write(&body, "Running late, start without me.\n").unwrap();
    let index = || {
        let o =
            env.run(&["index", "mail", "--maildir", md.to_str().unwrap(), "--account", "me"], None);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };

    let target = crash_target();
    let mut crashes = 0usize;
    let mut kills = 0usize;
    let mut by_point: BTreeMap<&str, usize> = BTreeMap::new();
    let mut round = 0usize;
    while crashes < target {
        round += 1;
        let subject = format!("m{round}");
        let point = match round % 10 {
            0..=2 => "outbox::after_journal",
            3..=5 => "outbox::after_backend",
            6 | 7 => "outbox::after_record",
            8 => "outbox::during_confirm",
            _ => "sigkill",
        };
        let crashed = match point {
            "outbox::during_confirm" => {
                index();
                aborted(&env.run(&["ops", "confirm"], Some(point)))
            }
            "sigkill" => {
                let mut child = env
                    .cmd(
                        &[
                            "mail",
                            "send",
                            "--yes",
                            "--to",
                            "bob@example.org",
                            "--subject",
                            &subject,
                            "--body-file",
                            body.to_str().unwrap(),
                        ],
                        None,
                    )
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap();
                std::thread::sleep(Duration::from_millis((round as u64 * 7) % 25));
                let _ = child.kill();
                let _ = child.wait();
                kills += 1;
                false
            }
            fp => aborted(&env.send(&subject, &body, None, Some(fp))),
        };
        if point != "sigkill" {
            // A point on the path must be reached: the run must have crashed.
            assert!(
                crashed || point == "outbox::during_confirm",
                "{point} did not crash in round {round}"
            );
            if crashed {
                crashes += 1;
                *by_point.entry(point).or_default() += 1;
            }
        }
        // Scheduled sends: a batch claimed by `send-due`, which crashes after the claim (or
        // after submitting the first of them).
        if round.is_multiple_of(200) {
            let at = rfc3339(steward_core::time::now_secs() + 2);
            for k in 0..5 {
                let o = env.send(&format!("s{round}-{k}"), &body, Some(&at), None);
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            }
            std::thread::sleep(Duration::from_millis(2_100));
            let fp = if round.is_multiple_of(400) {
                "outbox::after_claim"
            } else {
                "outbox::after_backend"
            };
            assert!(aborted(&env.run(&["ops", "send-due"], Some(fp))), "send-due at {fp}");
            crashes += 1;
            *by_point
                .entry(if fp == "outbox::after_claim" {
                    "after_claim"
                } else {
                    "send_due::after_backend"
                })
                .or_default() += 1;
            // What was claimed is never claimed again.
            let again = env.run(&["ops", "send-due", "--json"], None);
            let report: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
            assert_eq!(report["claimed"], 0, "a claimed row was claimed twice");
        }
        if round.is_multiple_of(100) {
            index();
            assert!(env.run(&["ops", "confirm"], None).status.success());
        }
    }
    eprintln!("{crashes} injected crashes over {round} rounds, {kills} SIGKILLs: {by_point:?}");

    // Settle: mirror every Sent copy, then confirmation passes until nothing is left to check
    // (in process, with the clock moved past the stale-start delay and the check limit).
    index();
    let s = Steward::builder().home(&home).open().unwrap();
    let mut now = steward_core::time::now_secs() + 120;
    for _ in 0..10_000 {
        now += 60;
        if s.confirm_pass(now).unwrap().checked == 0 {
            break;
        }
    }

    // Deliveries, by Message-ID.
    let mut delivered: BTreeMap<String, usize> = BTreeMap::new();
    for d in sink.deliveries() {
        let id = d["message_id"].as_str().unwrap().trim_matches(['<', '>']).to_owned();
        *delivered.entry(id).or_default() += 1;
    }
    let duplicates: Vec<_> = delivered.iter().filter(|(_, n)| **n > 1).collect();
    assert!(duplicates.is_empty(), "duplicate deliveries: {duplicates:?}");

    // Every operation, whatever state the crash left it in.
    let mut ops = Vec::new();
    let mut offset = 0;
    loop {
        // Full operations (inputs included), not the summaries.
        let page = s.journal().unwrap().list(None, offset, 100).unwrap();
        if page.is_empty() {
            break;
        }
        offset += page.len();
        ops.extend(page);
    }
    let journaled: BTreeSet<String> =
        ops.iter().map(|o| o.input["message_id"].as_str().unwrap().to_owned()).collect();
    let unjournaled: Vec<_> = delivered.keys().filter(|id| !journaled.contains(*id)).collect();
    assert!(unjournaled.is_empty(), "delivered without a journal entry: {unjournaled:?}");
    // Every failpoint round journaled its mail exactly once.
    let subjects: BTreeMap<String, usize> = ops.iter().fold(BTreeMap::new(), |mut m, o| {
        *m.entry(o.input["subject"].as_str().unwrap().to_owned()).or_default() += 1;
        m
    });
    for r in 1..=round {
        let expect = !matches!(r % 10, 8 | 9);
        let n = subjects.get(&format!("m{r}")).copied().unwrap_or(0);
        if expect {
            assert_eq!(n, 1, "round {r} journaled {n} operations");
        } else {
            assert!(n <= 1, "round {r} journaled {n} operations");
        }
    }
    let mut states: BTreeMap<&str, usize> = BTreeMap::new();
    for op in &ops {
        assert!(op.attempts <= 1, "operation {} attempted {} times", op.id, op.attempts);
        let id = op.input["message_id"].as_str().unwrap();
        let was_delivered = delivered.contains_key(id);
        match op.state {
            OpState::Confirmed => assert!(was_delivered, "confirmed but never delivered: {op:?}"),
            OpState::NeedsReview => assert!(!was_delivered, "delivered but not confirmed: {op:?}"),
            other => panic!("operation {} left {other:?}: {op:?}", op.id),
        }
        *states.entry(op.state.as_str()).or_default() += 1;
    }
    eprintln!("{} operations: {states:?}; {} deliveries", ops.len(), delivered.len());
    assert!(crashes >= target);
    assert!(states.get("confirmed").copied().unwrap_or(0) > 0);
    assert!(states.get("needs_review").copied().unwrap_or(0) > 0);
    let c = rusqlite::Connection::open(home.join("ops.db")).unwrap();
    let ok: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
}
