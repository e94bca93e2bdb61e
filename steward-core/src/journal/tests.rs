use std::sync::{Arc, Barrier};

use serde_json::json;

use super::*;

const NOW: i64 = 1_800_000_000;

fn journal() -> (tempfile::TempDir, Journal) {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::open(dir.path(), &Limits::default()).unwrap();
    (dir, j)
}

fn send(key: &str, to: &str, at: Option<i64>) -> NewOperation {
    NewOperation {
        kind: if at.is_some() { "mail.send_later" } else { "mail.send" }.into(),
        idempotency_key: key.into(),
        input: json!({"to": [to], "subject": "Hi", "body": "full body, not redacted"}),
        expected: json!({"message_id": format!("{key}@steward.local")}),
        approval_id: Some(7),
        scheduled_for: at,
    }
}

#[test]
fn the_transition_table_has_no_way_back_to_an_attempt() {
    use OpState::*;
    let allowed: Vec<(OpState, OpState)> = STATES
        .iter()
        .flat_map(|a| STATES.iter().map(move |b| (*a, *b)))
        .filter(|(a, b)| a.can_become(*b))
        .collect();
    assert_eq!(allowed.len(), 1 + 3 + 4 * 3, "{allowed:?}");
    for (from, to) in &allowed {
        assert!(!matches!(to, Scheduled), "{from:?} → {to:?}");
        assert!(*to != Started || *from == Scheduled, "{from:?} → {to:?}");
        assert!(!from.is_final());
    }
    for s in STATES {
        assert_eq!(OpState::parse(s.as_str()), Some(s));
    }
    assert_eq!(Domain::of("calendar.create").map(Domain::exhausted), Some(RetryExhausted));
    assert_eq!(Domain::of("shell.run"), None);
}

#[test]
fn journal_before_execute_idempotency_and_typed_transitions() {
    let (dir, j) = journal();
    let op = j.record(&send("k1", "a@example.com", None), NOW).unwrap();
    assert_eq!((op.state, op.attempts, op.attempted_at), (OpState::Started, 1, Some(NOW)));
    assert_eq!(op.input["body"], "full body, not redacted");
    // Same key, same input (other key order): the same operation, no second row.
    let again = NewOperation {
        input: json!({"body": "full body, not redacted", "subject": "Hi", "to": ["a@example.com"]}),
        ..send("k1", "a@example.com", None)
    };
    assert_eq!(j.record(&again, NOW + 5).unwrap().id, op.id);
    let reused = j.record(&send("k1", "b@example.com", None), NOW).unwrap_err();
    assert_eq!(reused.code(), "JOURNAL_KEY_REUSED");
    assert_eq!(j.list(None, 0, 10).unwrap().len(), 1);

    let bad = j.transition(op.id, OpState::Scheduled, &OpUpdate::default(), NOW).unwrap_err();
    assert_eq!(bad.code(), "JOURNAL_ILLEGAL_TRANSITION");
    let returned = j
        .transition(
            op.id,
            OpState::BackendReturned,
            &OpUpdate { backend_result: Some(json!({"smtp": "250 OK"})), ..Default::default() },
            NOW + 1,
        )
        .unwrap();
    assert_eq!(returned.backend_result, Some(json!({"smtp": "250 OK"})));
    let bad = j.transition(op.id, OpState::Started, &OpUpdate::default(), NOW).unwrap_err();
    assert_eq!(bad.code(), "JOURNAL_ILLEGAL_TRANSITION");
    assert_eq!(j.get(op.id).unwrap().state, OpState::BackendReturned, "refusal wrote nothing");
    // Confirmed only with what a check observed: a bare transition is refused, writes nothing.
    let bare = j.transition(op.id, OpState::Confirmed, &OpUpdate::default(), NOW + 2).unwrap_err();
    assert_eq!(bare.code(), "JOURNAL_INVALID");
    assert_eq!(j.get(op.id).unwrap().state, OpState::BackendReturned);
    let done =
        j.confirm(op.id, Confirmation::observed(json!({"sent_message": 42})), NOW + 2).unwrap();
    assert_eq!(done.evidence, Some(json!({"sent_message": 42})));
    assert_eq!(done.backend_result, Some(json!({"smtp": "250 OK"})), "earlier fields kept");

    for bad in [
        NewOperation { kind: "shell.run".into(), ..send("k2", "a@example.com", None) },
        NewOperation { idempotency_key: " ".into(), ..send("k2", "a@example.com", None) },
        NewOperation { input: json!([1]), ..send("k2", "a@example.com", None) },
    ] {
        assert_eq!(j.record(&bad, NOW).unwrap_err().code(), "JOURNAL_INVALID");
    }
    assert_eq!(j.get(99).unwrap_err().code(), "JOURNAL_NOT_FOUND");
    assert_eq!(j.list(None, 0, 0).unwrap_err().code(), "JOURNAL_INVALID");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("ops.db")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn a_due_row_is_claimed_once_even_by_racing_schedulers() {
    let (dir, j) = journal();
    for i in 0..20 {
        j.record(&send(&format!("s{i}"), "a@example.com", Some(NOW + i)), NOW).unwrap();
    }
    assert!(j.claim_due(NOW - 1, 100).unwrap().is_empty(), "nothing due yet");
    let barrier = Arc::new(Barrier::new(4));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            let path = dir.path().to_path_buf();
            std::thread::spawn(move || {
                barrier.wait();
                let j = Journal::open(&path, &Limits::default()).unwrap();
                let mut got = Vec::new();
                for _ in 0..10 {
                    got.extend(j.claim_due(NOW + 100, 3).unwrap().into_iter().map(|o| o.id));
                }
                got
            })
        })
        .collect();
    let mut all: Vec<i64> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    all.sort_unstable();
    let n = all.len();
    all.dedup();
    assert_eq!((n, all.len()), (20, 20), "every due row claimed exactly once");
    for op in j.list(None, 0, 100).unwrap() {
        assert_eq!((op.state, op.attempts), (OpState::Started, 1));
    }
    // A crash after the claim never requeues: confirmation, then review.
    let id = all[0];
    for k in 1..CONFIRMATION_LIMIT {
        let op = j.confirmation_missed(id, NOW + 200 + k, None).unwrap();
        assert_eq!((op.state, op.confirmation_attempts), (OpState::Started, k));
    }
    let op = j.confirmation_missed(id, NOW + 300, None).unwrap();
    assert_eq!(op.state, OpState::NeedsReview);
    assert_eq!(
        j.confirmation_missed(id, NOW + 301, None).unwrap_err().code(),
        "JOURNAL_ILLEGAL_TRANSITION"
    );
    assert!(j.claim_due(NOW + 1_000, 100).unwrap().is_empty());
}

