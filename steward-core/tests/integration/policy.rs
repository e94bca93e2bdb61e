//! The policy in a home: audited decisions, versioned changes by a person or an approved
//! `policy.set`, and the reserved namespace no rule or grant can open.

use std::collections::BTreeSet;

use serde_json::json;
use steward_core::{
    POLICY_SET_TOOL, Steward, StewardError, ToolCall,
    approval::{NewApproval, Resolution},
    audit::AuditQuery,
    policy::{Decision, DecisionContext, DenyReason, Level, PolicyChange, Rule},
};

fn home() -> (tempfile::TempDir, Steward) {
    let dir = tempfile::tempdir().unwrap();
    let s = Steward::builder().home(dir.path().join("home")).open().unwrap();
    (dir, s)
}

fn call<'a>(tool: &'a str, input: &'a serde_json::Value) -> ToolCall<'a> {
    ToolCall { actor: "agent:assistant", chat: Some("c1"), tool, input }
}

#[test]
fn the_builtin_catalog_registers_and_sending_is_gated() {
    let (_d, s) = home();
    for name in ["mail.send", "mail.delete", "calendar.create_event", "files.share", "policy.set"] {
        assert!(s.tools().get(name).is_some(), "{name} missing from the catalog");
    }
    let schema = &s.tools().get("mail.send").unwrap().input_schema;
    assert_eq!(schema["properties"]["to"]["maxItems"], 50, "{schema}");
    assert_eq!(schema["additionalProperties"], false);
    let input = json!({"to": ["a@example.com"], "subject": "s", "body": "b"});
    let d = s.decide(&call("mail.send", &input), &DecisionContext::default()).unwrap();
    assert_eq!(d, Decision::Gate { level: Level::Confirm });
    let read = json!({"query": "tax"});
    let d = s.decide(&call("mail.search", &read), &DecisionContext::default()).unwrap();
    assert_eq!(d, Decision::Allow { level: Level::Auto });
    // An input no approval card could hold is denied before the policy is asked.
    let huge = json!({"query": "x".repeat(300 * 1024)});
    let d = s.decide(&call("mail.search", &huge), &DecisionContext::default()).unwrap();
    assert!(
        matches!(d, Decision::Deny { reason: DenyReason::InputTooLarge { bytes } } if bytes > 300 * 1024)
    );
    // Every decision is in the audit trail, the denial-free ones included.
    let rows = s
        .audit()
        .unwrap()
        .query(&AuditQuery { event_type: Some("policy.decision".into()), ..Default::default() })
        .unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].risk, "high");
    assert_eq!(rows[0].payload["input"], "(oversized)");
    assert_eq!(rows[1].tool.as_deref(), Some("mail.search"));
    assert_eq!(rows[1].risk, "low");
    assert_eq!(rows[2].risk, "medium");
    assert_eq!(rows[2].payload["policy_version"], 0);
}

#[test]
fn a_person_changes_the_policy_in_versions_and_stale_changes_are_refused() {
    let (_d, s) = home();
    let me = s.human("emma").unwrap();
    let deny = PolicyChange::DenyNamespace { prefix: "files".into() };
    let v1 = s.set_policy(&me, &deny, Some(0)).unwrap();
    assert_eq!(v1.version, 1);
    assert_eq!(v1.changed_by.as_deref(), Some("emma"));
    // The same change again changes nothing and is refused, leaving the version alone.
    let err = s.set_policy(&me, &deny, None).unwrap_err();
    assert_eq!(err.code(), "POLICY_NO_CHANGE");
    // A change based on version 0 lost the race.
    let later = PolicyChange::SetLevel { tool: "mail.send".into(), level: Level::Secure };
    let err = s.set_policy(&me, &later, Some(0)).unwrap_err();
    assert_eq!(err.code(), "POLICY_VERSION_CONFLICT");
    assert_eq!(s.policy().unwrap().version, 1);
    let v2 = s.set_policy(&me, &later, Some(1)).unwrap();
    assert_eq!(v2.version, 2);
    // Bad names change nothing.
    let bad = PolicyChange::SetLevel { tool: "Mail Send".into(), level: Level::Auto };
    assert_eq!(s.set_policy(&me, &bad, None).unwrap_err().code(), "POLICY_BAD_TOOL_NAME");
    assert_eq!(s.policy().unwrap().version, 2);

    // The stored policy is what decides, in a fresh handle too.
    let reopened = Steward::builder().home(s.home()).open().unwrap();
    let input = json!({"file_id": "13"});
    let d = reopened.decide(&call("files.delete", &input), &DecisionContext::default()).unwrap();
    assert_eq!(d, Decision::Deny { reason: DenyReason::Namespace { prefix: "files.".into() } });
    let mail = json!({"to": ["a@example.com"], "subject": "s", "body": "b"});
    let d = reopened.decide(&call("mail.send", &mail), &DecisionContext::default()).unwrap();
    assert_eq!(d, Decision::Gate { level: Level::Secure });
    let history = reopened.policy_store().unwrap().history(10).unwrap();
    assert_eq!(history.iter().map(|v| v.version).collect::<Vec<_>>(), vec![2, 1]);
    let changes = reopened
        .audit()
        .unwrap()
        .query(&AuditQuery { event_type: Some("policy.changed".into()), ..Default::default() })
        .unwrap();
    assert_eq!(changes.len(), 2);
    assert!(changes.iter().all(|r| r.actor == "emma" && r.risk == "high"));
}

