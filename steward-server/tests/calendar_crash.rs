//! Calendar writes under crashes, proved: the `steward` binary built with the `failpoints`
//! feature aborts (what `kill -9` leaves behind) after journaling an approved
//! `calendar.create_event`, after writing the event into the vdir and before recording it,
//! after recording, and in the middle of a confirmation pass; each approval is then run again
//! without a crash. Afterwards: no event written twice, none written without its operation,
//! no operation attempted twice, no half-written file in the vdir, and every operation ends
//! `confirmed` (its event is in the vdir) or `retry_exhausted` (it is not).

use std::{collections::BTreeSet, path::Path, process::Output};

use steward_core::journal::OpState;

/// Rounds (one approved event each).
fn rounds() -> usize {
    std::env::var("STEWARD_CALENDAR_CRASHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(90)
        .min(100)
}

fn run(home: &Path, args: &[&str], failpoint: Option<&str>) -> Output {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_steward"));
    c.arg("--home").arg(home).args(args).env("USER", "ada");
    match failpoint {
        Some(fp) => c.env("FAILPOINTS", format!("{fp}=return")),
        None => c.env_remove("FAILPOINTS"),
    };
    c.output().expect("run steward")
}

fn ok(o: &Output) -> &Output {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

fn aborted(o: &Output) -> bool {
    use std::os::unix::process::ExitStatusExt as _;
    o.status.signal() == Some(6)
}

/// A home under `dir` whose calendar source is the vdir `vdir`, account `me`.
fn home_with_vdir(dir: &Path, vdir: &Path) -> std::path::PathBuf {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[calendar]\ntime_zone = \"Europe/Rome\"\n\n[[calendar.sources]]\nkind = \"vdir\"\n\
             path = {vdir:?}\naccount = \"me\"\n"
        ),
    )
    .unwrap();
    home
}