#[test]
fn a_damaged_journal_stops_and_is_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    {
        let j = Journal::open(dir.path(), &Limits::default()).unwrap();
        j.record(&send("k", "a@example.com", None), NOW).unwrap();
        j.db.checkpoint().unwrap();
    }
    let path = dir.path().join("ops.db");
    let mut bytes = std::fs::read(&path).unwrap();
    for b in bytes.iter_mut().skip(100).take(4_000) {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();
    let err = Journal::open(dir.path(), &Limits::default()).unwrap_err();
    assert_eq!(err.code(), "JOURNAL_CORRUPT", "{err}");
    assert!(err.to_string().contains("never rebuilt"));
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the damaged file is untouched");
    // A file that is not a database at all.
    std::fs::write(&path, b"this is not SQLite, just text that is long enough to matter").unwrap();
    let err = Journal::open(dir.path(), &Limits::default()).unwrap_err();
    assert_eq!(err.code(), "JOURNAL_CORRUPT", "{err}");
}

#[test]
fn a_damaged_json_column_is_journal_corrupt_naming_the_row_and_column() {
    let (dir, j) = journal();
    let op = j.record(&send("k", "a@example.com", None), NOW).unwrap();
    let raw = rusqlite::Connection::open(dir.path().join("ops.db")).unwrap();
    raw.execute("UPDATE operations SET input = '{not json' WHERE id = ?1", [op.id]).unwrap();
    let errors = [
        j.get(op.id).unwrap_err(),
        j.find_by_key("k").unwrap_err(),
        j.list(None, 0, 10).unwrap_err(),
        j.confirmable("mail.", NOW, 10).unwrap_err(),
    ];
    for err in errors {
        assert_eq!((err.code(), err.kind()), ("JOURNAL_CORRUPT", ErrorKind::Corrupt), "{err}");
        let text = err.to_string();
        assert!(text.contains(&format!("operations row {}, column input", op.id)), "{text}");
    }
    // A nullable JSON column, and a state no build knows.
    raw.execute("UPDATE operations SET input = '{}', evidence = 'nope' WHERE id = ?1", [op.id])
        .unwrap();
    let err = j.get(op.id).unwrap_err();
    assert_eq!(err.code(), "JOURNAL_CORRUPT", "{err}");
    assert!(err.to_string().contains("column evidence"), "{err}");
    // (The schema's CHECK refuses it, so a damaged file is the only way it gets there.)
    raw.pragma_update(None, "ignore_check_constraints", true).unwrap();
    raw.execute("UPDATE operations SET evidence = NULL, state = 'sent' WHERE id = ?1", [op.id])
        .unwrap();
    let err = j.get(op.id).unwrap_err();
    assert_eq!(err.code(), "JOURNAL_CORRUPT", "{err}");
    assert!(err.to_string().contains("column state"), "{err}");
}

#[test]
fn the_serialized_operation_is_stable() {
    let (_dir, j) = journal();
    let scheduled = j.record(&send("snap", "a@example.com", Some(NOW + 60)), NOW).unwrap();
    assert_eq!((scheduled.state, scheduled.attempts), (OpState::Scheduled, 0));
    let op = j.claim_due(NOW + 60, 1).unwrap().pop().unwrap();
    assert_eq!(op.id, 1);
    let op = j
        .transition(
            op.id,
            OpState::Unknown,
            &OpUpdate { error: Some("timeout after DATA".into()), ..Default::default() },
            NOW + 61,
        )
        .unwrap();
    let expected = json!({
        "id": 1,
        "kind": "mail.send_later",
        "idempotency_key": "snap",
        "input": {"body": "full body, not redacted", "subject": "Hi", "to": ["a@example.com"]},
        "input_sha256": input_sha256(&json!({"to": ["a@example.com"], "subject": "Hi", "body": "full body, not redacted"})),
        "expected": {"message_id": "snap@steward.local"},
        "approval_id": 7,
        "state": "unknown",
        "attempts": 1,
        "confirmation_attempts": 0,
        "scheduled_for": NOW + 60,
        "attempted_at": NOW + 60,
        "backend_result": null,
        "error": "timeout after DATA",
        "evidence": null,
        "created_at": NOW,
        "updated_at": NOW + 61
    });
    assert_eq!(serde_json::to_value(&op).unwrap(), expected);
}
