//! Approvals: lifecycle, binding, races, expiry, batches, PIN, and agents that try to approve.

use std::sync::{Arc, Barrier};

use serde_json::{Value, json};
use steward_core::{
    ErrorKind, Steward, StewardError,
    approval::{ApprovalStatus, NewApproval, Resolution, input_sha256},
    audit::AuditQuery,
    policy::Level,
};

const NOW: i64 = 1_800_000_000;

fn home() -> (tempfile::TempDir, Steward) {
    let dir = tempfile::tempdir().unwrap();
    let s = Steward::builder().home(dir.path().join("home")).open().unwrap();
    (dir, s)
}

fn send(to: &str) -> NewApproval {
    NewApproval {
        chat: Some("chat-1".into()),
        requested_by: "agent:assistant".into(),
        tool: "mail.send".into(),
        input: json!({"to": [to], "subject": "Hi", "body": "text"}),
        summary: format!("Send \"Hi\" to {to}"),
        level: Level::Confirm,
        timeout_secs: None,
        taint: None,
    }
}

#[test]
fn approve_binds_the_exact_input_and_nothing_else_runs() {
    let (_d, s) = home();
    let a = s.approvals().unwrap();
    let me = s.human("Ada").unwrap();
    let card = a.request(&send("bob@example.org"), None, NOW).unwrap();
    assert_eq!(card.status, ApprovalStatus::Requested);
    assert_eq!(card.expires_at, NOW + 300);
    // Before a decision nothing may run.
    assert_eq!(
        a.authorize_execution(card.id, &card.normalized_input).unwrap_err().code(),
        "APPROVAL_NOT_APPROVED"
    );
    let done = a.resolve(card.id, &Resolution::Approve, None, &me, None, None, NOW + 1).unwrap();
    assert_eq!(done.status, ApprovalStatus::Approved);
    assert_eq!(done.decided_by.as_deref(), Some("Ada"));
    assert_eq!(
        done.effective_sha256.as_deref(),
        Some(input_sha256(&card.normalized_input).as_str())
    );
    // Key order does not matter; any other content does.
    let reordered = json!({"subject": "Hi", "body": "text", "to": ["bob@example.org"]});
    assert_eq!(*a.authorize_execution(card.id, &reordered).unwrap().input(), card.normalized_input);
    let drifted = json!({"to": ["eve@evil.example"], "subject": "Hi", "body": "text"});
    assert_eq!(
        a.authorize_execution(card.id, &drifted).unwrap_err().code(),
        "APPROVAL_INPUT_MISMATCH"
    );
    // At most once.
    let again = a.resolve(card.id, &Resolution::Deny, None, &me, None, None, NOW + 2).unwrap_err();
    assert_eq!(again.code(), "APPROVAL_ALREADY_RESOLVED");
    let events: Vec<String> = a.events(card.id).unwrap().into_iter().map(|e| e.0).collect();
    assert_eq!(events, vec!["requested", "approved"]);
    // The audit trail has both, once each, redacted.
    let audit = s.audit().unwrap();
    let rows = audit.query(&AuditQuery::default()).unwrap();
    let types: Vec<&str> = rows.iter().map(|r| r.event_type.as_str()).collect();
    assert_eq!(types, vec!["approval.approved", "approval.requested"]);
    assert_eq!(rows[0].actor, "Ada");
    assert_eq!(rows[1].actor, "agent:assistant");
    assert_eq!(rows[1].payload["input"]["to"], json!(["bob@example.org"]));
}

