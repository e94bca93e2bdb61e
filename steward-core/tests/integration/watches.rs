//! Watches with grants through the approval gate: the card says in words what the watch may
//! do, nothing starts until a person approves, and what starts is exactly what was approved.

use std::sync::Arc;

use serde_json::{Value, json};
use steward_core::{
    StewardError as _, WATCH_GRANTS_TOOL,
    approval::{ApprovalStatus, DecisionInput, DecisionKind},
    watch::{DomainEvent, SourceError, WatchAdapter, WatchDefinition, WatchQuery},
};

/// A platform that never changes.
struct Platform;

impl WatchAdapter for Platform {
    fn source(&self) -> &str {
        "platform"
    }
    fn snapshot(&self, _r: &str, _now: i64) -> Result<Value, SourceError> {
        Ok(json!({"platform": "4"}))
    }
    fn events(&self, _p: &Value, _c: &Value, _now: i64) -> Vec<DomainEvent> {
        Vec::new()
    }
    fn default_expiry(&self, _s: &Value, created: i64) -> i64 {
        created + 3_600
    }
    fn is_terminal(&self, _s: &Value) -> bool {
        false
    }
}

fn definition(after_minutes: i64) -> WatchDefinition {
    serde_json::from_value(json!({
        "source": "platform", "resource_ref": "r", "instruction": "write to my sister",
        "rules": [{"id": "mail", "trigger": {"kind": "time_reached", "after_minutes": after_minutes},
            "once": true, "grants": [{"tool": "mail.send", "constraints": {"fields": {
                "to": {"kind": "exact", "value": ["sister@example.com"]},
                "subject": {"kind": "exact", "value": "On my way"},
                "body": {"kind": "exact", "value": "See you soon."}}}}]}]
    }))
    .unwrap()
}

#[test]
fn a_watch_with_grants_starts_only_after_a_person_approves_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = steward_core::Steward::builder()
        .home(dir.path().join("home"))
        .watch_adapter(Arc::new(Platform))
        .open()
        .unwrap();
    // Created directly, it is refused; nothing is stored.
    let err = s.watches().unwrap().create(&definition(30), 1_000).unwrap_err();
    assert_eq!(err.code(), "WATCH_NEEDS_APPROVAL");
    let card = s.request_agent_watch(&definition(30), "agent:planner").unwrap();
    assert_eq!((card.tool.as_str(), card.status), (WATCH_GRANTS_TOOL, ApprovalStatus::Requested));
    assert!(card.summary.contains("may mail.send"), "{}", card.summary);
    assert!(card.summary.contains("sister@example.com"), "{}", card.summary);
    // The relative time was frozen before the card was shown.
    let trigger = &card.normalized_input["rules"][0]["trigger"];
    assert!(trigger["at"].is_string() && trigger.get("after_minutes").is_none(), "{trigger}");
    assert!(s.watches().unwrap().list(&WatchQuery::default()).unwrap().is_empty());
    // Starting it before the decision is refused.
    assert_eq!(s.create_approved_watch(card.id).unwrap_err().code(), "APPROVAL_NOT_APPROVED");
    // Only a person can decide it.
    assert!(s.human("agent:planner").is_err());
    let me = s.human("ada").unwrap();
    // Approving starts it, exactly as approved, once.
    let approved =
        s.decide_approval(card.id, DecisionKind::Approve, &DecisionInput::default(), &me).unwrap();
    assert_eq!(approved.status, ApprovalStatus::Approved);
    let watches = s.watches().unwrap().list(&WatchQuery::default()).unwrap();
    assert_eq!(watches.len(), 1);
    assert_eq!(watches[0].approval_id, Some(card.id));
    assert_eq!(serde_json::to_value(&watches[0].rules).unwrap(), card.normalized_input["rules"]);
    assert_eq!(s.create_approved_watch(card.id).unwrap().id, watches[0].id, "idempotent");

    // A denied card starts nothing.
    let other = s.request_agent_watch(&definition(60), "agent:planner").unwrap();
    s.decide_approval(other.id, DecisionKind::Deny, &DecisionInput::default(), &me).unwrap();
    assert_eq!(s.create_approved_watch(other.id).unwrap_err().code(), "APPROVAL_NOT_APPROVED");
    assert_eq!(s.watches().unwrap().list(&WatchQuery::default()).unwrap().len(), 1);

    // A person's edit is checked like the proposal: an unregistered tool is refused.
    let third = s.request_agent_watch(&definition(90), "agent:planner").unwrap();
    let mut edit = third.normalized_input.clone();
    edit["rules"][0]["grants"][0]["tool"] = json!("shell.run");
    let refused = s.decide_approval(
        third.id,
        DecisionKind::Approve,
        &DecisionInput { edit: Some(edit), ..DecisionInput::default() },
        &me,
    );
    assert_eq!(refused.unwrap_err().code(), "APPROVAL_PREFLIGHT_REJECTED");
    // Not a watch approval: refused.
    let no_grants: WatchDefinition = serde_json::from_value(json!({
        "source": "platform", "resource_ref": "r", "instruction": "tell me",
        "rules": [{"id": "p", "event": "x"}]}))
    .unwrap();
    assert_eq!(
        s.request_agent_watch(&no_grants, "agent:planner").unwrap_err().code(),
        "WATCH_INVALID"
    );
}
