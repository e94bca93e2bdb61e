//! `GET /ws` over real sockets: snapshot first, every event once and in order, resume after a
//! reconnect without loss or duplicates, many clients at once, authentication and origin
//! checks on the handshake, and a graceful shutdown that closes live sessions.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use steward_core::{
    Steward,
    access::{AccessToken, OriginPolicy},
    approval::{DecisionInput, DecisionKind, NewApproval},
    policy::Level,
};
use steward_server::http::{AppState, Running, ServeConfig, spawn};
use tokio::net::TcpStream;
use tokio_tungstenite::{
    MaybeTlsStream, WebSocketStream, connect_async,
    tungstenite::{Message, client::IntoClientRequest as _, http::HeaderValue},
};

const TOKEN: &str = "0123456789abcdef0123456789abcdef-live";

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

struct Server {
    _dir: tempfile::TempDir,
    steward: Arc<Steward>,
    addr: SocketAddr,
    running: Running,
}

async fn start() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut builder = Steward::builder().home(dir.path().join("home"));
    for a in steward_connectors::watches::all() {
        builder = builder.watch_adapter(a);
    }
    let steward = Arc::new(builder.open().unwrap());
    let state = AppState::new(
        Arc::clone(&steward),
        AccessToken::new(TOKEN).unwrap(),
        OriginPolicy::loopback(),
        "ada",
    );
    let config = ServeConfig { listen: "127.0.0.1:0".parse().unwrap(), tls: None };
    let running = spawn(state, config).await.unwrap();
    Server { _dir: dir, steward, addr: running.addr, running }
}

async fn connect(addr: SocketAddr, query: &str, headers: &[(&str, &str)]) -> Result<Ws, u16> {
    let mut req = format!("ws://{addr}/ws{query}").into_client_request().unwrap();
    for (k, v) in headers {
        let name =
            tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(k.as_bytes()).unwrap();
        req.headers_mut().insert(name, HeaderValue::from_str(v).unwrap());
    }
    match connect_async(req).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => Err(r.status().as_u16()),
        Err(e) => panic!("{e}"),
    }
}

async fn open(addr: SocketAddr, query: &str) -> Ws {
    connect(addr, query, &[("authorization", &format!("Bearer {TOKEN}"))]).await.unwrap()
}

/// Observations (sync progress, status transitions) arrive whenever the levels change; the
/// feed tests skip them.
fn is_observation(v: &Value) -> bool {
    v["type"] == "ingest" || v["type"] == "status"
}

/// The next JSON message that is neither a heartbeat nor an observation.
async fn next(ws: &mut Ws) -> Value {
    loop {
        let v = next_any(ws).await;
        if !is_observation(&v) {
            return v;
        }
    }
}

/// The next JSON message that is not a heartbeat.
async fn next_any(ws: &mut Ws) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a message within 10 s")
            .expect("the session is open")
            .unwrap();
        if let Message::Text(t) = m {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["type"] != "heartbeat" {
                return v;
            }
        }
    }
}

/// Asserts nothing but heartbeats and observations arrives for `ms`.
async fn quiet(ws: &mut Ws, ms: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
    while let Ok(m) = tokio::time::timeout_at(deadline, ws.next()).await {
        if let Some(Ok(Message::Text(t))) = m {
            let v: Value = serde_json::from_str(&t).unwrap();
            assert!(v["type"] == "heartbeat" || is_observation(&v), "unexpected {v}");
        }
    }
}

fn request(steward: &Steward, n: usize) -> i64 {
    let a = NewApproval {
        chat: Some("web".into()),
        requested_by: "agent:assistant".into(),
        tool: "mail.send".into(),
        input: json!({"to": ["sister@example.org"], "subject": format!("note {n}"), "body": "hi"}),
        summary: format!("note {n}"),
        level: Level::Confirm,
        timeout_secs: None,
        taint: None,
    };
    steward.approvals().unwrap().request(&a, None, steward_core::time::now_secs()).unwrap().id
}