#[test]
fn the_overview_returns_as_many_earlier_versions_as_asked_up_to_the_cap() {
    let (_d, s) = home();
    let me = s.human("emma").unwrap();
    let max = steward_core::policy::MAX_POLICY_HISTORY;
    // One more change than the cap: version max + 1 is in force, max versions precede it.
    for i in 0..=max {
        let level = if i % 2 == 0 { Level::Secure } else { Level::Confirm };
        s.set_policy(&me, &PolicyChange::SetLevel { tool: "mail.send".into(), level }, None)
            .unwrap();
    }
    let top = u64::try_from(max).unwrap() + 1;
    let o = s.policy_overview(max).unwrap();
    assert_eq!(o.current.version, top);
    let versions: Vec<u64> = o.history.iter().map(|v| v.version).collect();
    assert_eq!(versions, (1..top).rev().collect::<Vec<_>>(), "every earlier version, none lost");
    let o = s.policy_overview(3).unwrap();
    assert_eq!(
        o.history.iter().map(|v| v.version).collect::<Vec<_>>(),
        [top - 1, top - 2, top - 3]
    );
    assert!(s.policy_overview(0).unwrap().history.is_empty());
    assert_eq!(s.policy_overview(max + 1).unwrap_err().code(), "POLICY_OUT_OF_RANGE");
}

#[test]
fn an_agents_policy_change_needs_an_approval_and_applies_exactly_what_was_approved() {
    let (_d, s) = home();
    let change = PolicyChange::SetRule { tool: "mail.send".into(), rule: Rule::Allow };
    let input = serde_json::to_value(&change).unwrap();
    // The policy itself gates policy.set at confirm, even after a person allowed it by rule.
    let me = s.human("emma").unwrap();
    s.set_policy(
        &me,
        &PolicyChange::SetRule { tool: POLICY_SET_TOOL.into(), rule: Rule::Allow },
        None,
    )
    .unwrap();
    let d = s.decide(&call(POLICY_SET_TOOL, &input), &DecisionContext::default()).unwrap();
    assert_eq!(d, Decision::Gate { level: Level::Confirm });
    // A background turn can never be granted it.
    let grants: BTreeSet<String> = [POLICY_SET_TOOL.to_owned()].into();
    let headless = DecisionContext { headless_grants: Some(&grants), actor: None };
    let d = s.decide(&call(POLICY_SET_TOOL, &input), &headless).unwrap();
    assert_eq!(d, Decision::Deny { reason: DenyReason::NotGranted });

    let approvals = s.approvals().unwrap();
    let req = approvals
        .request(
            &NewApproval {
                chat: Some("c1".into()),
                requested_by: "agent:assistant".into(),
                tool: POLICY_SET_TOOL.into(),
                input,
                summary: "Let mail.send run without asking".into(),
                level: Level::Confirm,
                timeout_secs: None,
                taint: None,
            },
            None,
            steward_core_now(),
        )
        .unwrap();
    // Not yet approved: nothing changes.
    let err = s.apply_approved_policy_change(req.id).unwrap_err();
    assert_eq!(err.code(), "APPROVAL_NOT_APPROVED");
    assert_eq!(s.policy().unwrap().version, 1);
    // The person narrows it to a gate at logged... which the floor raises back to confirm.
    let edited = PolicyChange::SetLevel { tool: "mail.send".into(), level: Level::Logged };
    approvals
        .resolve(
            req.id,
            &Resolution::Edit(serde_json::to_value(&edited).unwrap()),
            None,
            &me,
            None,
            None,
            steward_core_now(),
        )
        .unwrap();
    let v = s.apply_approved_policy_change(req.id).unwrap();
    assert_eq!(v.change, Some(edited.clone()));
    assert_eq!(v.approval_id, Some(req.id));
    assert_eq!(v.changed_by.as_deref(), Some("emma"));
    // An approval applies once: replaying it after a newer change cannot undo that change.
    s.set_policy(&me, &PolicyChange::ClearLevel { tool: "mail.send".into() }, None).unwrap();
    let replay = s.apply_approved_policy_change(req.id).unwrap_err();
    assert_eq!(replay.code(), "POLICY_APPROVAL_ALREADY_APPLIED");
    assert!(!s.policy().unwrap().policy.overrides.contains_key("mail.send"));
    s.set_policy(&me, &edited, None).unwrap();
    let mail = json!({"to": ["a@example.com"], "subject": "s", "body": "b"});
    let d = s.decide(&call("mail.send", &mail), &DecisionContext::default()).unwrap();
    assert_eq!(d, Decision::Gate { level: Level::Confirm }, "destructive floor holds");
    // An approval for another tool cannot be replayed as a policy change.
    let other = approvals
        .request(
            &NewApproval {
                chat: None,
                requested_by: "agent:assistant".into(),
                tool: "mail.send".into(),
                input: mail,
                summary: "send".into(),
                level: Level::Confirm,
                timeout_secs: None,
                taint: None,
            },
            None,
            steward_core_now(),
        )
        .unwrap();
    approvals
        .resolve(other.id, &Resolution::Approve, None, &me, None, None, steward_core_now())
        .unwrap();
    assert!(s.apply_approved_policy_change(other.id).is_err());
    assert_eq!(s.policy().unwrap().version, 4);
}

fn steward_core_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}