#[test]
fn no_decision_proceeds_unaudited_and_the_audit_trail_is_opened_again() {
    let (_d, s) = home();
    // audit.db cannot be opened: a directory stands where the file goes.
    let audit_db = s.home().join("audit.db");
    std::fs::create_dir(&audit_db).unwrap();
    let err = s.approvals().unwrap_err();
    assert_eq!((err.code(), err.kind()), ("AUDIT_UNAVAILABLE", ErrorKind::Unavailable), "{err}");
    assert!(!s.home().join("steward.db").exists(), "approvals were not opened unaudited");
    let err = s.journal().unwrap_err();
    assert_eq!((err.code(), err.kind()), ("AUDIT_UNAVAILABLE", ErrorKind::Unavailable), "{err}");
    assert!(!s.home().join("ops.db").exists(), "the journal was not opened unaudited");
    // Once the trail can be opened, the same handle opens both, audited.
    std::fs::remove_dir(&audit_db).unwrap();
    let a = s.approvals().unwrap();
    let card = a.request(&send("bob@example.org"), None, NOW).unwrap();
    let rows = s.audit().unwrap().query(&AuditQuery::default()).unwrap();
    let types: Vec<&str> = rows.iter().map(|r| r.event_type.as_str()).collect();
    assert_eq!(types, ["approval.requested"]);
    assert_eq!(rows[0].correlation_id, Some(format!("approval:{}", card.id)));
    let op = s
        .journal()
        .unwrap()
        .record(
            &steward_core::journal::NewOperation {
                kind: "mail.send".into(),
                idempotency_key: "k".into(),
                input: json!({"to": ["bob@example.org"], "subject": "Hi", "body": "text"}),
                expected: json!({"message_id": "k@steward.local"}),
                approval_id: Some(card.id),
                scheduled_for: None,
            },
            NOW + 1,
        )
        .unwrap();
    let rows = s
        .audit()
        .unwrap()
        .query(&AuditQuery { event_type: Some("journal.started".into()), ..Default::default() })
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].correlation_id, Some(format!("operation:{}", op.id)));
}

#[test]
fn a_damaged_json_column_is_approval_corrupt_naming_the_row_and_column() {
    let (_d, s) = home();
    let a = s.approvals().unwrap();
    let card = a.request(&send("bob@example.org"), None, NOW).unwrap();
    let raw = rusqlite::Connection::open(s.home().join("steward.db")).unwrap();
    raw.execute("UPDATE approvals SET normalized_input = '{not json' WHERE id = ?1", [card.id])
        .unwrap();
    for err in [a.get(card.id).unwrap_err(), a.list(false, None, 0, 10).unwrap_err()] {
        assert_eq!((err.code(), err.kind()), ("APPROVAL_CORRUPT", ErrorKind::Corrupt), "{err}");
        let text = err.to_string();
        assert!(
            text.contains(&format!("approvals row {}, column normalized_input", card.id)),
            "{text}"
        );
    }
    // A nullable JSON column too.
    raw.execute(
        "UPDATE approvals SET normalized_input = '{}', effective_input = '[' WHERE id = ?1",
        [card.id],
    )
    .unwrap();
    let err = a.get(card.id).unwrap_err();
    assert_eq!(err.code(), "APPROVAL_CORRUPT", "{err}");
    assert!(err.to_string().contains("column effective_input"), "{err}");
}

