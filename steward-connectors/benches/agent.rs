//! The turn runner's own cost (issue 20 §7), against a zero-latency scripted model on loopback
//! (the OpenAI wire format) over a 300-message demo mirror. Each turn is three model round
//! trips: `mail.search`, then `ops.list`, then the answer — two real tool calls.
//!
//! 1. Sequential: 200 turns one after another; each turn's wall time (start_turn → wait), and
//!    the bare model round trip of the same client (`LlmClient::complete` on the final
//!    context of a turn, 200 times). Runner overhead per round trip = (turn − 3 × round trip)
//!    / 3: everything the runner adds — context building, `chats.db` writes, events, the
//!    gate, the tools themselves.
//! 2. Burst: 100 chats started at once (`max_concurrent_turns` as configured, default 8);
//!    every turn must complete; each turn's time from its start to its end, and the peak RSS
//!    of the process (VmHWM).
//!
//! `cargo bench -p steward-connectors --bench agent`

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use steward_connectors::{
    mail::{
        MaildirSource,
        demo::{DemoOptions, generate_maildir},
    },
    testing::models::{Recorded, Reply, ScriptedServer, chat_answer},
};
use steward_core::{
    Steward,
    agent::{Agent, AgentConfig, EndReason},
    llm::{Capability, ChatRequest, LlmConfig, Message, Target},
    mirror::SyncOptions,
    tools::Toolbox,
};

