//! The chat turn runner over a real mirror, a scripted model server speaking the OpenAI wire
//! format on loopback, and real SMTP: a tool call and its answer, a gated send that pauses
//! the turn and resumes on the person's decision (once), a declined call refused for the rest
//! of the chat, every bound with its end reason, cancellation, and a crash mid-turn.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{Value, json};
use steward_connectors::{
    mail::{
        demo::{DemoOptions, generate_maildir},
        smtp::{Security, SmtpConfig, SmtpSender},
    },
    testing::{
        SinkOptions, SmtpSink,
        models::{Recorded, Reply, ScriptedServer, chat_answer},
    },
};
use steward_core::{
    Steward,
    agent::{Agent, AgentConfig, EndReason, TurnEvent, TurnResult},
    approval::{DecisionInput, DecisionKind},
    outbox::Sender,
    tools::Toolbox,
};

use super::fixtures::{mirror_maildir, steward};

const WAIT: Duration = Duration::from_secs(30);

struct Rig {
    _dir: tempfile::TempDir,
    steward: Arc<Steward>,
    agent: Agent,
    sink: SmtpSink,
    _model: ScriptedServer,
}

fn sender() -> Sender {
    Sender { account: "a".into(), from: "ada@example.org".into(), from_name: Some("Ada".into()) }
}

/// A home with 40 demo messages, SMTP to a sink, and a model answering with `script`.
fn rig(
    config: AgentConfig,
    script: impl Fn(&Recorded, usize) -> Reply + Send + Sync + 'static,
) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    let mut opts = DemoOptions::new(40);
    opts.malformed = false;
    generate_maildir(&md, &opts).unwrap();
    mirror_maildir(&steward(dir.path()), &md);
    let model = ScriptedServer::start(script);
    let llm = steward_connectors::testing::models::one_chat_target(&model.base_url, "scripted");
    let s = Arc::new(Steward::builder().home(dir.path().join("home")).llm(llm).open().unwrap());
    let sink = SmtpSink::start(dir.path(), &SinkOptions::default());
    let smtp = SmtpSender::new(SmtpConfig::new("127.0.0.1", sink.port, Security::Plain, sender()))
        .unwrap();
    let toolbox = Arc::new(Toolbox::new(Arc::clone(&s)).with_mail_sender(Arc::new(smtp), sender()));
    let agent = Agent::open(toolbox, config).unwrap();
    Rig { _dir: dir, steward: s, agent, sink, _model: model }
}

fn call(id: &str, name: &str, args: Value) -> Reply {
    Reply::Json(200, chat_answer("scripted", "", &[(id, name, &args.to_string())], (100, 10, 0)))
}

fn say(text: &str) -> Reply {
    Reply::Json(200, chat_answer("scripted", text, &[], (120, 20, 0)))
}