#[test]
fn edits_deny_revise_and_preflight() {
    let (_d, s) = home();
    let a = s.approvals().unwrap();
    let me = s.human("Ada").unwrap();
    // The tool's preflight lowercases addresses and refuses an empty recipient list.
    let preflight = |v: &Value| -> Result<Value, String> {
        let mut v = v.clone();
        let to = v["to"].as_array().ok_or("to must be a list")?;
        if to.is_empty() {
            return Err("no recipients".into());
        }
        v["to"] =
            json!(to.iter().map(|x| x.as_str().unwrap_or("").to_lowercase()).collect::<Vec<_>>());
        Ok(v)
    };
    let card = a.request(&send("Bob@Example.org"), Some(&preflight), NOW).unwrap();
    assert_eq!(card.normalized_input["to"], json!(["bob@example.org"]), "the card shows what runs");
    // An edit is preflighted again; optional fields left out stay out.
    let bad = json!({"to": [], "subject": "Hi"});
    let e = a
        .resolve(card.id, &Resolution::Edit(bad), None, &me, None, Some(&preflight), NOW)
        .unwrap_err();
    assert_eq!(e.code(), "APPROVAL_PREFLIGHT_REJECTED");
    assert_eq!(
        a.get(card.id).unwrap().status,
        ApprovalStatus::Requested,
        "a rejected edit changes nothing"
    );
    let edit = json!({"to": ["CAROL@example.org"], "subject": "Hello"});
    let done = a
        .resolve(
            card.id,
            &Resolution::Edit(edit),
            Some("shorter"),
            &me,
            None,
            Some(&preflight),
            NOW,
        )
        .unwrap();
    assert_eq!(done.status, ApprovalStatus::Edited);
    let eff = done.effective_input.unwrap();
    assert_eq!(eff, json!({"to": ["carol@example.org"], "subject": "Hello"}));
    assert!(eff.get("body").is_none(), "an absent optional field is not invented");
    assert_eq!(*a.authorize_execution(card.id, &eff).unwrap().input(), eff);
    assert_eq!(
        a.authorize_execution(card.id, &card.normalized_input).unwrap_err().code(),
        "APPROVAL_INPUT_MISMATCH"
    );
    // Deny and revise never run.
    for (res, status) in [
        (Resolution::Deny, ApprovalStatus::Denied),
        (Resolution::Revise, ApprovalStatus::RevisionRequested),
    ] {
        let c = a.request(&send("x@example.org"), None, NOW).unwrap();
        let d = a.resolve(c.id, &res, Some("say why"), &me, None, None, NOW).unwrap();
        assert_eq!(d.status, status);
        assert_eq!(d.note.as_deref(), Some("say why"));
        assert_eq!(
            a.authorize_execution(c.id, &c.normalized_input).unwrap_err().code(),
            "APPROVAL_NOT_APPROVED"
        );
    }
    // Listing: pending per chat and globally, bounded.
    a.request(&send("y@example.org"), None, NOW).unwrap();
    assert_eq!(a.list(true, Some("chat-1"), 0, 10).unwrap().len(), 1);
    assert_eq!(a.list(false, None, 0, 100).unwrap().len(), 4);
    assert!(a.list(true, Some("other"), 0, 10).unwrap().is_empty());
    assert_eq!(a.list(true, None, 0, 101).unwrap_err().code(), "APPROVAL_INVALID");
}

#[test]
fn agents_cannot_resolve_and_bad_requests_are_refused() {
    let (_d, s) = home();
    let a = s.approvals().unwrap();
    assert_eq!(s.human("agent:assistant").unwrap_err().code(), "APPROVAL_BAD_PERSON");
    assert_eq!(s.human("  ").unwrap_err().code(), "APPROVAL_BAD_PERSON");
    let card = a.request(&send("bob@example.org"), None, NOW).unwrap();
    let e = a.refuse_agent_resolution(card.id, "agent:assistant", NOW);
    assert_eq!(e.code(), "APPROVAL_SELF_RESOLVE_DENIED");
    assert_eq!(a.get(card.id).unwrap().status, ApprovalStatus::Requested);
    let events: Vec<String> = a.events(card.id).unwrap().into_iter().map(|e| e.0).collect();
    assert_eq!(events, vec!["requested", "self_resolve_denied"], "the attempt is recorded");
    let denied = s
        .audit()
        .unwrap()
        .query(&AuditQuery {
            event_type: Some("approval.self_resolve_denied".into()),
            ..AuditQuery::default()
        })
        .unwrap();
    assert_eq!(denied.len(), 1);
    assert_eq!((denied[0].actor.as_str(), denied[0].risk.as_str()), ("agent:assistant", "high"));
    let mut n = send("a@b.c");
    n.requested_by = "Ada".into();
    assert_eq!(a.request(&n, None, NOW).unwrap_err().code(), "APPROVAL_INVALID");
    let mut n = send("a@b.c");
    n.level = Level::Logged;
    assert_eq!(a.request(&n, None, NOW).unwrap_err().code(), "APPROVAL_INVALID");
    let mut n = send("a@b.c");
    n.input = json!("not an object");
    assert_eq!(a.request(&n, None, NOW).unwrap_err().code(), "APPROVAL_INVALID");
    let mut n = send("a@b.c");
    n.tool = "Send Mail".into();
    assert_eq!(a.request(&n, None, NOW).unwrap_err().code(), "APPROVAL_INVALID");
    assert_eq!(a.get(999).unwrap_err().code(), "APPROVAL_NOT_FOUND");
    // Only the requesting agent may cancel.
    assert_eq!(a.cancel(card.id, "agent:other", NOW).unwrap_err().code(), "APPROVAL_INVALID");
    assert_eq!(
        a.cancel(card.id, "agent:assistant", NOW).unwrap().status,
        ApprovalStatus::Cancelled
    );
}

