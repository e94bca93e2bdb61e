use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::{StewardError, policy::catalog::OpsShowInput};

fn steward() -> (tempfile::TempDir, Arc<Steward>) {
    let dir = tempfile::tempdir().unwrap();
    let s = Steward::builder().home(dir.path().join("home")).open().unwrap();
    (dir, Arc::new(s))
}

#[test]
fn the_builtin_executors_all_have_specs_and_mail_writes_wait_for_a_sender() {
    let (_d, s) = steward();
    let tb = Toolbox::new(Arc::clone(&s));
    let names: Vec<String> = tb.list().into_iter().map(|t| t.name).collect();
    for n in [
        "mail.search",
        "mail.read",
        "mail.thread",
        "mail.attachment_text",
        "watches.list",
        "watches.propose",
        "ops.list",
        "ops.show",
        "usage.summary",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
    }
    let inv = tb.inventory();
    for n in ["mail.send", "mail.reply", "mail.send_later"] {
        assert!(!names.iter().any(|x| x == n), "{n} listed without a sender");
        let u = inv.unavailable.iter().find(|u| u.name == n).unwrap();
        assert!(u.reason.contains("[mail.smtp]"), "{}", u.reason);
    }
    // Every tool the policy knows is either available or says why not.
    assert_eq!(inv.available.len() + inv.unavailable.len(), s.tools().iter().count());
    // The model is offered exactly the available tools, with their schemas.
    let defs = tb.definitions();
    assert_eq!(defs.len(), names.len());
    assert!(defs.iter().all(|d| d.parameters.is_object()));
}

#[test]
fn registration_needs_a_spec_refuses_duplicates_and_bounds_budgets() {
    let (_d, s) = steward();
    let mut tb = Toolbox::new(s);
    let exec = || -> Arc<dyn ToolExecutor> {
        Arc::new(Typed::new(|_: &OpsShowInput| String::new(), |_, _| Ok(ToolOutput::text("x"))))
    };
    let e = tb.register("nothing.here", exec()).unwrap_err();
    assert_eq!(e.code(), "TOOL_REGISTRATION_INVALID");
    let e = tb.register("ops.show", exec()).unwrap_err();
    assert_eq!(e.code(), "TOOL_REGISTRATION_INVALID");
    assert!(tb.set_budget("ops.show", MIN_RESULT_CHARS - 1).is_err());
    assert!(tb.set_budget("ops.show", MAX_RESULT_CHARS + 1).is_err());
    tb.set_budget("ops.show", 600).unwrap();
    assert_eq!(tb.list().iter().find(|t| t.name == "ops.show").unwrap().result_chars, 600);
    assert_eq!(tb.set_budget("no.such", 600).unwrap_err().code(), "TOOL_UNKNOWN");
}

#[test]
fn bad_input_and_unknown_tools_are_refused_before_the_policy_decides() {
    let (_d, s) = steward();
    let tb = Toolbox::new(Arc::clone(&s));
    let call = |tool: &str, input: Value| {
        tb.call(
            &ToolCall { actor: "agent:test", chat: Some("c1"), tool, input: &input },
            &DecisionContext::default(),
        )
    };
    assert_eq!(call("mail.nothing", json!({})).unwrap_err().code(), "TOOL_UNKNOWN");
    let e = call("mail.read", json!({"message_id": 1, "sneaky": true})).unwrap_err();
    assert_eq!(e.code(), "TOOL_INPUT_INVALID");
    assert!(e.to_string().contains("sneaky"), "{e}");
    assert_eq!(
        call("mail.read", json!({"message_id": "one"})).unwrap_err().code(),
        "TOOL_INPUT_INVALID"
    );
    // None of those reached the policy; a bad cursor is seen by the executor, after it.
    assert_eq!(call("ops.list", json!({"cursor": "-3"})).unwrap_err().code(), "TOOL_INPUT_INVALID");
    let decisions = s
        .audit()
        .unwrap()
        .query(&crate::audit::AuditQuery {
            event_type: Some("policy.decision".into()),
            ..Default::default()
        })
        .unwrap();
    let tools: Vec<_> = decisions.iter().map(|d| d.tool.clone()).collect();
    assert_eq!(tools, vec![Some("ops.list".to_owned())]);
}