/// The text of the last message of a request (what the model was just told).
fn last_message(r: &Recorded) -> String {
    r.body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

impl Rig {
    fn turn(&self, chat: &str, text: &str) -> TurnResult {
        let run = self.agent.start_turn(chat, text).unwrap();
        self.agent.wait(&run, WAIT).unwrap().expect("the turn ends")
    }

    fn events(&self, chat: &str) -> Vec<TurnEvent> {
        self.agent.events_after(Some(chat), 0, 500).unwrap().into_iter().map(|e| e.event).collect()
    }

    /// The newest turn of `chat`, once it has ended.
    fn latest(&self, chat: &str, after_runs: usize) -> TurnResult {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let turns = self.agent.turns(chat, 50).unwrap();
            if turns.len() > after_runs
                && let Some(r) = self.agent.wait(&turns[0].run_id, WAIT).unwrap()
            {
                return r;
            }
            assert!(std::time::Instant::now() < deadline, "no new turn in {chat}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn a_turn_calls_a_read_tool_and_answers_with_the_result_fenced_as_data() {
    let r = rig(AgentConfig::default(), |req, n| match n {
        0 => call("c1", "mail.search", json!({"query": "", "limit": 2})),
        _ => {
            let told = last_message(req);
            assert!(told.contains("<untrusted_data tool=\\\"mail.search\\\""), "{told}");
            say("You have mail from the demo.")
        }
    });
    let chat = r.agent.create_chat().unwrap().id;
    let result = r.turn(&chat, "What came in lately?");
    assert_eq!(result.end_reason, EndReason::Completed, "{result:?}");
    assert_eq!((result.usage.model_calls, result.usage.tool_calls), (2, 1));
    assert_eq!(result.text, "You have mail from the demo.");
    assert_eq!((result.usage.input_tokens, result.usage.output_tokens), (220, 30));
    let kinds: Vec<String> = r
        .events(&chat)
        .iter()
        .map(|e| serde_json::to_value(e).unwrap()["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "turn_started",
            "usage",
            "tool_proposed",
            "tool_started",
            "tool_finished",
            "text_delta",
            "usage",
            "turn_ended"
        ]
    );
    let finished = r.events(&chat).into_iter().find_map(|e| match e {
        TurnEvent::ToolFinished { status, untrusted, sources, .. } => {
            Some((status, untrusted, sources.len()))
        }
        _ => None,
    });
    assert_eq!(finished, Some(("ran".to_owned(), true, 2)));
    // The host, not the model, says who and when; every model call is attributed.
    let report = r.steward.usage_report("all", steward_core::time::now_secs()).unwrap();
    let agent = report.by_service.iter().find(|g| g.key == "agent").unwrap();
    assert_eq!(agent.requests, 2);
    let messages = r.agent.messages(&chat, 0, 50).unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
}

#[test]
fn a_gated_send_pauses_the_turn_and_the_decision_resumes_it_exactly_once() {
    let asked = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&asked);
    let mail = json!({"to": ["bob@example.org"], "subject": "Lunch", "body": "Friday?"});
    let m = mail.clone();
    let r = rig(AgentConfig::default(), move |req, _| {
        let told = last_message(req);
        seen.lock().unwrap().push(told.clone());
        if told.contains("approved by the person") {
            say("Sent.")
        } else if told.contains("declined by the person") {
            // A model that insists: the identical call again.
            call("c9", "mail.send", m.clone())
        } else if told.contains("refused: the person declined") {
            say("Understood, I will not send it.")
        } else if told.contains("waiting for the person") {
            say("It waits for your approval.")
        } else {
            call(&format!("c{}", seen.lock().unwrap().len()), "mail.send", m.clone())
        }
    });
    let chat = r.agent.create_chat().unwrap().id;
    let first = r.turn(&chat, "Ask Bob about lunch on Friday.");
    assert_eq!(first.end_reason, EndReason::AwaitingApproval, "{first:?}");
    assert_eq!(first.approvals.len(), 1);
    let approval = first.approvals[0];
    assert_eq!(r.sink.deliveries().len(), 0, "nothing is sent before a person decides");
    assert!(r.steward.list_write_operations(None, 0, 10).unwrap().is_empty());
    // The card shows the exact input.
    let card = r.steward.approval_detail(approval).unwrap().approval;
    assert_eq!(card.normalized_input, mail);
    assert_eq!(card.chat.as_deref(), Some(chat.as_str()));
    // The person approves; the decision resumes the chat with a new turn.
    let me = r.steward.human("Ada").unwrap();
    r.steward
        .decide_approval(approval, DecisionKind::Approve, &DecisionInput::default(), &me)
        .unwrap();
    assert_eq!(r.agent.resolve_decided().unwrap(), 1);
    let resumed = r.latest(&chat, 1);
    assert_eq!(resumed.end_reason, EndReason::Completed, "{resumed:?}");
    assert_eq!(resumed.text, "Sent.");
    assert_eq!(r.sink.deliveries().len(), 1);
    // Resolving again changes nothing: nothing waits, nothing is sent twice.
    assert_eq!(r.agent.resolve_decided().unwrap(), 0);
    assert_eq!(r.sink.deliveries().len(), 1);

    // A declined request: the model is told, and the identical call is refused afterwards.
    let chat2 = r.agent.create_chat().unwrap().id;
    let paused = r.turn(&chat2, "Ask Bob about lunch again.");
    let id = paused.approvals[0];
    let note = DecisionInput { note: Some("not now".into()), ..DecisionInput::default() };
    r.steward.decide_approval(id, DecisionKind::Deny, &note, &me).unwrap();
    r.agent.resolve_decided().unwrap();
    let after = r.latest(&chat2, 1);
    assert_eq!(after.end_reason, EndReason::Completed, "{after:?}");
    assert_eq!(after.text, "Understood, I will not send it.");
    let statuses: Vec<String> =
        r.agent.tool_calls(&chat2).unwrap().into_iter().map(|c| c.status).collect();
    assert_eq!(statuses, ["declined", "refused"]);
    assert!(asked.lock().unwrap().iter().any(|t| t.contains("declined by the person: not now")));
    assert_eq!(r.sink.deliveries().len(), 1, "the declined mail never went out");
    let pending = r.steward.list_approvals(&Default::default()).unwrap();
    assert_eq!(pending.len(), 2, "the refused repeat asked nobody: {pending:?}");
}

#[test]
fn every_bound_ends_the_turn_with_its_reason_and_answers_every_call() {
    // The same call forever: refused after the identical-call bound, then the model-call bound.
    let mut config = AgentConfig::default();
    config.max_model_calls = 4;
    let r = rig(config, |_, n| call(&format!("s{n}"), "ops.list", json!({})));
    let chat = r.agent.create_chat().unwrap().id;
    let res = r.turn(&chat, "loop");
    assert_eq!(res.end_reason, EndReason::MaxModelCalls);
    let statuses: Vec<String> =
        r.agent.tool_calls(&chat).unwrap().into_iter().map(|c| c.status).collect();
    assert_eq!(statuses, ["ran", "ran", "refused", "refused"]);
    let msgs = r.agent.messages(&chat, 0, 100).unwrap();
    let calls = msgs.iter().map(|m| m.tool_calls.len()).sum::<usize>();
    let answers = msgs.iter().filter(|m| m.role == "tool").count();
    assert_eq!(calls, answers, "every call has exactly one answer");

    // Truncated tool JSON three times in a row ends the turn instead of looping.
    let r = rig(AgentConfig::default(), |_, n| {
        Reply::Json(
            200,
            chat_answer(
                "scripted",
                "",
                &[(&format!("b{n}"), "mail.search", "{\"query\": \"inv")],
                (10, 5, 0),
            ),
        )
    });
    let chat = r.agent.create_chat().unwrap().id;
    let res = r.turn(&chat, "search");
    assert_eq!(res.end_reason, EndReason::Error);
    assert!(res.error.as_deref().unwrap().contains("3 unparseable"), "{res:?}");
    assert_eq!(res.usage.model_calls, 3);

    // More calls than the tool-call bound in one answer: the rest are refused, not run.
    let mut config = AgentConfig::default();
    config.max_tool_calls = 2;
    let r = rig(config, |_, _| {
        let calls: Vec<(String, String)> = (0..4)
            .map(|i| (format!("t{i}"), json!({"cursor": i.to_string()}).to_string()))
            .collect();
        let calls: Vec<(&str, &str, &str)> =
            calls.iter().map(|(id, a)| (id.as_str(), "ops.list", a.as_str())).collect();
        Reply::Json(200, chat_answer("scripted", "", &calls, (10, 5, 0)))
    });
    let chat = r.agent.create_chat().unwrap().id;
    let res = r.turn(&chat, "many");
    assert_eq!(res.end_reason, EndReason::MaxToolCalls);
    let statuses: Vec<String> =
        r.agent.tool_calls(&chat).unwrap().into_iter().map(|c| c.status).collect();
    assert_eq!(statuses, ["ran", "ran", "refused", "refused"]);

    // A token budget.
    let mut config = AgentConfig::default();
    config.max_turn_tokens = 150;
    let r = rig(config, |_, _| call("x", "ops.list", json!({})));
    let chat = r.agent.create_chat().unwrap().id;
    assert_eq!(r.turn(&chat, "spend").end_reason, EndReason::Budget);

    // No model answers.
    let r =
        rig(AgentConfig::default(), |_, _| Reply::Json(503, json!({"error": {"message": "down"}})));
    let chat = r.agent.create_chat().unwrap().id;
    let res = r.turn(&chat, "hello");
    assert_eq!(res.end_reason, EndReason::ModelUnavailable, "{res:?}");
}

#[test]
fn a_cancelled_turn_runs_no_tool_and_leaves_a_valid_history() {
    let r = rig(AgentConfig::default(), |_, _| Reply::Sse {
        chunks: steward_connectors::testing::models::chat_stream_chunks(
            "scripted",
            &["thinking", " more"],
            (5, 5),
        ),
        done: true,
        gap: Duration::from_millis(300),
    });
    let chat = r.agent.create_chat().unwrap().id;
    let run = r.agent.start_turn(&chat, "slow").unwrap();
    assert!(r.agent.cancel(&run));
    let res = r.agent.wait(&run, WAIT).unwrap().unwrap();
    assert_eq!(res.end_reason, EndReason::Cancelled);
    assert!(r.agent.tool_calls(&chat).unwrap().is_empty());
    assert!(!r.agent.cancel(&run), "a finished run cannot be cancelled");
}

#[test]
fn a_turn_killed_mid_call_is_interrupted_and_the_next_context_answers_the_open_call() {
    let told = Arc::new(Mutex::new(String::new()));
    let seen = Arc::clone(&told);
    let r = rig(AgentConfig::default(), move |req, _| {
        *seen.lock().unwrap() = req.body["messages"].to_string();
        say("ok")
    });
    let chat = r.agent.create_chat().unwrap().id;
    // What a process killed between the model's answer and the tool's result leaves behind.
    let db = rusqlite::Connection::open(r.steward.home().join("chats.db")).unwrap();
    db.execute_batch(&format!(
        "INSERT INTO turns (run_id, chat_id, status, started_at) VALUES ('run_dead', '{chat}', 'running', 1);
         INSERT INTO messages (chat_id, run_id, role, content, created_at) VALUES ('{chat}', 'run_dead', 'user', 'send it', 1);
         INSERT INTO messages (chat_id, run_id, role, tool_calls, created_at) VALUES ('{chat}', 'run_dead', 'assistant',
           '[{{\"id\":\"k1\",\"name\":\"ops.list\",\"arguments\":\"{{}}\"}}]', 1);
         INSERT INTO tool_calls (chat_id, run_id, call_id, tool, input, input_key, status, created_at)
           VALUES ('{chat}', 'run_dead', 'k1', 'ops.list', '{{}}', 'k', 'running', 1);"
    ))
    .unwrap();
    drop(db);
    let open = || {
        Agent::open(Arc::new(Toolbox::new(Arc::clone(&r.steward))), AgentConfig::default()).unwrap()
    };
    // While a live agent holds the home, another process's agent reads but starts nothing,
    // and never calls the live agent's turns dead.
    let second = open();
    assert!(!second.runs_turns());
    assert_eq!(second.turn("run_dead").unwrap().status, "running");
    let e = second.start_turn(&chat, "hi").unwrap_err();
    assert_eq!(steward_core::StewardError::code(&e), "AGENT_RUNS_ELSEWHERE");
    drop(second);
    // The holder is gone (as after kill -9): the next agent interrupts what it left.
    drop(r.agent);
    let reopened = open();
    assert!(reopened.runs_turns());
    let dead = reopened.turn("run_dead").unwrap();
    assert_eq!(dead.status, "interrupted");
    assert_eq!(reopened.tool_calls(&chat).unwrap()[0].status, "interrupted");
    let res = {
        let run = reopened.start_turn(&chat, "and now?").unwrap();
        reopened.wait(&run, WAIT).unwrap().unwrap()
    };
    assert_eq!(res.end_reason, EndReason::Completed);
    let messages: Value = serde_json::from_str(&told.lock().unwrap()).unwrap();
    let answer = messages.as_array().unwrap().iter().find(|m| m["tool_call_id"] == "k1").unwrap();
    assert!(answer["content"].as_str().unwrap().starts_with("interrupted"), "{answer}");
}

/// A whole turn with a real model (SmolLM2-135M on the CPU, `scripts/local-model`): it is
/// offered the registry's tools, calls one (the server holds it to the tools' JSON format; what
/// it writes inside is its own), the call goes through the gate and runs or is refused with a
/// typed result, and the model's streamed answer ends the turn. Every call is in the ledger.
#[test]
fn a_real_local_model_runs_a_whole_turn_with_a_tool_call() {
    use steward_connectors::testing::models::LocalModel;
    let Some(model) = LocalModel::start() else {
        assert!(
            std::env::var_os("STEWARD_REQUIRE_LOCAL_MODEL").is_none(),
            "the local model is required here but not installed (scripts/local-model --install)"
        );
        eprintln!("SKIP real local model: not installed (scripts/local-model --install)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    let mut opts = DemoOptions::new(40);
    opts.malformed = false;
    generate_maildir(&md, &opts).unwrap();
    mirror_maildir(&steward(dir.path()), &md);
    let mut llm = steward_connectors::testing::models::one_chat_target(&model.base_url, "smollm2");
    llm.deadline = Duration::from_secs(300);
    let s = Arc::new(Steward::builder().home(dir.path().join("home")).llm(llm).open().unwrap());
    let toolbox = Arc::new(Toolbox::new(Arc::clone(&s)));
    let names: Vec<String> = toolbox.definitions().into_iter().map(|t| t.name).collect();
    let mut config = AgentConfig::default();
    config.max_model_calls = 4;
    let agent = Agent::open(toolbox, config).unwrap();
    let chat = agent.create_chat().unwrap().id;
    let run = agent.start_turn(&chat, "Search my mail for the word invoice.").unwrap();
    let result = agent.wait(&run, Duration::from_secs(600)).unwrap().expect("the turn ends");
    assert_eq!(result.end_reason, EndReason::Completed, "{result:?}");
    assert_eq!(result.usage.tool_calls, 1, "{result:?}");
    assert_eq!(result.usage.model_calls, 2, "a call, then the answer after its result");
    assert!(!result.text.trim().is_empty(), "the model answered in words");
    let calls = agent.tool_calls(&chat).unwrap();
    assert_eq!(calls.len(), 1);
    assert!(names.contains(&calls[0].tool), "{} is a registry tool", calls[0].tool);
    assert!(["ran", "invalid"].contains(&calls[0].status.as_str()), "{calls:?}");
    let events = agent.events_after(Some(&chat), 0, 500).unwrap();
    let streamed: String = events
        .iter()
        .filter_map(|e| match &e.event {
            TurnEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, result.text, "the answer arrived as it was generated");
    // The real token counts of both calls are in the usage ledger.
    let usage = s.usage_report("all", i64::MAX / 2).unwrap();
    assert_eq!(usage.total.requests, 2);
    assert!(usage.total.input_tokens > 0 && usage.total.output_tokens > 0, "{usage:?}");
    eprintln!("local model: {} ({}) then {:?}", calls[0].tool, calls[0].status, result.text);
}