fn deny(steward: &Steward, id: i64) {
    let who = steward.human("ada").unwrap();
    steward.decide_approval(id, DecisionKind::Deny, &DecisionInput::default(), &who).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_then_events_then_resume_without_loss_or_duplicates() {
    let s = start().await;
    let first = request(&s.steward, 0);
    let mut ws = open(s.addr, "").await;
    let snap = next(&mut ws).await;
    assert_eq!(snap["type"], "snapshot", "{snap}");
    assert_eq!(snap["pending_approvals"][0]["id"], first);

    let st = Arc::clone(&s.steward);
    tokio::task::spawn_blocking(move || deny(&st, first)).await.unwrap();
    let e = next(&mut ws).await;
    assert_eq!(
        (e["type"].as_str(), e["approval_id"].as_i64(), e["event"].as_str()),
        (Some("approval"), Some(first), Some("denied")),
        "{e}"
    );
    assert_eq!(e["actor"], "ada");
    let resume_from = e["cursor"].as_str().unwrap().to_owned();
    quiet(&mut ws, 500).await;
    drop(ws);

    // While disconnected: three more transitions.
    let st = Arc::clone(&s.steward);
    let (a, b) = tokio::task::spawn_blocking(move || {
        let a = request(&st, 1);
        let b = request(&st, 2);
        deny(&st, a);
        (a, b)
    })
    .await
    .unwrap();
    let mut ws = open(s.addr, &format!("?after={resume_from}")).await;
    let got: Vec<(i64, String)> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            let e = next(&mut ws).await;
            v.push((e["approval_id"].as_i64().unwrap(), e["event"].as_str().unwrap().to_owned()));
        }
        v
    };
    assert_eq!(got, [(a, "requested".into()), (b, "requested".into()), (a, "denied".into())]);
    // Then the observed levels as they are now (progress is summarized, not replayed).
    let o = next(&mut ws).await;
    assert_eq!(o["type"], "observation", "{o}");
    assert!(o["ingest"].is_null() && o["system"]["items"].is_array(), "{o}");
    quiet(&mut ws, 600).await;
    // And live again after the replay, from both feeds: an approval and a journal transition.
    let st = Arc::clone(&s.steward);
    let op = tokio::task::spawn_blocking(move || {
        deny(&st, b);
        let op = steward_core::journal::NewOperation {
            kind: "mail.send".into(),
            idempotency_key: "live-test".into(),
            input: json!({"to": ["sister@example.org"]}),
            expected: json!({}),
            approval_id: None,
            scheduled_for: Some(steward_core::time::now_secs() + 3_600),
        };
        st.journal().unwrap().record(&op, steward_core::time::now_secs()).unwrap().id
    })
    .await
    .unwrap();
    let e = next(&mut ws).await;
    assert_eq!((e["approval_id"].as_i64(), e["event"].as_str()), (Some(b), Some("denied")));
    let e = next(&mut ws).await;
    assert_eq!(
        (e["type"].as_str(), e["operation_id"].as_i64(), e["to"].as_str()),
        (Some("operation"), Some(op), Some("scheduled")),
        "{e}"
    );
    assert!(e["cursor"].as_str().unwrap().contains("-j1-"), "{e}");
    // And a watch event: a time watch polled past its instant.
    let st = Arc::clone(&s.steward);
    let watch = tokio::task::spawn_blocking(move || {
        let now = steward_core::time::now_secs();
        let def: steward_core::watch::WatchDefinition = serde_json::from_value(json!({
            "source": "time",
            "resource_ref": steward_core::time::CivilTime::from_unix(now + 60).rfc3339(),
            "instruction": "remind me", "rules": [{"id": "r", "event": "time.reached"}]
        }))
        .unwrap();
        let w = st.watches().unwrap().create(&def, now).unwrap();
        st.watches().unwrap().poll(now + 61).unwrap();
        w.id
    })
    .await
    .unwrap();
    let e = next(&mut ws).await;
    assert_eq!(
        (e["type"].as_str(), e["watch_id"].as_i64(), e["event_type"].as_str()),
        (Some("watch"), Some(watch), Some("time.reached")),
        "{e}"
    );
    assert!(e["cursor"].as_str().unwrap().contains("-w1-d0-c"), "{e}");
    // Its delivery is an event too.
    struct Sent;
    impl steward_core::watch::Delivery for Sent {
        fn compose(&self, e: &steward_core::watch::QueuedEvent) -> Result<String, String> {
            Ok(e.event.fallback_text.clone())
        }
        fn send(
            &self,
            _: &steward_core::watch::QueuedEvent,
            _: &str,
        ) -> Result<(), steward_core::watch::DeliveryError> {
            Ok(())
        }
    }
    let st = Arc::clone(&s.steward);
    let report = tokio::task::spawn_blocking(move || {
        st.watches().unwrap().deliver(&Sent, 20, steward_core::time::now_secs()).unwrap()
    })
    .await
    .unwrap();
    assert_eq!(report.delivered, 1);
    let e = next(&mut ws).await;
    assert_eq!(
        (e["type"].as_str(), e["watch_id"].as_i64(), e["outcome"].as_str()),
        (Some("watch_delivery"), Some(watch), Some("delivered")),
        "{e}"
    );
    assert!(e["cursor"].as_str().unwrap().contains("-w1-d1-c"), "{e}");
    quiet(&mut ws, 400).await;
    drop(ws);
    s.running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_each_receive_every_event_once_in_order() {
    const CLIENTS: usize = 50;
    const EVENTS: usize = 40;
    let s = start().await;
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let mut ws = open(s.addr, "").await;
        assert_eq!(next(&mut ws).await["type"], "snapshot");
        clients.push(ws);
    }
    let st = Arc::clone(&s.steward);
    let ids = tokio::task::spawn_blocking(move || {
        (0..EVENTS).map(|n| request(&st, n)).collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let readers: Vec<_> = clients
        .into_iter()
        .map(|mut ws| {
            tokio::spawn(async move {
                let mut seen = Vec::new();
                for _ in 0..EVENTS {
                    seen.push(next(&mut ws).await["approval_id"].as_i64().unwrap());
                }
                quiet(&mut ws, 300).await;
                seen
            })
        })
        .collect();
    for r in readers {
        assert_eq!(r.await.unwrap(), ids, "every event, once, in order");
    }
    s.running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_checks_and_graceful_shutdown() {
    let s = start().await;
    assert_eq!(connect(s.addr, "", &[]).await.err(), Some(401));
    assert_eq!(
        connect(s.addr, "", &[("authorization", "Bearer nope-nope-nope-nope-nope-nope-nope")])
            .await
            .err(),
        Some(401)
    );
    assert_eq!(connect(s.addr, &format!("?token={TOKEN}"), &[]).await.err(), Some(401));
    let auth = format!("Bearer {TOKEN}");
    for origin in ["null", "https://evil.example"] {
        assert_eq!(
            connect(s.addr, "", &[("authorization", &auth), ("origin", origin)]).await.err(),
            Some(403),
            "{origin}"
        );
    }
    assert_eq!(
        connect(s.addr, "?after=not-a-cursor", &[("authorization", &auth)]).await.err(),
        Some(400)
    );
    let same = format!("http://{}", s.addr);
    let mut ws = connect(s.addr, "", &[("authorization", &auth), ("origin", &same)]).await.unwrap();
    assert_eq!(next(&mut ws).await["type"], "snapshot");
    // A client's message is ignored, not echoed or fatal.
    ws.send(Message::Text("hello".into())).await.unwrap();
    quiet(&mut ws, 300).await;

    // Stopping the server closes the session (1001) and serve returns.
    let stopping = tokio::spawn(s.running.stop());
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Close(f))) => return f.map(|f| u16::from(f.code)),
                Some(Ok(_)) => {}
                _ => return None,
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(closed, Some(1001));
    tokio::time::timeout(Duration::from_secs(10), stopping).await.unwrap().unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_streams_its_progress_and_the_status_transition() {
    use steward_connectors::mail::{
        MaildirSource,
        demo::{DemoOptions, generate_maildir},
    };
    let s = start().await;
    let mut ws = open(s.addr, "").await;
    let snap = next(&mut ws).await;
    assert_eq!(snap["type"], "snapshot", "{snap}");
    assert!(snap["ingest"].is_null(), "{snap}");
    let ingest_item = |v: &Value| {
        v["system"]["items"].as_array().unwrap().iter().find(|i| i["name"] == "ingest").cloned()
    };
    assert_eq!(ingest_item(&snap).unwrap()["status"], "unknown", "{snap}");

    let st = Arc::clone(&s.steward);
    let maildir = s._dir.path().join("maildir");
    let summary = tokio::task::spawn_blocking(move || {
        generate_maildir(&maildir, &DemoOptions::new(120)).unwrap();
        let opts = steward_core::mirror::SyncOptions { account: Some("demo".into()), cancel: None };
        st.sync_mail(&MaildirSource::new(&maildir), &opts, &mut |_| {}).unwrap()
    })
    .await
    .unwrap();

    // Progress events never go back and end with the finished run; the ingest item turns ok.
    let mut done = -1;
    let mut finished = None;
    let mut transition = None;
    while finished.is_none() || transition.is_none() {
        let e = next_any(&mut ws).await;
        match e["type"].as_str() {
            Some("ingest") => {
                let p = &e["progress"];
                assert_eq!(p["run_id"], summary.run_id, "{e}");
                let d = p["files_done"].as_i64().unwrap();
                assert!(d >= done, "progress went back: {e}");
                done = d;
                if !p["finished_at"].is_null() {
                    finished = Some(e.clone());
                }
            }
            // The item ends ok, or a warning when files were in error (the demo has some).
            Some("status") if e["name"] == "ingest" => {
                let end = if summary.error_count > 0 { "warning" } else { "ok" };
                if e["to"] == end {
                    transition = Some(e.clone());
                }
            }
            Some("status") => {}
            _ => panic!("unexpected {e}"),
        }
    }
    let p = &finished.unwrap()["progress"];
    let files = i64::try_from(summary.files_scanned - summary.files_unchanged).unwrap();
    assert_eq!((p["files_done"].as_i64(), p["files_total"].as_i64()), (Some(files), Some(files)));
    let t = transition.unwrap();
    assert!(t["from"] == "unknown" || t["from"] == "ok", "{t}");
    // Levels that did not change are not repeated.
    quiet_levels(&mut ws, 600).await;
    drop(ws);
    s.running.stop().await.unwrap();
}

/// Asserts no sync progress arrives for `ms` (status items may still move).
async fn quiet_levels(ws: &mut Ws, ms: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
    while let Ok(m) = tokio::time::timeout_at(deadline, ws.next()).await {
        if let Some(Ok(Message::Text(t))) = m {
            let v: Value = serde_json::from_str(&t).unwrap();
            assert_ne!(v["type"], "ingest", "repeated {v}");
        }
    }
}

/// The agent's turn events stream on `/ws` with every other feed: a turn's start, its streamed
/// text and its end arrive once, in order, each with a cursor; a client that reconnects from
/// the snapshot's cursor is replayed exactly the same turn events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turn_events_stream_on_the_socket_and_replay_after_a_reconnect() {
    use steward_connectors::testing::models::{Reply, ScriptedServer, chat_answer};
    use steward_core::{
        agent::{Agent, AgentConfig},
        tools::Toolbox,
    };
    let model = ScriptedServer::start(|_, _| {
        Reply::Json(200, chat_answer("m", "Hello there.", &[], (20, 3, 0)))
    });
    let dir = tempfile::tempdir().unwrap();
    let llm = steward_connectors::testing::models::one_chat_target(&model.base_url, "m");
    let steward =
        Arc::new(Steward::builder().home(dir.path().join("home")).llm(llm).open().unwrap());
    let agent =
        Agent::open(Arc::new(Toolbox::new(Arc::clone(&steward))), AgentConfig::default()).unwrap();
    let state = AppState::new(
        Arc::clone(&steward),
        AccessToken::new(TOKEN).unwrap(),
        OriginPolicy::loopback(),
        "ada",
    )
    .with_agent(agent.clone());
    let config = ServeConfig { listen: "127.0.0.1:0".parse().unwrap(), tls: None };
    let running = spawn(state, config).await.unwrap();
    let mut ws = open(running.addr, "").await;
    let snap = next(&mut ws).await;
    assert_eq!(snap["type"], "snapshot", "{snap}");
    let from = snap["cursor"].as_str().unwrap().to_owned();
    let chat = agent.create_chat().unwrap().id;
    // The core's calls block: off the async threads, as the server makes them.
    let (a, c) = (agent.clone(), chat.clone());
    let run = tokio::task::spawn_blocking(move || a.start_turn(&c, "hi").unwrap()).await.unwrap();
    let mut live = Vec::new();
    loop {
        let e = next(&mut ws).await;
        assert_eq!(
            (e["type"].as_str(), e["chat_id"].as_str()),
            (Some("chat"), Some(&*chat)),
            "{e}"
        );
        assert_eq!(e["run_id"].as_str(), Some(&*run));
        let end = e["event"]["type"] == "turn_ended";
        live.push(e);
        if end {
            break;
        }
    }
    let kinds: Vec<&str> = live.iter().map(|e| e["event"]["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"turn_started"), "{kinds:?}");
    assert_eq!(live.last().unwrap()["event"]["reason"], "completed");
    let text: String = live
        .iter()
        .filter(|e| e["event"]["type"] == "text_delta")
        .map(|e| e["event"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Hello there.");
    let seqs: Vec<i64> = live.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order, once: {seqs:?}");
    quiet(&mut ws, 300).await;
    drop(ws);
    // Reconnecting from the snapshot's cursor replays exactly those events.
    let mut again = open(running.addr, &format!("?after={from}")).await;
    let mut replayed = Vec::new();
    while replayed.len() < live.len() {
        let e = next(&mut again).await;
        if e["type"] == "chat" {
            replayed.push(e);
        }
    }
    assert_eq!(replayed, live);
    drop(again);
    running.stop().await.unwrap();
    // The model client owns a blocking runtime: dropped off the async threads.
    tokio::task::spawn_blocking(move || {
        agent.shutdown();
        drop((agent, steward, model));
    })
    .await
    .unwrap();
}