#[test]
fn expiry_is_a_denial_and_races_have_one_winner() {
    let (_d, s) = home();
    let a = s.approvals().unwrap();
    let me = s.human("Ada").unwrap();
    let card = a.request(&send("bob@example.org"), None, NOW).unwrap();
    // After the timeout, a resolution finds it expired (and expires it).
    let e = a.resolve(card.id, &Resolution::Approve, None, &me, None, None, NOW + 300).unwrap_err();
    assert_eq!(e.code(), "APPROVAL_ALREADY_RESOLVED");
    assert_eq!(a.get(card.id).unwrap().status, ApprovalStatus::Expired);
    assert_eq!(
        a.authorize_execution(card.id, &card.normalized_input).unwrap_err().code(),
        "APPROVAL_NOT_APPROVED"
    );
    // The sweep expires the rest.
    for _ in 0..3 {
        a.request(&send("x@example.org"), None, NOW).unwrap();
    }
    assert_eq!(a.expire_due(NOW + 299).unwrap(), 0);
    assert_eq!(a.expire_due(NOW + 300).unwrap(), 3);
    // Eight resolvers and the sweep on one request, many times: exactly one outcome each time.
    let s = Arc::new(s);
    for round in 0..20 {
        let card = s.approvals().unwrap().request(&send("r@example.org"), None, NOW).unwrap();
        let barrier = Arc::new(Barrier::new(9));
        let at = if round % 2 == 0 { NOW + 10 } else { NOW + 300 };
        let mut handles = Vec::new();
        for i in 0..8 {
            let (s, b) = (Arc::clone(&s), Arc::clone(&barrier));
            handles.push(std::thread::spawn(move || {
                let me = s.human(&format!("person{i}")).unwrap();
                let res = if i % 2 == 0 { Resolution::Approve } else { Resolution::Deny };
                b.wait();
                s.approvals().unwrap().resolve(card.id, &res, None, &me, None, None, at).is_ok()
            }));
        }
        let sweeper = {
            let (s, b) = (Arc::clone(&s), Arc::clone(&barrier));
            std::thread::spawn(move || {
                b.wait();
                s.approvals().unwrap().expire_due(at).unwrap()
            })
        };
        let wins = handles.into_iter().map(|h| h.join().unwrap()).filter(|w| *w).count();
        let expired = sweeper.join().unwrap();
        let after = s.approvals().unwrap().get(card.id).unwrap();
        let events = s.approvals().unwrap().events(card.id).unwrap();
        if at >= card.expires_at {
            assert_eq!((wins, after.status), (0, ApprovalStatus::Expired));
        } else {
            assert_eq!(wins, 1, "round {round}: exactly one resolver wins");
            assert_eq!(expired, 0);
            assert!(matches!(after.status, ApprovalStatus::Approved | ApprovalStatus::Denied));
        }
        assert_eq!(events.len(), 2, "round {round}: one transition recorded: {events:?}");
    }
}

