//! WebSocket fan-out: 200 clients on `GET /ws` of a real server (loopback socket), 1,000
//! approval events made as fast as the store takes them; every client must receive every event
//! once and in order. Prints delivery latency (event committed → client received) and the
//! whole run's throughput. `cargo bench -p steward-server --bench ws_fanout`
//! (`STEWARD_WS_CLIENTS`, `STEWARD_WS_EVENTS` override).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures_util::StreamExt as _;
use serde_json::{Value, json};
use steward_core::{
    Steward,
    access::{AccessToken, OriginPolicy},
    approval::NewApproval,
    policy::Level,
};
use steward_server::http::{AppState, ServeConfig, spawn};
use tokio_tungstenite::{connect_async, tungstenite::client::IntoClientRequest as _};

const TOKEN: &str = "0123456789abcdef0123456789abcdef-bench";

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let clients = env("STEWARD_WS_CLIENTS", 200);
    let events = env("STEWARD_WS_EVENTS", 1_000);
    let dir = tempfile::tempdir().unwrap();
    let steward = Arc::new(Steward::builder().home(dir.path()).open().unwrap());
    let state = AppState::new(
        Arc::clone(&steward),
        AccessToken::new(TOKEN).unwrap(),
        OriginPolicy::loopback(),
        "ada",
    );
    let config = ServeConfig { listen: "127.0.0.1:0".parse().unwrap(), tls: None };
    let running = spawn(state, config).await.unwrap();
    let addr = running.addr;

    let mut sockets = Vec::with_capacity(clients);
    for _ in 0..clients {
        let mut req = format!("ws://{addr}/ws").into_client_request().unwrap();
        req.headers_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        let (mut ws, _) = connect_async(req).await.unwrap();
        let first: Value = match ws.next().await.unwrap().unwrap() {
            tokio_tungstenite::tungstenite::Message::Text(t) => serde_json::from_str(&t).unwrap(),
            m => panic!("{m:?}"),
        };
        assert_eq!(first["type"], "snapshot");
        sockets.push(ws);
    }
    // When each approval's `requested` event was committed.
    let committed: Arc<Mutex<HashMap<i64, Instant>>> = Arc::default();
    let readers: Vec<_> = sockets
        .into_iter()
        .map(|mut ws| {
            tokio::spawn(async move {
                let mut got = Vec::with_capacity(events);
                while got.len() < events {
                    let m = tokio::time::timeout(Duration::from_secs(60), ws.next())
                        .await
                        .expect("an event within 60 s")
                        .unwrap()
                        .unwrap();
                    if let tokio_tungstenite::tungstenite::Message::Text(t) = m {
                        let v: Value = serde_json::from_str(&t).unwrap();
                        if v["type"] == "approval" {
                            got.push((v["approval_id"].as_i64().unwrap(), Instant::now()));
                        }
                    }
                }
                got
            })
        })
        .collect();
    let started = Instant::now();
    let st = Arc::clone(&steward);
    let made = Arc::clone(&committed);
    let ids = tokio::task::spawn_blocking(move || {
        let approvals = st.approvals().unwrap();
        (0..events)
            .map(|n| {
                let a = NewApproval {
                    chat: None,
                    requested_by: "agent:bench".into(),
                    tool: "mail.send".into(),
                    input: json!({"to": ["a@example.org"], "subject": format!("n{n}"), "body": "x"}),
                    summary: format!("n{n}"),
                    level: Level::Confirm,
                    timeout_secs: None,
                    taint: None,
                };
                let id = approvals.request(&a, None, steward_core::time::now_secs()).unwrap().id;
                made.lock().unwrap().insert(id, Instant::now());
                id
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let produced = started.elapsed();
    let mut latencies = Vec::with_capacity(clients * events);
    for r in readers {
        let got = r.await.unwrap();
        let order: Vec<i64> = got.iter().map(|(id, _)| *id).collect();
        assert_eq!(order, ids, "every event, once, in order");
        let made = committed.lock().unwrap();
        latencies.extend(
            got.iter().map(|(id, at)| at.saturating_duration_since(made[id]).as_secs_f64() * 1e3),
        );
    }
    let total = started.elapsed();
    latencies.sort_by(f64::total_cmp);
    println!(
        "| clients | events | deliveries | produced in | all delivered in | latency p50 | p99 | max |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {clients} | {events} | {} (all in order, none missing or repeated) | {:.2} s | {:.2} s | {:.0} ms | {:.0} ms | {:.0} ms |",
        latencies.len(),
        produced.as_secs_f64(),
        total.as_secs_f64(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.last().copied().unwrap_or(0.0)
    );
    running.stop().await.unwrap();
}
