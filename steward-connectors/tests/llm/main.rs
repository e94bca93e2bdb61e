//! The chat-model client against a scripted OpenAI-compatible server on loopback (the real
//! wire format: JSON answers, SSE streams, error bodies): fallback, alias collapse, the shared
//! deadline, streams that fail before their first byte (retried elsewhere) or mid-output
//! (never switched), targets that will not stream (re-emitted as synthetic deltas), tool calls
//! streamed and not, and the usage ledger with its attempt diagnostics.

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use steward_connectors::testing::models::{
    Reply, ScriptedServer, chat_answer, chat_stream_chunks, error_answer,
};
use steward_core::{
    Limits, StewardError as _,
    llm::{
        Attribution, Capability, ChatRequest, LlmClient, LlmConfig, LlmError, Message, Rates,
        StreamDelta, Target, ToolDef, UsageLedger,
    },
};

fn target(server: &ScriptedServer, model: &str) -> Target {
    Target {
        base_url: server.base_url.clone(),
        model: model.to_owned(),
        api_key: None,
        tools: true,
    }
}

/// A client whose `tier-1` tries `targets` in order.
fn client(
    targets: Vec<(&str, Target)>,
    deadline: Duration,
    home: &std::path::Path,
) -> (LlmClient, Arc<UsageLedger>) {
    let tier: Vec<String> = targets.iter().map(|(n, _)| (*n).to_owned()).collect();
    let config = LlmConfig {
        targets: targets.into_iter().map(|(n, t)| (n.to_owned(), t)).collect(),
        tiers: BTreeMap::from([(Capability::Tier1, tier)]),
        rates: BTreeMap::from([(
            "big".to_owned(),
            Rates { input: 2.0, output: 10.0, cache_read: 0.5, cache_write: 0.0 },
        )]),
        deadline,
    };
    let ledger = Arc::new(UsageLedger::open(home, &Limits::default()).unwrap());
    (LlmClient::new(config, Some(Arc::clone(&ledger))).unwrap(), ledger)
}

fn request(service: Option<&str>) -> ChatRequest {
    let mut r = ChatRequest::new(
        Capability::Tier1,
        vec![Message::text("system", "Be brief."), Message::text("user", "Which platform?")],
    );
    r.attribution = Attribution {
        service: service.map(str::to_owned),
        action: service.map(|_| "chat.turn".to_owned()),
    };
    r
}

