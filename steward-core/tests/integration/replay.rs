//! Policy replay: recorded calls decided under the policy in force, nothing executed or written.

use serde_json::json;
use steward_core::{
    Steward, StewardError,
    policy::PolicyChange,
    replay::{ReplayRecord, parse_jsonl},
};

const LOG: &str = r#"
{"tool": "mail.search", "input": {"query": "invoice"}, "expected": "allow"}
{"tool": "mail.send", "input": {"to": ["bob@example.org"], "subject": "s", "body": "b"}, "expected": "gate:confirm"}
{"tool": "mail.delete", "input": {"message_ids": [1]}, "expected": "allow"}
{"tool": "printer.print", "input": {"file": "a.pdf"}, "expected": "gate"}
{"tool": "mail.send", "input": "not an object", "expected": "deny"}
{"tool": "mail.send", "input": {"to": ["x@example.org"], "subject": "s", "body": "b"}, "headless_grants": ["mail.search"], "expected": "deny"}
{"tool": "policy.set", "input": {"change": "deny_namespace", "prefix": "mail."}}
"#;

#[test]
fn a_recorded_log_is_decided_compared_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let s = Steward::builder().home(dir.path().join("home")).open().unwrap();
    let records = parse_jsonl(LOG).unwrap();
    assert_eq!(records.len(), 7);
    let audit_before = s.audit().unwrap().query(&Default::default()).unwrap().len();
    let r = s.replay_policy(&records).unwrap();
    assert_eq!((r.policy_version, r.total, r.compared, r.matched), (0, 7, 6, 5));
    assert_eq!(r.differences, vec![2], "deleting mail is never allowed without a person");
    let words: Vec<_> = r.outcomes.iter().map(|o| (o.decision, o.level)).collect();
    assert_eq!(
        words,
        vec![
            ("allow", Some("auto")),
            ("gate", Some("confirm")),
            ("gate", Some("confirm")),
            ("gate", Some("confirm")),
            ("deny", None),
            ("deny", None),
            ("gate", Some("confirm")),
        ]
    );
    assert_eq!(r.outcomes[6].matches, None);
    // Nothing was audited, approved or journaled.
    assert_eq!(s.audit().unwrap().query(&Default::default()).unwrap().len(), audit_before);
    assert!(s.approvals().unwrap().list(false, None, 0, 10).unwrap().is_empty());
    assert!(s.list_write_operations(None, 0, 10).unwrap().is_empty());

    // A person changes the policy; the same log replays under the new version.
    let me = s.human("Ada").unwrap();
    let change = PolicyChange::setting("mail.send", "secure", None).unwrap();
    s.set_policy(&me, &change, Some(0)).unwrap();
    let r = s.replay_policy(&records).unwrap();
    assert_eq!(r.policy_version, 1);
    assert_eq!(r.differences, vec![1, 2], "mail.send is now secure, not confirm");
    assert_eq!(r.outcomes[1].level, Some("secure"));
}

#[test]
fn bad_records_are_typed_errors_with_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let s = Steward::builder().home(dir.path().join("home")).open().unwrap();
    let err = parse_jsonl("{\"tool\": \"mail.search\", \"input\": {}}\n{oops\n").unwrap_err();
    assert_eq!(err.code(), "REPLAY_BAD_RECORD");
    assert!(err.to_string().starts_with("record 2:"), "{err}");
    let err = parse_jsonl("{\"tool\": \"x\", \"input\": {}, \"extra\": 1}").unwrap_err();
    assert_eq!(err.code(), "REPLAY_BAD_RECORD");
    for bad in ["maybe", "deny:secure", "gate:L9"] {
        let rec = ReplayRecord {
            tool: "mail.send".into(),
            input: json!({}),
            expected: Some(bad.into()),
            headless_grants: None,
        };
        assert_eq!(s.replay_policy(&[rec]).unwrap_err().code(), "REPLAY_BAD_RECORD", "{bad}");
    }
    let many = "{\"tool\": \"mail.search\", \"input\": {}}\n".repeat(10_001);
    assert_eq!(parse_jsonl(&many).unwrap_err().code(), "REPLAY_TOO_MANY");
}