#[test]
fn batches_resolve_as_a_set_and_secure_needs_the_pin() {
    let (_d, s) = home();
    let a = s.approvals().unwrap();
    let me = s.human("Ada").unwrap();
    let calls: Vec<NewApproval> = (0..15).map(|i| send(&format!("p{i}@example.org"))).collect();
    let (batch, cards) = a.request_batch(&calls, None, NOW).unwrap();
    assert_eq!(cards.len(), 15);
    assert!(cards.iter().all(|c| c.batch_id == Some(batch)));
    let done = a.resolve_batch(batch, true, &me, None, NOW + 5).unwrap();
    assert!(done.iter().all(|c| c.status == ApprovalStatus::Approved));
    for c in &done {
        // Each call still runs on its own, bound to its own input.
        assert_eq!(
            *a.authorize_execution(c.id, &c.normalized_input).unwrap().input(),
            c.normalized_input
        );
    }
    assert_eq!(
        a.resolve_batch(batch, false, &me, None, NOW + 6).unwrap_err().code(),
        "APPROVAL_ALREADY_RESOLVED"
    );
    assert_eq!(a.request_batch(&[], None, NOW).unwrap_err().code(), "APPROVAL_INVALID");
    // Secure (L3): approval needs the PIN; wrong PINs are counted and lock.
    let mut n = send("boss@example.org");
    n.level = Level::Secure;
    let card = a.request(&n, None, NOW).unwrap();
    let approve = |pin: Option<&str>, at: i64| {
        a.resolve(card.id, &Resolution::Approve, None, &me, pin, None, at)
    };
    assert_eq!(approve(Some("1234"), NOW).unwrap_err().code(), "APPROVAL_NO_PIN");
    assert_eq!(a.set_pin(&me, "12", NOW).unwrap_err().code(), "APPROVAL_BAD_PIN");
    a.set_pin(&me, "4821", NOW).unwrap();
    assert_eq!(approve(None, NOW).unwrap_err().code(), "APPROVAL_PIN_REQUIRED");
    for _ in 0..4 {
        assert_eq!(approve(Some("0000"), NOW).unwrap_err().code(), "APPROVAL_PIN_REQUIRED");
    }
    assert_eq!(
        approve(Some("4821"), NOW).unwrap_err().code(),
        "APPROVAL_PIN_LOCKED",
        "five failures lock"
    );
    assert_eq!(a.get(card.id).unwrap().status, ApprovalStatus::Requested, "nothing ran");
    let later = NOW + 901;
    let mut n2 = n;
    n2.timeout_secs = Some(3_600);
    let card2 = a.request(&n2, None, later).unwrap();
    let ok =
        a.resolve(card2.id, &Resolution::Approve, None, &me, Some("4821"), None, later).unwrap();
    assert_eq!(ok.status, ApprovalStatus::Approved, "the lock lifts after the window");
}

