//! The tool registry over a real mirror and real SMTP (aiosmtpd on loopback): bounded results
//! that continue by cursor and name their sources, the permission order (bad input refused
//! before the policy, a denial runs nothing, a gate runs nothing until a person decides), and
//! approved writes that run exactly the approved input, once.

use std::sync::Arc;

use serde_json::{Value, json};
use steward_connectors::{
    mail::{
        demo::{DemoOptions, generate_maildir},
        smtp::{Security, SmtpConfig, SmtpSender},
    },
    testing::{SinkOptions, SmtpSink},
};
use steward_core::{
    Steward, StewardError, ToolCall,
    approval::{DecisionInput, DecisionKind},
    audit::AuditQuery,
    outbox::Sender,
    policy::{DecisionContext, DenyReason},
    search::SearchRequest,
    tools::{SourceRef, ToolOutcome, ToolResult, Toolbox},
};

use super::fixtures::{Mail, message_rowid, mirror_maildir, steward, write};

const LONG_ID: &str = "long.tools@example.org";
const ATTACH_ID: &str = "attach.tools@example.org";

struct Rig {
    dir: tempfile::TempDir,
    steward: Arc<Steward>,
}

fn multipart() -> Vec<u8> {
    concat!(
        "From: Carla <carla@example.org>\nTo: Ada <ada@example.org>\n",
        "Subject: Minutes and invoice\nDate: Tue, 7 Jan 2025 09:00:00 +0000\n",
        "Message-ID: <attach.tools@example.org>\nMIME-Version: 1.0\n",
        "Content-Type: multipart/mixed; boundary=\"b1\"\n\n",
        "--b1\nContent-Type: text/plain; charset=utf-8\n\nSee the attachments.\n",
        "--b1\nContent-Type: text/plain; charset=utf-8\n",
        "Content-Disposition: attachment; filename=\"minutes.txt\"\n\n",
        "Minutes: the budget is approved. Next meeting on Friday.\n",
        "--b1\nContent-Type: text/html; charset=utf-8\n",
        "Content-Disposition: attachment; filename=\"notice.html\"\n\n",
        "<html><style>b{}</style><p>Office closed &amp; locked</p><script>steal()</script></html>\n",
        "--b1\nContent-Type: application/pdf\nContent-Transfer-Encoding: base64\n",
        "Content-Disposition: attachment; filename=\"invoice.pdf\"\n\n",
        "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PD4+CmVuZG9iagp0cmFpbGVyCjw8Pj4KJSVFT0YK\n",
        "--b1--\n"
    )
    .as_bytes()
    .to_vec()
}

fn rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    let mut opts = DemoOptions::new(120);
    opts.malformed = false;
    generate_maildir(&md, &opts).unwrap();
    let mut long = Mail::new(LONG_ID, "The long report", "Mon, 6 Jan 2025 10:00:00 +0000");
    let body: String = (0..250).map(|i| format!("Paragraph {i}: perché sì, già fatto. ")).collect();
    long.body = &body;
    write(&md.join("cur/long:2,S"), &long.bytes(), 100);
    write(&md.join("cur/attach:2,S"), &multipart(), 100);
    let s = steward(dir.path());
    mirror_maildir(&s, &md);
    Rig { dir, steward: Arc::new(s) }
}

fn sender() -> Sender {
    Sender { account: "a".into(), from: "ada@example.org".into(), from_name: Some("Ada".into()) }
}

impl Rig {
    fn toolbox(&self) -> Toolbox {
        Toolbox::new(Arc::clone(&self.steward))
    }

    fn mailing(&self) -> (Toolbox, SmtpSink) {
        let sink = SmtpSink::start(self.dir.path(), &SinkOptions::default());
        let smtp =
            SmtpSender::new(SmtpConfig::new("127.0.0.1", sink.port, Security::Plain, sender()))
                .unwrap();
        (self.toolbox().with_mail_sender(Arc::new(smtp), sender()), sink)
    }

    fn id(&self, message_id: &str) -> i64 {
        message_rowid(self.dir.path(), message_id)
    }