#[test]
fn a_failed_target_falls_back_and_the_ledger_counts_once() {
    let dir = tempfile::tempdir().unwrap();
    let down = ScriptedServer::start(|_, _| error_answer(503, "overloaded"));
    let up = ScriptedServer::start(|_, _| {
        Reply::Json(
            200,
            chat_answer(
                "big",
                "",
                &[("call_1", "trains_status", r#"{"ref":"vt1_x"}"#)],
                (1_200, 40, 1_000),
            ),
        )
    });
    let (c, ledger) = client(
        vec![("primary", target(&down, "big")), ("secondary", target(&up, "big"))],
        Duration::from_secs(30),
        dir.path(),
    );
    let mut req = request(Some("agent"));
    req.tools = vec![ToolDef {
        name: "trains_status".into(),
        description: "A train's status".into(),
        parameters: json!({"type": "object", "properties": {"ref": {"type": "string"}}}),
    }];
    let r = c.complete(&req).unwrap();
    assert_eq!((r.target.as_str(), r.attempts), ("secondary", 2));
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(
        (r.tool_calls[0].name.as_str(), r.tool_calls[0].arguments.as_str()),
        ("trains_status", r#"{"ref":"vt1_x"}"#)
    );
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!((r.usage.input, r.usage.cache_read, r.usage.output), (200, 1_000, 40));
    // The wire: tools in the OpenAI shape, attribution headers.
    let sent = &up.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.body["tools"][0]["function"]["name"], "trains_status");
    assert_eq!(sent.header("x-usage-service"), Some("agent"));
    assert_eq!(sent.header("x-usage-action"), Some("chat.turn"));
    // One terminal row; attempts beside it; tokens and cost once.
    let id = r.request_id.unwrap();
    let attempts: Vec<_> = ledger
        .attempts(id)
        .unwrap()
        .into_iter()
        .map(|a| (a.target, a.status, a.outcome, a.stream_mode, a.headers_ms.is_some()))
        .collect();
    assert_eq!(
        attempts,
        [
            ("primary".to_owned(), Some(503), "failed".to_owned(), "none".to_owned(), true),
            ("secondary".to_owned(), Some(200), "ok".to_owned(), "none".to_owned(), true)
        ]
    );
    let report = ledger.report(0).unwrap();
    assert_eq!((report.total.requests, report.total.attempts, report.total.failed), (1, 2, 0));
    assert_eq!(
        (report.total.input_tokens, report.total.cache_read_tokens, report.total.output_tokens),
        (200, 1_000, 40)
    );
    // 200 × 2 + 40 × 10 + 1,000 × 0.5 per million = 0.0013 USD.
    assert!((report.total.cost_usd - 0.0013).abs() < 1e-9, "{}", report.total.cost_usd);
    assert_eq!(report.by_service[0].key, "agent");
    assert_eq!(report.unattributed, 0);
}

#[test]
fn aliases_collapse_and_every_failure_is_typed_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let down = ScriptedServer::start(|_, n| {
        if n == 0 {
            Reply::Raw(200, Vec::new(), b"{not json".to_vec())
        } else {
            error_answer(429, "slow down")
        }
    });
    let same = target(&down, "big");
    let (c, ledger) =
        client(vec![("a", same.clone()), ("a-alias", same)], Duration::from_secs(30), dir.path());
    let e = c.complete(&request(None)).unwrap_err();
    assert_eq!(e.code(), "LLM_UNAVAILABLE");
    assert_eq!(down.requests().len(), 1, "the alias of a failed target is not tried again");
    assert!(e.to_string().contains("malformed answer"), "{e}");
    // A 429 is a failure of that target too.
    let e = c.complete(&request(None)).unwrap_err();
    assert!(e.to_string().contains("429"), "{e}");
    let report = ledger.report(0).unwrap();
    assert_eq!((report.total.requests, report.total.failed), (2, 2));
    assert_eq!(report.unattributed, 2, "missing attribution is surfaced");
    assert_eq!(report.by_service[0].key, "unknown");
    // No target for the capability: typed, nothing sent.
    let mut other = request(Some("agent"));
    other.capability = Capability::Tier5;
    assert_eq!(c.complete(&other).unwrap_err().code(), "LLM_NOT_CONFIGURED");
    assert_eq!(down.requests().len(), 2);
}

#[test]
fn the_deadline_is_shared_across_attempts() {
    let dir = tempfile::tempdir().unwrap();
    // The property is temporal (the first attempt is cut at the shared deadline), so one time
    // bound stays, with a wide margin: cut, the call takes the 1 s deadline; not cut, it would
    // wait out the 30 s hang. The counts say what was tried.
    let slow = ScriptedServer::start(|_, _| Reply::Hang(Duration::from_secs(30)));
    let never =
        ScriptedServer::start(|_, _| Reply::Json(200, chat_answer("big", "late", &[], (1, 1, 0))));
    let (c, ledger) = client(
        vec![("slow", target(&slow, "big")), ("never", target(&never, "big"))],
        Duration::from_secs(1),
        dir.path(),
    );
    let t = Instant::now();
    let e = c.complete(&request(Some("agent"))).unwrap_err();
    assert!(matches!(e, LlmError::Deadline(1)), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(10), "the attempt was not cut: {:?}", t.elapsed());
    assert_eq!(slow.requests().len(), 1, "one attempt at the slow target, no retry");
    assert!(never.requests().is_empty(), "nothing is tried after the deadline");
    assert_eq!(ledger.report(0).unwrap().total.failed, 1);
}

fn collect(
    c: &LlmClient,
    req: &ChatRequest,
) -> (Result<steward_core::llm::ChatResponse, LlmError>, Vec<StreamDelta>) {
    let mut got = Vec::new();
    let r = c.stream(req, &mut |d| got.push(d.clone()));
    (r, got)
}

#[test]
fn a_stream_is_retried_only_before_its_first_byte() {
    let dir = tempfile::tempdir().unwrap();
    let before = ScriptedServer::start(|_, _| error_answer(500, "boom"));
    let good = ScriptedServer::start(|_, _| Reply::Sse {
        chunks: chat_stream_chunks("big", &["Platform ", "7", "."], (50, 3)),
        done: true,
        gap: Duration::from_millis(5),
    });
    let (c, ledger) = client(
        vec![("first", target(&before, "big")), ("second", target(&good, "big"))],
        Duration::from_secs(30),
        dir.path(),
    );
    let (r, got) = collect(&c, &request(Some("agent")));
    let r = r.unwrap();
    assert_eq!(r.content, "Platform 7.");
    assert_eq!((r.target.as_str(), r.attempts), ("second", 2));
    assert_eq!(got.len(), 3, "only the answering target's output reached the caller");
    assert_eq!((r.usage.input, r.usage.output), (50, 3));
    assert_eq!(good.requests()[0].body["stream"], true);

    // Cut mid-output: an error, the rest of the route never tried.
    let cut = ScriptedServer::start(|_, _| Reply::Sse {
        chunks: chat_stream_chunks("big", &["Platform ", "7"], (50, 3))[..2].to_vec(),
        done: false,
        gap: Duration::from_millis(5),
    });
    let spare = ScriptedServer::start(|_, _| Reply::Sse {
        chunks: chat_stream_chunks("big", &["other"], (1, 1)),
        done: true,
        gap: Duration::ZERO,
    });
    let (c, ledger2) = client(
        vec![("cut", target(&cut, "big")), ("spare", target(&spare, "big"))],
        Duration::from_secs(30),
        dir.path(),
    );
    let (r, got) = collect(&c, &request(Some("agent")));
    match r.unwrap_err() {
        LlmError::Interrupted { target, delivered_chars, .. } => {
            assert_eq!((target.as_str(), delivered_chars), ("cut", 10));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(got, [StreamDelta::Text("Platform ".into()), StreamDelta::Text("7".into())]);
    assert!(spare.requests().is_empty(), "never switched mid-output");
    let report = ledger2.report(0).unwrap();
    assert_eq!(
        (report.total.requests, report.total.failed),
        (2, 1),
        "one ok before, one interrupted"
    );
    drop(ledger);
}

#[test]
fn a_target_that_will_not_stream_is_re_emitted_as_synthetic_deltas() {
    let dir = tempfile::tempdir().unwrap();
    // A server that ignores `stream` and answers whole.
    let whole = ScriptedServer::start(|_, _| {
        Reply::Json(
            200,
            chat_answer("big", "Platform 7.", &[("call_1", "trains_status", "{}")], (30, 4, 0)),
        )
    });
    // A server that refuses to stream (400), then answers the same request whole.
    let refuses = ScriptedServer::start(|r, _| {
        if r.body["stream"] == true {
            error_answer(400, "streaming is not supported")
        } else {
            Reply::Json(200, chat_answer("big", "Binario 7.", &[], (20, 3, 0)))
        }
    });
    let spare = ScriptedServer::start(|_, _| Reply::Sse {
        chunks: chat_stream_chunks("big", &["other"], (1, 1)),
        done: true,
        gap: Duration::ZERO,
    });
    let (c, ledger) = client(
        vec![("whole", target(&whole, "big")), ("spare", target(&spare, "big"))],
        Duration::from_secs(30),
        dir.path(),
    );
    let (r, got) = collect(&c, &request(Some("agent")));
    let r = r.unwrap();
    assert_eq!((r.content.as_str(), r.target.as_str(), r.attempts), ("Platform 7.", "whole", 1));
    assert_eq!(
        got,
        [
            StreamDelta::Text("Platform 7.".into()),
            StreamDelta::ToolCall {
                index: 0,
                id: Some("call_1".into()),
                name: Some("trains_status".into()),
                arguments: "{}".into()
            }
        ]
    );
    let rows = ledger.attempts(r.request_id.unwrap()).unwrap();
    assert_eq!((rows[0].stream_mode.as_str(), rows[0].status), ("synthetic", Some(200)));

    let (c, ledger) = client(
        vec![("refuses", target(&refuses, "big")), ("spare", target(&spare, "big"))],
        Duration::from_secs(30),
        dir.path(),
    );
    let (r, got) = collect(&c, &request(Some("agent")));
    let r = r.unwrap();
    assert_eq!((r.content.as_str(), r.target.as_str(), r.attempts), ("Binario 7.", "refuses", 2));
    assert_eq!(got, [StreamDelta::Text("Binario 7.".into())]);
    let sent = refuses.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!((sent[0].body["stream"].clone(), sent[1].body.get("stream")), (json!(true), None));
    let rows: Vec<_> = ledger
        .attempts(r.request_id.unwrap())
        .unwrap()
        .into_iter()
        .map(|a| (a.target, a.status, a.stream_mode))
        .collect();
    assert_eq!(
        rows,
        [
            ("refuses".to_owned(), Some(400), "native".to_owned()),
            ("refuses".to_owned(), Some(200), "synthetic".to_owned())
        ]
    );
    assert!(spare.requests().is_empty(), "the same target answered; nothing else was asked");
    // One request in the ledger for each call, streamed; the refusal did not count as one.
    let report = ledger.report(0).unwrap();
    assert_eq!((report.total.requests, report.total.attempts, report.total.failed), (2, 3, 0));

    // A target that is down is not asked again without `stream`: the next target streams.
    let down = ScriptedServer::start(|_, _| error_answer(503, "overloaded"));
    let (c, ledger) = client(
        vec![("down", target(&down, "big")), ("spare", target(&spare, "big"))],
        Duration::from_secs(30),
        dir.path(),
    );
    let (r, _) = collect(&c, &request(Some("agent")));
    let r = r.unwrap();
    assert_eq!(r.content, "other");
    assert_eq!(down.requests().len(), 1);
    let modes: Vec<_> = ledger
        .attempts(r.request_id.unwrap())
        .unwrap()
        .into_iter()
        .map(|a| (a.target, a.stream_mode))
        .collect();
    assert_eq!(
        modes,
        [("down".to_owned(), "native".to_owned()), ("spare".to_owned(), "native".to_owned())]
    );
}

#[test]
fn streamed_tool_calls_are_assembled_from_fragments() {
    let dir = tempfile::tempdir().unwrap();
    let frag = |i: u64, id: Option<&str>, name: Option<&str>, args: &str| -> Value {
        let mut f = json!({"index": i, "function": {"arguments": args}});
        if let Some(id) = id {
            f["id"] = id.into();
            f["type"] = "function".into();
        }
        if let Some(n) = name {
            f["function"]["name"] = n.into();
        }
        json!({"object": "chat.completion.chunk", "model": "big",
               "choices": [{"index": 0, "delta": {"tool_calls": [f]}, "finish_reason": null}]})
    };
    let chunks = vec![
        frag(0, Some("call_a"), Some("mail_search"), "{\"query\":"),
        frag(0, None, None, "\"tax\"}"),
        frag(1, Some("call_b"), Some("trains_next"), "{}"),
        json!({"object": "chat.completion.chunk", "model": "big",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ];
    let server = ScriptedServer::start(move |_, _| Reply::Sse {
        chunks: chunks.clone(),
        done: true,
        gap: Duration::ZERO,
    });
    let (c, _ledger) =
        client(vec![("only", target(&server, "big"))], Duration::from_secs(30), dir.path());
    let (r, got) = collect(&c, &request(Some("agent")));
    let r = r.unwrap();
    assert_eq!(got.len(), 3);
    let calls: Vec<(&str, &str, &str)> = r
        .tool_calls
        .iter()
        .map(|t| (t.id.as_str(), t.name.as_str(), t.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [("call_a", "mail_search", "{\"query\":\"tax\"}"), ("call_b", "trains_next", "{}")]
    );
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
}

#[test]
fn a_streamed_tool_call_over_its_bound_ends_the_request() {
    use steward_core::llm::{MAX_TOOL_CALL_ARGUMENTS_BYTES, MAX_TOOL_CALL_NAME_BYTES};
    let dir = tempfile::tempdir().unwrap();
    let frag = |name: Option<&str>, args: &str| -> Value {
        let mut f = json!({"index": 0, "function": {"arguments": args}});
        if let Some(n) = name {
            f["id"] = "call_a".into();
            f["function"]["name"] = n.into();
        }
        json!({"object": "chat.completion.chunk", "model": "big",
               "choices": [{"index": 0, "delta": {"tool_calls": [f]}, "finish_reason": null}]})
    };
    // Arguments in fragments of 40% of the bound each (each SSE line stays under its own
    // bound): the third would go over.
    let piece = "x".repeat(MAX_TOOL_CALL_ARGUMENTS_BYTES * 2 / 5);
    let mut chunks = vec![frag(Some("mail_search"), &piece)];
    chunks.extend((0..3).map(|_| frag(None, &piece)));
    let endless = ScriptedServer::start(move |_, _| Reply::Sse {
        chunks: chunks.clone(),
        done: true,
        gap: Duration::ZERO,
    });
    let spare = ScriptedServer::start(|_, _| Reply::Sse {
        chunks: chat_stream_chunks("big", &["other"], (1, 1)),
        done: true,
        gap: Duration::ZERO,
    });
    let (c, ledger) = client(
        vec![("endless", target(&endless, "big")), ("spare", target(&spare, "big"))],
        Duration::from_secs(30),
        dir.path(),
    );
    let (r, got) = collect(&c, &request(Some("agent")));
    let e = r.unwrap_err();
    assert_eq!(
        (e.code(), e.kind()),
        ("LLM_ANSWER_TOO_LARGE", steward_core::ErrorKind::Unavailable)
    );
    assert_eq!(
        e,
        LlmError::TooLarge {
            target: "endless".into(),
            what: "a tool call's arguments",
            limit: MAX_TOOL_CALL_ARGUMENTS_BYTES
        }
    );
    assert_eq!(got.len(), 2, "nothing past the bound reached the caller");
    assert!(spare.requests().is_empty(), "never switched");
    assert_eq!(ledger.report(0).unwrap().total.failed, 1);

    // A name that keeps growing (a fragment repeats it): bounded too.
    let name = "n".repeat(MAX_TOOL_CALL_NAME_BYTES / 2 + 1);
    let named = vec![frag(Some(&name), "{}"), frag(Some(&name), "")];
    let server = ScriptedServer::start(move |_, _| Reply::Sse {
        chunks: named.clone(),
        done: true,
        gap: Duration::ZERO,
    });
    let (c, _ledger) =
        client(vec![("only", target(&server, "big"))], Duration::from_secs(30), dir.path());
    let (r, got) = collect(&c, &request(Some("agent")));
    match r.unwrap_err() {
        LlmError::TooLarge { what, limit, .. } => {
            assert_eq!((what, limit), ("a tool call's name", MAX_TOOL_CALL_NAME_BYTES));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(got.len(), 1);
}