#[test]
fn a_spoken_exchange_reads_the_exact_request_and_resolves_once() {
    use steward_core::approval::spoken::{SpokenApproval, SpokenLanguage, SpokenStep, prompt};
    let (_d, s) = home();
    let a = s.approvals().unwrap();
    let req = a.request(&send("sister@example.com"), None, NOW).unwrap();
    let first = prompt(&req, SpokenLanguage::It);
    assert!(first.contains("mail.send"), "{first}");
    assert!(first.contains(r#""to":["sister@example.com"]"#), "{first}");
    let mut voice = SpokenApproval::new(SpokenLanguage::It);
    assert_eq!(voice.hear("ripeti"), SpokenStep::Replay);
    // The replay reads the stored request again: the same words.
    assert_eq!(prompt(&a.get(req.id).unwrap(), SpokenLanguage::It), first);
    assert_eq!(voice.hear("sì, approva"), SpokenStep::Approve);
    let me = s.human("emma").unwrap();
    let done = a.resolve(req.id, &Resolution::Approve, None, &me, None, None, NOW + 1).unwrap();
    assert_eq!(done.status, ApprovalStatus::Approved);
    // An ambiguous exchange on another request ends in denial, and nothing runs.
    let other = a.request(&send("x@example.com"), None, NOW).unwrap();
    let mut voice = SpokenApproval::new(SpokenLanguage::En);
    assert_eq!(voice.hear("send it I guess"), SpokenStep::Retry);
    assert!(matches!(voice.hear("sure"), SpokenStep::Deny { .. }));
    a.resolve(other.id, &Resolution::Deny, Some("voice: ambiguous"), &me, None, None, NOW + 1)
        .unwrap();
    let err = a.authorize_execution(other.id, &other.normalized_input).unwrap_err();
    assert_eq!(err.code(), "APPROVAL_NOT_APPROVED");
}

#[test]
fn subscribers_get_the_state_first_then_every_update_from_any_handle() {
    use std::time::{Duration, Instant};

    use steward_core::approval::MAX_WAIT_SECS;
    let (_d, s) = home();
    let s = Arc::new(s);
    let a = s.approvals().unwrap();
    let first = a.request(&send("a@example.com"), None, NOW).unwrap();
    let snap = a.subscribe(Some("chat-1")).unwrap();
    assert_eq!(snap.pending.iter().map(|p| p.id).collect::<Vec<_>>(), vec![first.id]);
    // Nothing new: a bounded wait returns empty.
    let t = Instant::now();
    assert!(a.wait_events(snap.cursor, 10, Duration::from_millis(300)).unwrap().is_empty());
    assert!(t.elapsed() >= Duration::from_millis(300));
    // A transition in this process wakes the waiter, through the in-process notify: on a
    // handle whose poll is longer than any wait, nothing else can wake it before its deadline,
    // so the result must arrive while the deadline is still far (without the notify, the
    // waiter would return only at its deadline, after this test gave up on it).
    let quiet = {
        let mut limits = steward_core::Limits::default();
        limits.approval_poll_ms = 2 * MAX_WAIT_SECS * 1_000;
        Arc::new(Steward::builder().home(s.home()).limits(limits).open().unwrap())
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = {
        let quiet = Arc::clone(&quiet);
        let cursor = snap.cursor;
        std::thread::spawn(move || {
            let a = quiet.approvals().unwrap();
            tx.send(a.wait_events(cursor, 10, Duration::from_secs(MAX_WAIT_SECS)).unwrap())
                .unwrap();
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let me = quiet.human("emma").unwrap();
    quiet
        .approvals()
        .unwrap()
        .resolve(first.id, &Resolution::Deny, None, &me, None, None, NOW + 1)
        .unwrap();
    let got = rx
        .recv_timeout(Duration::from_secs(MAX_WAIT_SECS / 2))
        .expect("the notify woke the waiter long before its deadline");
    waiter.join().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].approval_id, got[0].event.as_str()), (first.id, "denied"));
    // Another handle (another process, as far as the store knows) is seen by polling.
    let cursor = got[0].seq;
    let other = Steward::builder().home(s.home()).open().unwrap();
    let waiter = {
        let s = Arc::clone(&s);
        std::thread::spawn(move || {
            s.approvals().unwrap().wait_events(cursor, 10, Duration::from_secs(20)).unwrap()
        })
    };
    let second = other.approvals().unwrap().request(&send("b@example.com"), None, NOW).unwrap();
    let got = waiter.join().unwrap();
    assert_eq!((got[0].approval_id, got[0].event.as_str()), (second.id, "requested"));
    assert!(got.iter().all(|e| e.seq > cursor), "no event twice");
    assert_eq!(a.events_after(0, 0).unwrap_err().code(), "APPROVAL_INVALID");
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: 12, ..Default::default() })]
    /// No secure request runs without the verified PIN: any other answer (a wrong PIN, none,
    /// an edit, a batch approval) leaves it pending and the executor refuses it.
    #[test]
    fn no_secure_call_runs_without_the_verified_pin(
        wrong in proptest::option::of("[0-9a-zA-Z ]{0,40}"),
        edit in proptest::bool::ANY,
        batch in proptest::bool::ANY,
    ) {
        proptest::prop_assume!(wrong.as_deref() != Some("4821"));
        let (_d, s) = home();
        let a = s.approvals().unwrap();
        let me = s.human("emma").unwrap();
        a.set_pin(&me, "4821", NOW).unwrap();
        let mut new = send("x@example.com");
        new.level = Level::Secure;
        let card = if batch {
            let (_, cards) = a.request_batch(&[new.clone(), new], None, NOW).unwrap();
            cards[0].clone()
        } else {
            a.request(&new, None, NOW).unwrap()
        };
        let result = match (batch, edit) {
            (true, _) => a.resolve_batch(card.batch_id.unwrap(), true, &me, wrong.as_deref(), NOW + 1).map(|_| ()),
            (false, true) => a
                .resolve(card.id, &Resolution::Edit(json!({"to": ["y@example.com"]})), None, &me, wrong.as_deref(), None, NOW + 1)
                .map(|_| ()),
            (false, false) => a
                .resolve(card.id, &Resolution::Approve, None, &me, wrong.as_deref(), None, NOW + 1)
                .map(|_| ()),
        };
        let err = result.unwrap_err();
        proptest::prop_assert!(matches!(err.code(), "APPROVAL_PIN_REQUIRED" | "APPROVAL_PIN_LOCKED"), "{}", err.code());
        proptest::prop_assert_eq!(a.get(card.id).unwrap().status, ApprovalStatus::Requested);
        proptest::prop_assert!(a.authorize_execution(card.id, &card.normalized_input).is_err());
    }
}
