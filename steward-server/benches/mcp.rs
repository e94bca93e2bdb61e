//! MCP over streamable HTTP against the REST route, in the same run: `tools/call` of
//! `mail.search` through `/mcp` (rmcp's own client, one session) and `GET /search` with the same
//! free-text queries, alternated one by one on a real loopback server over a 100,000-message
//! home; then 32 MCP sessions at once. Prints p50/p99 of each and the errors.
//!
//! `scripts/bench mcp` (it makes the home: `target/bench-data/http-home-100000`);
//! `STEWARD_BENCH_HOME`, `STEWARD_MCP_ROUNDS`, `STEWARD_MCP_SESSIONS` override.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use rmcp::{
    ServiceExt,
    model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::json;
use steward_core::access::{AccessToken, OriginPolicy};
use steward_server::http::{AppState, ServeConfig, spawn};

const TOKEN: &str = "0123456789abcdef0123456789abcdef-bench";
const QUERIES: [&str; 6] =
    ["invoice", "meeting agenda", "condominio", "payment", "report", "technician tuesday"];

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn summary(name: &str, mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    let p50 = percentile(&ms, 0.5);
    println!(
        "{name:<44} n={:>5}  p50 {:>6.2} ms  p99 {:>6.2} ms  max {:>6.2} ms",
        ms.len(),
        p50,
        percentile(&ms, 0.99),
        ms[ms.len() - 1]
    );
    p50
}

type Client = rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>;

async fn session(addr: std::net::SocketAddr, name: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"))
        .auth_header(TOKEN);
    let transport = StreamableHttpClientTransport::from_config(config);
    ClientConfig::new(ClientCapabilities::default(), Implementation::new(name, "1"))
        .serve(transport)
        .await
        .expect("an MCP session")
}

async fn mcp_search(client: &Client, query: &str) -> Result<(), String> {
    let args = json!({"query": query, "limit": 8});
    let params = CallToolRequestParams::new("mail.search")
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    let r = client.peer().call_tool(params).await.map_err(|e| e.to_string())?;
    if r.is_error == Some(true) {
        return Err(format!("{:?}", r.content));
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let home = std::env::var_os("STEWARD_BENCH_HOME").map_or_else(
        || steward_connectors::testing::workspace_root().join("target/bench-data/http-home-100000"),
        std::path::PathBuf::from,
    );
    assert!(
        home.join("mirror.db").exists(),
        "no home at {} (scripts/bench mcp makes it)",
        home.display()
    );
    let rounds = env("STEWARD_MCP_ROUNDS", 600);
    let sessions = env("STEWARD_MCP_SESSIONS", 32);
    let steward = Arc::new(steward_connectors::home::open(Some(home.clone())).unwrap());
    let messages = steward.mail_stats().map(|s| s.messages_live).unwrap_or(0);
    let agent = steward_connectors::home::agent(Arc::clone(&steward)).unwrap();
    let state = AppState::new(
        Arc::clone(&steward),
        AccessToken::new(TOKEN).unwrap(),
        OriginPolicy::loopback(),
        "ada",
    )
    .with_agent(agent);
    let config = ServeConfig { listen: "127.0.0.1:0".parse().unwrap(), tls: None };
    let running = spawn(state, config).await.unwrap();
    let addr = running.addr;
    println!("home: {} ({messages} messages), {rounds} rounds", home.display());

    steward_core::net::install_crypto_provider();
    let http = reqwest::Client::new();
    let rest = |q: &str| {
        let req = http
            .get(format!("http://{addr}/search?text={}&limit=8", q.replace(' ', "%20")))
            .bearer_auth(TOKEN)
            .send();
        async move {
            let r = req.await.map_err(|e| e.to_string())?;
            if !r.status().is_success() {
                return Err(r.status().to_string());
            }
            r.bytes().await.map(|_| ()).map_err(|e| e.to_string())
        }
    };
    let client = session(addr, "bench").await;
    // Warm both paths (caches, connections).
    for q in QUERIES.iter().cycle().take(60) {
        rest(q).await.unwrap();
        mcp_search(&client, q).await.unwrap();
    }
    let (mut rest_ms, mut mcp_ms) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for (i, q) in QUERIES.iter().cycle().take(rounds).enumerate() {
        // Alternate which goes first, so neither always finds the other's warm cache.
        let run_rest = async {
            let t = Instant::now();
            rest(q).await.unwrap();
            t.elapsed().as_secs_f64() * 1e3
        };
        if i % 2 == 0 {
            rest_ms.push(run_rest.await);
            let t = Instant::now();
            mcp_search(&client, q).await.unwrap();
            mcp_ms.push(t.elapsed().as_secs_f64() * 1e3);
        } else {
            let t = Instant::now();
            mcp_search(&client, q).await.unwrap();
            mcp_ms.push(t.elapsed().as_secs_f64() * 1e3);
            rest_ms.push(run_rest.await);
        }
    }
    let rest_p50 = summary("GET /search (REST)", rest_ms);
    let mcp_p50 = summary("tools/call mail.search (MCP, streamable HTTP)", mcp_ms);
    println!("MCP p50 − REST p50: {:+.2} ms (target: ≤ 1 ms)", mcp_p50 - rest_p50);

    // Many sessions at once.
    let per = (rounds / sessions).max(10);
    let started = Instant::now();
    let tasks: Vec<_> = (0..sessions)
        .map(|n| {
            tokio::spawn(async move {
                let c = session(addr, &format!("bench-{n}")).await;
                let mut ms = Vec::with_capacity(per);
                let mut errors = 0usize;
                for q in QUERIES.iter().cycle().skip(n).take(per) {
                    let t = Instant::now();
                    match tokio::time::timeout(Duration::from_secs(60), mcp_search(&c, q)).await {
                        Ok(Ok(())) => ms.push(t.elapsed().as_secs_f64() * 1e3),
                        _ => errors += 1,
                    }
                }
                let _ = c.cancel().await;
                (ms, errors)
            })
        })
        .collect();
    let (mut all, mut errors) = (Vec::new(), 0usize);
    for t in tasks {
        match t.await {
            Ok((ms, e)) => {
                all.extend(ms);
                errors += e;
            }
            Err(_) => errors += per,
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let calls = all.len();
    summary(&format!("{sessions} MCP sessions at once"), all);
    println!(
        "{sessions} sessions × {per} calls: {calls} ok, {errors} errors, {:.0} calls/s",
        calls as f64 / wall
    );
    let _ = client.cancel().await;
    assert_eq!(errors, 0, "no errors under {sessions} sessions");
}