    fn executed(&self, tool: &str) -> usize {
        let q = AuditQuery { event_type: Some("tool.executed".into()), ..AuditQuery::default() };
        let events = self.steward.audit().unwrap().query(&q).unwrap();
        events.iter().filter(|e| e.tool.as_deref() == Some(tool)).count()
    }
}

fn call(tb: &Toolbox, tool: &str, input: Value) -> ToolOutcome {
    tb.call(
        &ToolCall { actor: "agent:test", chat: Some("chat-1"), tool, input: &input },
        &DecisionContext::default(),
    )
    .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

fn ran(tb: &Toolbox, tool: &str, input: Value) -> ToolResult {
    match call(tb, tool, input) {
        ToolOutcome::Ran { result, .. } => *result,
        other => panic!("{tool} did not run: {other:?}"),
    }
}

#[test]
fn search_pages_fit_the_budget_continue_by_cursor_and_name_their_messages() {
    let r = rig();
    let mut tb = r.toolbox();
    tb.set_budget("mail.search", 700).unwrap();
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..15 {
        let mut input = json!({"query": "", "limit": 12});
        if let Some(c) = &cursor {
            input["cursor"] = json!(c);
        }
        let res = ran(&tb, "mail.search", input);
        assert!(res.text.chars().count() <= 700, "{} chars", res.text.chars().count());
        assert!(!res.truncated, "a list stops at whole lines");
        assert!(res.untrusted, "mail is untrusted data");
        let page: Vec<i64> = res
            .sources
            .iter()
            .map(|s| match s {
                SourceRef::Message { id, message_id } => {
                    assert!(message_id.is_some(), "the demo's mail has Message-IDs");
                    *id
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(!page.is_empty());
        for id in &page {
            assert!(res.text.contains(&format!("#{id} ")), "the text names #{id}");
        }
        ids.extend(page);
        cursor = res.cursor;
        if cursor.is_none() {
            break;
        }
    }
    // The pages are exactly the search's own order, without gaps or repeats.
    let direct =
        r.steward.search(&SearchRequest { limit: 100, ..SearchRequest::default() }).unwrap();
    let direct: Vec<i64> = direct.messages.iter().map(|m| m.id).take(ids.len()).collect();
    assert_eq!(ids, direct);
    assert!(ids.len() > 12, "the budget split pages and the cursor went on: {}", ids.len());
}

#[test]
fn a_long_message_is_read_whole_through_cursors_within_the_budget() {
    let r = rig();
    let mut tb = r.toolbox();
    tb.set_budget("mail.read", 1_000).unwrap();
    let id = r.id(LONG_ID);
    let full = r
        .steward
        .mirror()
        .read_message(id, steward_core::mirror::BodyWindow { offset: 0, max_chars: 12_000 })
        .unwrap();
    assert!(full.body.next_offset.is_none() && full.body.total_chars > 5_000);
    let mut body = String::new();
    let mut cursor: Option<String> = None;
    let mut reads = 0;
    loop {
        let mut input = json!({"message_id": id});
        if let Some(c) = &cursor {
            input["cursor"] = json!(c);
        }
        let res = ran(&tb, "mail.read", input);
        reads += 1;
        assert!(res.text.chars().count() <= 1_000);
        assert!(res.text.contains("Subject: The long report"));
        assert!(res.text.contains(&format!("Message-ID: <{LONG_ID}>")));
        assert_eq!(res.sources[0], SourceRef::Message { id, message_id: Some(LONG_ID.to_owned()) });
        let (_, rest) = res.text.split_once("\n\n").unwrap();
        let part = rest.split("\n(more: cursor").next().unwrap();
        body.push_str(part);
        cursor = res.cursor;
        if cursor.is_none() {
            break;
        }
        assert!(reads < 50, "the cursor must advance");
    }
    assert_eq!(body, full.body.text);
    assert!(reads >= 6, "{reads} reads");
}

#[test]
fn attachments_are_read_as_text_markup_dropped_and_documents_refused_with_a_code() {
    let r = rig();
    let tb = r.toolbox();
    let id = r.id(ATTACH_ID);
    let read = ran(&tb, "mail.read", json!({"message_id": id}));
    assert!(
        read.text.contains("minutes.txt") && read.text.contains("invoice.pdf"),
        "{}",
        read.text
    );
    let attachment = |name: &str| {
        read.sources
            .iter()
            .find_map(|s| match s {
                SourceRef::Attachment { position, name: Some(n), .. } if n == name => {
                    Some(*position)
                }
                _ => None,
            })
            .unwrap()
    };
    let minutes = ran(
        &tb,
        "mail.attachment_text",
        json!({"message_id": id, "position": attachment("minutes.txt")}),
    );
    assert!(minutes.text.contains("the budget is approved"), "{}", minutes.text);
    assert!(minutes.untrusted);
    let html = ran(
        &tb,
        "mail.attachment_text",
        json!({"message_id": id, "position": attachment("notice.html")}),
    );
    assert!(html.text.contains("Office closed & locked"), "{}", html.text);
    assert!(!html.text.contains("steal") && !html.text.contains("<p>"), "{}", html.text);
    let pdf = tb
        .call(
            &ToolCall {
                actor: "agent:test",
                chat: None,
                tool: "mail.attachment_text",
                input: &json!({"message_id": id, "position": attachment("invoice.pdf")}),
            },
            &DecisionContext::default(),
        )
        .unwrap_err();
    assert_eq!(pdf.code(), "ATTACHMENT_TEXT_UNSUPPORTED", "{pdf}");
    let missing = tb
        .call(
            &ToolCall {
                actor: "agent:test",
                chat: None,
                tool: "mail.attachment_text",
                input: &json!({"message_id": id, "position": 99}),
            },
            &DecisionContext::default(),
        )
        .unwrap_err();
    assert_eq!(missing.code(), "ATTACHMENT_NOT_FOUND");
    let thread = ran(&tb, "mail.thread", json!({"thread_id": read.data["thread_id"]}));
    assert!(thread.text.contains(&format!("#{id} ")), "{}", thread.text);
}

#[test]
fn a_denied_or_ungranted_call_runs_nothing() {
    let r = rig();
    let tb = r.toolbox();
    let me = r.steward.human("Ada").unwrap();
    let rule = steward_core::ToolRuleInput {
        level: "deny".into(),
        reason: Some("not today".into()),
        expect_version: None,
    };
    r.steward.set_tool_rule(&me, "mail.read", &rule).unwrap();
    let id = r.id(LONG_ID);
    match call(&tb, "mail.read", json!({"message_id": id})) {
        ToolOutcome::Denied { reason: DenyReason::Rule { reason } } => {
            assert_eq!(reason, "not today")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(r.executed("mail.read"), 0);
    // A background turn may run only what its rule granted.
    let granted = std::collections::BTreeSet::from(["ops.list".to_owned()]);
    let headless = DecisionContext { headless_grants: Some(&granted), actor: None };
    let input = json!({"query": "report"});
    let out = tb
        .call(
            &ToolCall { actor: "watch:1", chat: None, tool: "mail.search", input: &input },
            &headless,
        )
        .unwrap();
    assert!(matches!(out, ToolOutcome::Denied { reason: DenyReason::NotGranted }), "{out:?}");
    assert_eq!(r.executed("mail.search"), 0);
}

#[test]
fn a_gated_send_runs_only_the_approved_input_once_and_a_denied_one_never() {
    let r = rig();
    let (tb, sink) = r.mailing();
    let input = json!({"to": ["bob@example.org"], "subject": "Budget", "body": "v1"});
    let ToolOutcome::AwaitingApproval { approval } = call(&tb, "mail.send", input.clone()) else {
        panic!("mail.send must wait for a person");
    };
    assert_eq!(approval.summary, "Send \"Budget\" to bob@example.org");
    assert_eq!(approval.chat.as_deref(), Some("chat-1"));
    // Nothing ran: no operation, no delivery, and running it now is refused.
    assert!(r.steward.list_write_operations(None, 0, 10).unwrap().is_empty());
    let early = tb.run_approved(approval.id, "agent:test").unwrap_err();
    assert_eq!(early.code(), "APPROVAL_NOT_APPROVED");
    assert_eq!(sink.deliveries().len(), 0);
    // The person edits the body (checked again by the tool's preflight) and approves.
    let me = r.steward.human("Ada").unwrap();
    let bad_edit = DecisionInput {
        edit: Some(json!({"to": ["bob@example.org"], "subject": "Budget", "body": "x", "evil": 1})),
        ..DecisionInput::default()
    };
    assert!(r.steward.decide_approval(approval.id, DecisionKind::Approve, &bad_edit, &me).is_err());
    let edit = DecisionInput {
        edit: Some(json!({"to": ["bob@example.org"], "subject": "Budget", "body": "v2, edited"})),
        ..DecisionInput::default()
    };
    r.steward.decide_approval(approval.id, DecisionKind::Approve, &edit, &me).unwrap();
    let first = tb.run_approved(approval.id, "agent:test").unwrap();
    let SourceRef::Operation { id: op_id } = first.sources[0] else { panic!("{first:?}") };
    let op = r.steward.read_write_operation(op_id).unwrap();
    assert_eq!(op.input["body"], "v2, edited");
    assert_eq!(op.input["from"], "ada@example.org", "the sender is the host's, never the model's");
    assert_eq!(op.approval_id, Some(approval.id));
    let again = tb.run_approved(approval.id, "agent:test").unwrap();
    assert_eq!(again.sources, first.sources, "the same operation, not a second mail");
    let delivered = sink.deliveries();
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0]["rcpt_tos"], json!(["bob@example.org"]));
    // A denied request never runs.
    let ToolOutcome::AwaitingApproval { approval: denied } = call(&tb, "mail.send", input) else {
        panic!()
    };
    r.steward
        .decide_approval(denied.id, DecisionKind::Deny, &DecisionInput::default(), &me)
        .unwrap();
    assert_eq!(
        tb.run_approved(denied.id, "agent:test").unwrap_err().code(),
        "APPROVAL_NOT_APPROVED"
    );
    assert_eq!(sink.deliveries().len(), 1);
    assert_eq!(r.steward.list_write_operations(None, 0, 10).unwrap().len(), 1);
    // The journal tools show it.
    let ops = ran(&tb, "ops.list", json!({}));
    assert!(ops.text.contains(&format!("#{op_id} ")), "{}", ops.text);
    let shown = ran(&tb, "ops.show", json!({"id": op_id}));
    assert!(shown.text.contains(&format!("request #{}", approval.id)), "{}", shown.text);
}

#[test]
fn an_outside_agents_call_is_pending_until_approved_then_runs_once_and_a_declined_one_never() {
    use steward_core::tools::{ClientOutcome, client_actor};
    let r = rig();
    let (tb, sink) = r.mailing();
    let actor = client_actor("desk-agent");
    let send = |input: &Value| {
        tb.call_for_client(&ToolCall { actor: &actor, chat: None, tool: "mail.send", input })
            .unwrap()
    };
    let input = json!({"to": ["bob@example.org"], "subject": "Budget", "body": "v1"});
    let ClientOutcome::Pending { approval } = send(&input) else { panic!("must wait") };
    assert_eq!(approval.requested_by, "agent:mcp:desk-agent");
    let ClientOutcome::Pending { approval: same } = send(&input) else { panic!("still waits") };
    assert_eq!(same.id, approval.id, "asking again makes no second request");
    assert_eq!(sink.deliveries().len(), 0);
    // The same input written in another key order is the same call.
    let reordered = json!({"body": "v1", "subject": "Budget", "to": ["bob@example.org"]});
    let ClientOutcome::Pending { approval: also } = send(&reordered) else { panic!() };
    assert_eq!(also.id, approval.id);
    let me = r.steward.human("Ada").unwrap();
    r.steward
        .decide_approval(approval.id, DecisionKind::Approve, &DecisionInput::default(), &me)
        .unwrap();
    // Another agent's identical call does not consume it.
    let other = tb
        .call_for_client(&ToolCall {
            actor: "agent:mcp:other",
            chat: None,
            tool: "mail.send",
            input: &input,
        })
        .unwrap();
    assert!(matches!(other, ClientOutcome::Pending { .. }), "{other:?}");
    let ClientOutcome::Ran { approval: ran_under, .. } = send(&input) else { panic!("runs") };
    assert_eq!(ran_under, Some(approval.id));
    assert_eq!(sink.deliveries().len(), 1);
    let ClientOutcome::Pending { approval: next } = send(&input) else { panic!("asks anew") };
    assert_ne!(next.id, approval.id, "run once: a third call is a new request");
    assert_eq!(sink.deliveries().len(), 1);
    // Declined: refused from then on, asking nobody.
    r.steward.decide_approval(next.id, DecisionKind::Deny, &DecisionInput::default(), &me).unwrap();
    let ClientOutcome::Declined { approval: no } = send(&input) else { panic!("declined") };
    assert_eq!(no.id, next.id);
    let pending = r.steward.list_approvals(&Default::default()).unwrap();
    assert_eq!(pending.len(), 3, "no request after the denial: {pending:?}");
    assert_eq!(sink.deliveries().len(), 1);
    // A denied namespace is not even listed.
    assert!(tb.list_for_client(&actor).unwrap().iter().any(|t| t.name == "mail.send"));
    r.steward
        .set_policy(
            &me,
            &steward_core::policy::PolicyChange::DenyNamespace { prefix: "mail".into() },
            None,
        )
        .unwrap();
    let listed = tb.list_for_client(&actor).unwrap();
    assert!(!listed.iter().any(|t| t.name.starts_with("mail.")), "{listed:?}");
    assert!(listed.iter().any(|t| t.name == "ops.list"));
    r.steward
        .set_policy(
            &me,
            &steward_core::policy::PolicyChange::UndenyNamespace { prefix: "mail".into() },
            None,
        )
        .unwrap();
    // An agent denial: every MCP client, one tool; other agents keep it.
    let deny = |rule: &str| steward_core::policy::PolicyChange::DenyAgent { rule: rule.into() };
    for bad in ["mail.send", "human:ada:mail.send", "agent:mcp:*:mail", "agent:*x:mail.send"] {
        let e = r.steward.set_policy(&me, &deny(bad), None).unwrap_err();
        assert_eq!(e.code(), "POLICY_BAD_AGENT_RULE", "{bad}");
    }
    r.steward.set_policy(&me, &deny("agent:mcp:*:mail.send"), None).unwrap();
    let listed = tb.list_for_client(&actor).unwrap();
    assert!(
        !listed.iter().any(|t| t.name == "mail.send")
            && listed.iter().any(|t| t.name == "mail.search")
    );
    let refused = send(&json!({"to": ["carol@example.org"], "subject": "Hi", "body": "x"}));
    assert!(
        matches!(&refused, ClientOutcome::Denied { reason: DenyReason::Agent { rule } } if rule == "agent:mcp:*:mail.send"),
        "{refused:?}"
    );
    let ToolOutcome::AwaitingApproval { .. } =
        call(&tb, "mail.send", json!({"to": ["carol@example.org"], "subject": "Hi", "body": "x"}))
    else {
        panic!("another agent is still only gated")
    };
    assert_eq!(sink.deliveries().len(), 1);
}

#[test]
fn an_outside_agents_gated_call_can_wait_for_the_decision_and_every_call_is_counted_per_agent() {
    use steward_core::tools::{ClientOutcome, MAX_CLIENT_WAIT_SECS, client_actor};
    let r = rig();
    let (mut tb, sink) = r.mailing();
    let actor = client_actor("waiting-agent");
    let input = json!({"to": ["bob@example.org"], "subject": "Waited", "body": "v1"});
    let call = ToolCall { actor: &actor, chat: None, tool: "mail.send", input: &input };
    let never = || false;
    // No wait configured: pending at once, nobody told.
    let mut told = 0;
    let first = tb.call_for_client_waiting(&call, &never, &mut |_, _| told += 1).unwrap();
    assert!(matches!(first, ClientOutcome::Pending { .. }), "{first:?}");
    assert_eq!(told, 0);
    assert!(tb.set_client_wait(MAX_CLIENT_WAIT_SECS + 1).is_err());
    tb.set_client_wait(30).unwrap();
    // A cancelled wait answers pending.
    let cancelled = tb.call_for_client_waiting(&call, &|| true, &mut |_, _| {}).unwrap();
    assert!(matches!(cancelled, ClientOutcome::Pending { .. }), "{cancelled:?}");
    // The person approves while the call waits: it runs, once, and answers the result.
    let me = r.steward.human("Ada").unwrap();
    let steward = Arc::clone(&r.steward);
    let (tx, rx) = std::sync::mpsc::channel::<i64>();
    let person = std::thread::spawn(move || {
        let id = rx.recv().unwrap();
        steward.decide_approval(id, DecisionKind::Approve, &DecisionInput::default(), &me).unwrap();
    });
    let waited = tb
        .call_for_client_waiting(&call, &never, &mut |a, _| {
            told += 1;
            tx.send(a.id).unwrap();
        })
        .unwrap();
    person.join().unwrap();
    assert!(matches!(waited, ClientOutcome::Ran { approval: Some(_), .. }), "{waited:?}");
    assert_eq!(told, 1, "told once, when the wait began");
    assert_eq!(sink.deliveries().len(), 1);
    // Every call is in the usage ledger under the agent.
    let report = r.steward.usage_report("all", steward_core::time::now_secs() + 1).unwrap();
    let mine = report.by_agent.iter().find(|a| a.agent == "agent:mcp:waiting-agent").unwrap();
    assert_eq!((mine.calls, mine.pending, mine.ran), (4, 3, 1), "{mine:?}");
}

#[test]
fn an_approved_reply_answers_in_the_thread_and_a_later_send_waits_for_its_time() {
    let r = rig();
    let (tb, sink) = r.mailing();
    let me = r.steward.human("Ada").unwrap();
    let parent = r.id(ATTACH_ID);
    let approve = |outcome: ToolOutcome| {
        let ToolOutcome::AwaitingApproval { approval } = outcome else { panic!("{outcome:?}") };
        r.steward
            .decide_approval(approval.id, DecisionKind::Approve, &DecisionInput::default(), &me)
            .unwrap();
        tb.run_approved(approval.id, "agent:test").unwrap()
    };
    let reply = approve(call(&tb, "mail.reply", json!({"message_id": parent, "body": "Thanks!"})));
    let SourceRef::Operation { id } = reply.sources[0] else { panic!() };
    let op = r.steward.read_write_operation(id).unwrap();
    assert_eq!(op.input["in_reply_to"], ATTACH_ID);
    assert_eq!(op.input["to"], json!(["carla@example.org"]));
    assert_eq!(sink.deliveries().len(), 1);
    // A send_at that cannot be read is refused before anything is asked.
    let bad = tb
        .call(
            &ToolCall {
                actor: "agent:test",
                chat: None,
                tool: "mail.send_later",
                input: &json!({"to": ["bob@example.org"], "subject": "s", "body": "b", "send_at": "soon"}),
            },
            &DecisionContext::default(),
        )
        .unwrap_err();
    assert_eq!(bad.code(), "TOOL_INPUT_INVALID");
    let later = approve(call(
        &tb,
        "mail.send_later",
        json!({"to": ["bob@example.org"], "subject": "Later", "body": "b", "send_at": "2099-01-01"}),
    ));
    assert!(later.text.contains("scheduled for 2099-01-01"), "{}", later.text);
    assert_eq!(sink.deliveries().len(), 1, "a scheduled mail is not sent now");
}

#[test]
fn a_home_sets_tool_budgets_from_its_config_and_refuses_bad_ones() {
    use steward_connectors::home;
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("home");
    std::fs::create_dir_all(&h).unwrap();
    let config = |text: &str| std::fs::write(h.join("config.toml"), text).unwrap();
    config("[tools.result_chars]\n\"mail.read\" = 900\n");
    let open = || home::toolbox(Arc::new(home::open(Some(h.clone())).unwrap()));
    let tb = open().unwrap();
    let read = tb.list().into_iter().find(|t| t.name == "mail.read").unwrap();
    assert_eq!(read.result_chars, 900);
    let inv = tb.inventory();
    assert!(inv.unavailable.iter().any(|u| u.name == "mail.send"), "no SMTP is configured");
    assert!(inv.available.iter().any(|t| t.name == "trains.next"));
    config("[tools.result_chars]\n\"mail.read\" = 10\n");
    assert_eq!(open().unwrap_err().code(), "TOOL_REGISTRATION_INVALID");
    config("[tools.result_chars]\n\"mail.nope\" = 1000\n");
    assert_eq!(open().unwrap_err().code(), "TOOL_UNKNOWN");
    config("[tools]\nbudget = 3\n");
    assert!(open().is_err(), "an unknown [tools] key is refused");
}

#[test]
fn a_home_sets_its_limits_from_its_config_and_refuses_bad_ones_by_name() {
    use steward_connectors::home;
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("home");
    std::fs::create_dir_all(&h).unwrap();
    let config = |text: &str| std::fs::write(h.join("config.toml"), text).unwrap();
    config("[limits]\ningest_batch = 2048\nbusy_timeout_ms = 9000\n");
    let s = home::open(Some(h.clone())).unwrap();
    assert_eq!((s.limits().ingest_batch, s.limits().busy_timeout_ms), (2048, 9000));
    assert_eq!(s.limits().max_references, steward_core::Limits::default().max_references);
    drop(s);
    for (bad, named) in [
        ("[limits]\ningest_batch = 0\n", "ingest_batch"),
        ("[limits]\nreader_connections = 1000\n", "reader_connections"),
        ("[limits]\nturbo = 1\n", "turbo"),
        ("[limits]\ningest_batch = \"many\"\n", "ingest_batch"),
    ] {
        config(bad);
        let e = home::open(Some(h.clone())).unwrap_err();
        assert_eq!(e.code(), "STEWARD_INVALID_LIMIT", "{bad}: {e}");
        assert!(e.to_string().contains(named), "{bad}: {e}");
    }
}

#[test]
fn a_home_sets_the_agents_tier_and_bounds_from_its_config_and_refuses_bad_ones() {
    use steward_connectors::home;
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("home");
    std::fs::create_dir_all(&h).unwrap();
    let config = |text: &str| std::fs::write(h.join("config.toml"), text).unwrap();
    let open = || home::agent(Arc::new(home::open(Some(h.clone())).unwrap()));
    config("[agent]\ntier = \"tier-4\"\nmax_model_calls = 5\ndeadline_secs = 60\n");
    let agent = open().unwrap();
    assert_eq!(agent.config().capability, Some(steward_core::llm::Capability::Tier4));
    assert_eq!(agent.config().max_model_calls, 5);
    assert_eq!(agent.config().deadline, std::time::Duration::from_secs(60));
    drop(agent);
    for bad in [
        "[agent]\ntier = \"tier-9\"\n",
        "[agent]\ntier = \"local-embed\"\n",
        "[agent]\nmax_model_calls = 0\n",
        "[agent]\nmax_concurrent_turns = 1000\n",
        "[agent]\nturbo = true\n",
        "[agent]\ncontext_chars = 10000\nsummary_chars = 6000\n",
    ] {
        config(bad);
        let e = open().unwrap_err();
        assert_eq!(e.kind(), steward_core::ErrorKind::InvalidInput, "{bad}: {e}");
    }
    // With models configured, a tier named in [agent] must have one.
    let llm = "[llm]\ntier_numbering = \"design\"\n[llm.targets.main]\n\
               base_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n\
               [llm.tiers]\n\"tier-3\" = [\"main\"]\n";
    config(&format!("{llm}[agent]\ntier = \"tier-3\"\nsummary_tier = \"tier-3\"\n"));
    drop(open().unwrap());
    for (bad, named) in [("tier = \"tier-4\"", "tier-4"), ("summary_tier = \"tier-5\"", "tier-5")] {
        config(&format!("{llm}[agent]\n{bad}\n"));
        let e = open().unwrap_err();
        assert_eq!(e.kind(), steward_core::ErrorKind::InvalidInput, "{bad}: {e}");
        assert!(e.to_string().contains(named), "{e}");
    }
    config(&format!("{llm}[agent]\nnotify_tier = \"tier-2\"\n"));
    let e = home::runner(Arc::new(home::open(Some(h.clone())).unwrap())).unwrap_err();
    assert!(e.to_string().contains("notify_tier = \"tier-2\""), "{e}");
}