fn answer(req: &Recorded) -> Value {
    let messages = req.body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    let call = |id: &str, name: &str, args: Value| {
        chat_answer("bench", "", &[(id, name, &args.to_string())], (200, 20, 0))
    };
    match (last["role"].as_str(), last["tool_call_id"].as_str()) {
        (Some("user"), _) => call("c1", "mail.search", json!({"query": "invoice", "limit": 5})),
        (Some("tool"), Some("c1")) => call("c2", "ops.list", json!({})),
        _ => chat_answer("bench", "Here is what I found.", &[], (300, 10, 0)),
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let maildir = dir.path().join("Maildir");
    let mut opts = DemoOptions::new(300);
    opts.malformed = false;
    generate_maildir(&maildir, &opts).expect("demo");
    let model = ScriptedServer::start(|req, _| Reply::Json(200, answer(req)));
    let llm = LlmConfig {
        targets: BTreeMap::from([(
            "m".to_owned(),
            Target {
                base_url: model.base_url.clone(),
                model: "bench".into(),
                api_key: None,
                tools: true,
            },
        )]),
        tiers: BTreeMap::from([(Capability::Tier3, vec!["m".to_owned()])]),
        rates: BTreeMap::new(),
        deadline: Duration::from_secs(30),
    };
    let steward =
        Arc::new(Steward::builder().home(dir.path().join("home")).llm(llm).open().expect("open"));
    let sync = SyncOptions { account: Some("me".into()), cancel: None };
    steward.sync_mail(&MaildirSource::new(&maildir), &sync, &mut |_| {}).expect("sync");
    let agent = Agent::open(Arc::new(Toolbox::new(Arc::clone(&steward))), AgentConfig::default())
        .expect("agent");

    // 1. Sequential turns, and the bare round trip on a turn's final context.
    let turns = 200;
    let mut turn_ms = Vec::with_capacity(turns);
    let mut last_chat = String::new();
    for i in 0..turns {
        let chat = agent.create_chat().expect("chat").id;
        let t = Instant::now();
        let run = agent.start_turn(&chat, &format!("What about the invoice? ({i})")).expect("turn");
        let r = agent.wait(&run, Duration::from_secs(30)).expect("wait").expect("ended");
        turn_ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(r.end_reason, EndReason::Completed, "{r:?}");
        assert_eq!((r.usage.model_calls, r.usage.tool_calls), (3, 2));
        last_chat = chat;
    }
    let context: Vec<Message> = agent
        .messages(&last_chat, 0, 200)
        .expect("messages")
        .into_iter()
        .map(|m| Message {
            role: m.role,
            content: m.content,
            tool_calls: m.tool_calls,
            tool_call_id: m.tool_call_id,
        })
        .collect();
    let client = steward.llm().expect("llm");
    let mut trip_ms = Vec::with_capacity(turns);
    for _ in 0..turns {
        let mut req = ChatRequest::new(Capability::Tier3, context.clone());
        req.tools = Toolbox::new(Arc::clone(&steward)).definitions();
        let t = Instant::now();
        client.complete(&req).expect("complete");
        trip_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let turn_p50 = percentile(&mut turn_ms, 0.5);
    let trip_p50 = percentile(&mut trip_ms, 0.5);
    let overhead = (turn_p50 - 3.0 * trip_p50) / 3.0;
    println!(
        "sequential: {turns} turns of 3 round trips + 2 tool calls: turn p50 {turn_p50:.2} ms \
         (p99 {:.2}); bare model round trip p50 {trip_p50:.2} ms; runner overhead per round \
         trip p50 {overhead:.2} ms",
        percentile(&mut turn_ms, 0.99)
    );

    // 2. A burst of 100 chats.
    let chats: Vec<String> = (0..100).map(|_| agent.create_chat().expect("chat").id).collect();
    let cursor = {
        let mut c = 0;
        loop {
            let page = agent.events_after(None, c, 500).expect("events");
            match page.last() {
                Some(e) => c = e.seq,
                None => break c,
            }
        }
    };
    let t0 = Instant::now();
    let runs: Vec<(String, Instant)> = chats
        .iter()
        .map(|c| (agent.start_turn(c, "What about the invoice?").expect("turn"), Instant::now()))
        .collect();
    // One observer follows the event feed, so each turn's end is seen when it happens
    // (a hundred waiters polling the store would measure themselves).
    let started: BTreeMap<String, Instant> = runs.into_iter().collect();
    let mut ended: BTreeMap<String, f64> = BTreeMap::new();
    let mut serving: BTreeMap<String, Instant> = BTreeMap::new();
    let mut in_service: Vec<f64> = Vec::new();
    let mut cursor = cursor;
    while ended.len() < started.len() {
        for e in agent.wait_events(None, cursor, 500, Duration::from_secs(5)).expect("events") {
            cursor = e.seq;
            match &e.event {
                steward_core::agent::TurnEvent::TurnStarted { .. } => {
                    serving.insert(e.run_id.clone(), Instant::now());
                }
                steward_core::agent::TurnEvent::TurnEnded { reason, .. } => {
                    if let Some(t) = started.get(&e.run_id) {
                        assert_eq!(*reason, EndReason::Completed);
                        ended.insert(e.run_id.clone(), t.elapsed().as_secs_f64() * 1e3);
                    }
                    if let Some(t) = serving.get(&e.run_id) {
                        in_service.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                }
                _ => {}
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "the burst did not finish");
    }
    let mut burst_ms: Vec<f64> = ended.into_values().collect();
    let all_ms = t0.elapsed().as_secs_f64() * 1e3;
    let service_p99 = percentile(&mut in_service, 0.99);
    println!(
        "burst: 100 chats started at once, all completed in {all_ms:.0} ms \
         (max_concurrent_turns {}); from send to end p50 {:.1} ms, p99 {:.1} ms (queueing \
         behind the concurrency bound included); in service (turn started → ended) p50 {:.1} \
         ms, p99 {service_p99:.1} ms, runner overhead per round trip at p99 {:.1} ms; peak RSS \
         {:.0} MiB",
        agent.config().max_concurrent_turns,
        percentile(&mut burst_ms, 0.5),
        percentile(&mut burst_ms, 0.99),
        percentile(&mut in_service, 0.5),
        (service_p99 - 3.0 * trip_p50) / 3.0,
        peak_rss_mib()
    );
}