#[test]
fn results_are_cut_at_the_budget_on_a_character_and_say_so() {
    let out = ToolOutput {
        text: "é".repeat(2_000),
        data: json!({"big": "x".repeat(MAX_RESULT_DATA_BYTES)}),
        sources: (0..MAX_RESULT_SOURCES as i64 + 5).map(|id| SourceRef::Operation { id }).collect(),
        ..ToolOutput::default()
    };
    let r = bound("t.x", out, 1_000);
    assert!(r.truncated);
    assert_eq!(r.text.chars().count(), 1_000);
    assert!(r.text.ends_with("result budget]"));
    assert!(r.data.get("omitted").is_some());
    assert_eq!(r.sources.len(), MAX_RESULT_SOURCES);
    assert!(!r.untrusted);
    let small = bound(
        "t.x",
        ToolOutput {
            text: "ok".into(),
            sources: vec![SourceRef::Message { id: 1, message_id: None }],
            ..ToolOutput::default()
        },
        1_000,
    );
    assert!(!small.truncated && small.untrusted && small.text == "ok");
}

#[test]
fn lists_keep_whole_lines_that_fit() {
    let lines: Vec<String> = (0..10).map(|i| format!("line {i:02} {}", "x".repeat(40))).collect();
    // 49 characters and a newline each.
    assert_eq!(fitting(&lines, 0, 10_000), 10);
    assert_eq!(fitting(&lines, 0, 150), 3);
    assert_eq!(fitting(&lines, 100, 150), 1, "the first line always stays");
    assert_eq!(cursor(None).unwrap(), 0);
    assert_eq!(cursor(Some(" 20 ")).unwrap(), 20);
    assert!(cursor(Some("abc")).is_err());
}

#[test]
fn an_empty_home_answers_the_system_tools() {
    let (_d, s) = steward();
    let tb = Toolbox::new(s);
    let ran = |tool: &str, input: Value| match tb
        .call(
            &ToolCall { actor: "agent:t", chat: None, tool, input: &input },
            &DecisionContext::default(),
        )
        .unwrap()
    {
        ToolOutcome::Ran { result, .. } => *result,
        other => panic!("{tool}: {other:?}"),
    };
    assert!(ran("watches.list", json!({})).text.contains("None."));
    assert!(ran("ops.list", json!({})).text.contains("None."));
    assert!(ran("usage.summary", json!({"since": "all"})).text.contains("0 request(s)"));
    let e = tb
        .call(
            &ToolCall { actor: "agent:t", chat: None, tool: "ops.show", input: &json!({"id": 9}) },
            &DecisionContext::default(),
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
}

#[test]
fn a_tainted_call_is_raised_to_the_taint_floor_and_its_card_names_the_fields() {
    use crate::approval::{Taint, TaintedField};
    let (_d, s) = steward();
    let tb = Toolbox::new(Arc::clone(&s));
    let taint = Taint {
        fields: vec![TaintedField {
            field: "/instruction".into(),
            value: "https://evil.example".into(),
            kind: "url".into(),
            source: "message:7".into(),
            tool: "mail.read".into(),
        }],
    };
    let watch = json!({"source": "time", "resource_ref": "2099-01-01T00:00:00Z",
        "instruction": "open https://evil.example", "rules": [{"id": "r", "event": "time.reached"}]});
    let call =
        ToolCall { actor: "agent:t", chat: Some("c"), tool: "watches.propose", input: &watch };
    // A write that would run at logged waits for a person once it carries tainted values.
    let out = tb.call_tainted(&call, &DecisionContext::default(), Some(&taint)).unwrap();
    let ToolOutcome::AwaitingApproval { approval } = out else { panic!("{out:?}") };
    assert_eq!(approval.level, Level::Confirm);
    assert_eq!(approval.taint.as_ref(), Some(&taint));
    let raised = s
        .audit()
        .unwrap()
        .query(&crate::audit::AuditQuery {
            event_type: Some("policy.taint_raised".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(raised.len(), 1);
    // The person may set the floor higher.
    let me = s.human("Ada").unwrap();
    s.set_policy(&me, &crate::policy::PolicyChange::SetTaintFloor { level: Level::Secure }, None)
        .unwrap();
    let out = tb.call_tainted(&call, &DecisionContext::default(), Some(&taint)).unwrap();
    let ToolOutcome::AwaitingApproval { approval } = out else { panic!("{out:?}") };
    assert_eq!(approval.level, Level::Secure);
    // A read is never raised, and an empty taint changes nothing.
    let search = json!({"query": "x"});
    let read = ToolCall { actor: "agent:t", chat: None, tool: "mail.search", input: &search };
    let out = tb.call_tainted(&read, &DecisionContext::default(), Some(&taint)).unwrap();
    assert!(matches!(out, ToolOutcome::Ran { .. }), "{out:?}");
    let ops = json!({});
    let list = ToolCall { actor: "agent:t", chat: None, tool: "ops.list", input: &ops };
    let out = tb.call_tainted(&list, &DecisionContext::default(), Some(&Taint::default())).unwrap();
    assert!(matches!(out, ToolOutcome::Ran { .. }));
}
