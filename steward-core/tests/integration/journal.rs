//! The journal in a home: the complete input stays in ops.db, the audit copy is redacted.

use serde_json::json;
use steward_core::{
    Steward,
    audit::AuditQuery,
    journal::{NewOperation, OpState, OpUpdate},
};

#[test]
fn the_journal_keeps_everything_and_the_audit_copy_is_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let s = Steward::builder().home(dir.path().join("home")).open().unwrap();
    let j = s.journal().unwrap();
    let body = format!("smtp password=hunter2-very-secret {}", "Dear Ann, ".repeat(40));
    let op = j
        .record(
            &NewOperation {
                kind: "mail.send".into(),
                idempotency_key: "chat-1:approval-3".into(),
                input: json!({"to": ["ann@example.com"], "subject": "Minutes", "body": body}),
                expected: json!({"message_id": "x@steward.local"}),
                approval_id: Some(3),
                scheduled_for: None,
            },
            1_800_000_000,
        )
        .unwrap();
    j.transition(
        op.id,
        OpState::Unknown,
        &OpUpdate { error: Some("timeout after DATA".into()), ..Default::default() },
        1_800_000_001,
    )
    .unwrap();
    assert_eq!(j.get(op.id).unwrap().input["body"], body.as_str(), "the journal is complete");
    let rows = s
        .audit()
        .unwrap()
        .query(&AuditQuery { tool: Some("mail.send".into()), ..Default::default() })
        .unwrap();
    let types: Vec<&str> = rows.iter().map(|r| r.event_type.as_str()).collect();
    assert_eq!(types, ["journal.unknown", "journal.started"]);
    assert_eq!(rows[0].risk, "high");
    for r in &rows {
        let text = r.payload.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(r.payload["input"]["body"].as_str().unwrap().chars().count() <= 120);
        assert_eq!(r.correlation_id.as_deref(), Some(format!("operation:{}", op.id).as_str()));
    }
}