#[test]
fn no_crash_writes_an_event_twice_and_every_write_ends_confirmed_or_retry_exhausted() {
    let dir = tempfile::tempdir().unwrap();
    let vdir = dir.path().join("cal");
    std::fs::create_dir_all(vdir.join("work")).unwrap();
    let home = home_with_vdir(dir.path(), &vdir);
    ok(&run(
        &home,
        &["index", "calendar", "--vdir", vdir.to_str().unwrap(), "--account", "me"],
        None,
    ));
    let points = ["calendar::after_journal", "calendar::after_write", "calendar::after_record"];
    let mut crashes = 0;
    for i in 0..rounds() {
        let input = format!(
            r#"{{"title":"Round {i}","start":"2026-04-{:02}T09:00:00+02:00","end":"2026-04-{:02}T10:00:00+02:00"}}"#,
            i % 28 + 1,
            i % 28 + 1
        );
        let call =
            ok(&run(&home, &["tools", "call", "calendar.create_event", &input, "--json"], None))
                .stdout
                .clone();
        let outcome: serde_json::Value = serde_json::from_slice(&call).unwrap();
        let id = outcome["approval"]["id"].as_i64().unwrap_or_else(|| panic!("{outcome}"));
        ok(&run(&home, &["approvals", "approve", &id.to_string()], None));
        let point = points[i % points.len()];
        let out = run(&home, &["tools", "run-approved", &id.to_string()], Some(point));
        assert!(aborted(&out), "{point}: {}", String::from_utf8_lossy(&out.stderr));
        crashes += 1;
        // Run again after the crash: the journaled write, never a second one.
        ok(&run(&home, &["tools", "run-approved", &id.to_string()], None));
        if i % 10 == 9 {
            let out = run(&home, &["ops", "confirm"], Some("calendar::during_confirm"));
            // Nothing may be stale yet; a pass that checks nothing does not reach the point.
            if aborted(&out) {
                crashes += 1;
            }
        }
    }
    assert!(crashes >= rounds(), "every round crashed once: {crashes}");

    // Settle: confirmation passes with the clock moved past every retry.
    let s = std::sync::Arc::new(steward_connectors::home::open(Some(home.clone())).unwrap());
    let targets = steward_connectors::home::calendar_targets(&home).unwrap();
    let now = steward_core::time::now_secs();
    for k in 0..=steward_core::journal::CONFIRMATION_LIMIT {
        s.confirm_calendar_writes(&targets, now + 120 + k * 60).unwrap();
    }
    let files: Vec<String> = std::fs::read_dir(vdir.join("work"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(files.iter().all(|f| f.ends_with(".ics")), "no half-written file: {files:?}");
    let mut uids = BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(vdir.join("work").join(f)).unwrap();
        let uid = text.lines().find_map(|l| l.strip_prefix("UID:")).unwrap().trim().to_owned();
        assert!(uids.insert(uid), "one event per UID");
    }
    let ops = s.list_write_operations(None, 0, 100).unwrap();
    assert_eq!(ops.len(), rounds(), "one operation per approved event");
    let mut written = 0;
    for op in &ops {
        let full = s.read_write_operation(op.id).unwrap();
        assert!(full.attempts <= 1, "attempted twice: {full:?}");
        let uid = full.input["uid"].as_str().unwrap();
        let present = uids.contains(uid);
        written += usize::from(present);
        match full.state {
            OpState::Confirmed => assert!(present, "confirmed without its event: {full:?}"),
            OpState::RetryExhausted => assert!(!present, "its event is there: {full:?}"),
            other => panic!("op {} ended {other:?}", full.id),
        }
    }
    assert_eq!(written, files.len(), "no event without its operation");
    // The crash after journaling never wrote; the two after the write did.
    assert_eq!(written, rounds() - rounds().div_ceil(points.len()), "{files:?}");
}

#[test]
fn no_crash_applies_an_event_change_twice() {
    let dir = tempfile::tempdir().unwrap();
    let vdir = dir.path().join("cal");
    std::fs::create_dir_all(vdir.join("work")).unwrap();
    let item = vdir.join("work/review.ics");
    std::fs::write(
        &item,
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Other//App//EN\r\nBEGIN:VEVENT\r\n\
         UID:review@other\r\nDTSTAMP:20260101T000000Z\r\nDTSTART:20260410T080000Z\r\n\
         DTEND:20260410T090000Z\r\nSUMMARY:Review\r\nX-OTHER:kept\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
    )
    .unwrap();
    let home = home_with_vdir(dir.path(), &vdir);
    let index = ["index", "calendar", "--vdir", vdir.to_str().unwrap(), "--account", "me"];
    ok(&run(&home, &index, None));
    let id = steward_core::calendar::store::event_id("me/work", "review@other", "");
    let points = ["calendar::after_journal", "calendar::after_write", "calendar::after_record"];
    let rounds = 9;
    for i in 0..rounds {
        let input = format!(r#"{{"event_id":"{id}","title":"Review {i}"}}"#);
        let call =
            ok(&run(&home, &["tools", "call", "calendar.update_event", &input, "--json"], None))
                .stdout
                .clone();
        let outcome: serde_json::Value = serde_json::from_slice(&call).unwrap();
        let approval = outcome["approval"]["id"].as_i64().unwrap_or_else(|| panic!("{outcome}"));
        ok(&run(&home, &["approvals", "approve", &approval.to_string()], None));
        let point = points[i % points.len()];
        let out = run(&home, &["tools", "run-approved", &approval.to_string()], Some(point));
        assert!(aborted(&out), "{point}: {}", String::from_utf8_lossy(&out.stderr));
        // Run again after the crash: the journaled change, never a second one.
        ok(&run(&home, &["tools", "run-approved", &approval.to_string()], None));
        // The next change starts from the file as it is now.
        ok(&run(&home, &index, None));
    }
    let s = std::sync::Arc::new(steward_connectors::home::open(Some(home.clone())).unwrap());
    let targets = steward_connectors::home::calendar_targets(&home).unwrap();
    let now = steward_core::time::now_secs();
    for k in 0..=steward_core::journal::CONFIRMATION_LIMIT {
        s.confirm_calendar_writes(&targets, now + 120 + k * 60).unwrap();
    }
    let text = std::fs::read_to_string(&item).unwrap();
    let ops = s.list_write_operations(None, 0, 100).unwrap();
    assert_eq!(ops.len(), rounds, "one operation per approved change");
    let mut applied = 0;
    let mut last = None;
    for op in &ops {
        let full = s.read_write_operation(op.id).unwrap();
        assert!(full.attempts <= 1, "attempted twice: {full:?}");
        match full.state {
            OpState::Confirmed => {
                applied += 1;
                last = last.max(Some(full.id));
            }
            OpState::RetryExhausted => {}
            other => panic!("op {} ended {other:?}", full.id),
        }
    }
    // The crash after journaling never wrote; the two after the write did, once each: every
    // applied change raised SEQUENCE by one.
    assert_eq!(applied, rounds - rounds.div_ceil(points.len()));
    assert!(text.contains(&format!("SEQUENCE:{applied}\r\n")), "{text}");
    assert!(text.contains("X-OTHER:kept\r\n"), "{text}");
    assert!(text.contains("SUMMARY:Review 8\r\n"), "the last round wrote after its crash: {text}");
    assert!(last.is_some());
    let names: Vec<_> =
        std::fs::read_dir(vdir.join("work")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["review.ics"], "no half-written file");
}
