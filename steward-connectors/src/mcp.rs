//! Outside MCP servers as tool providers for Steward's agent (`[[mcp.servers]]`):
//!
//! ```toml
//! [mcp]
//! wait_secs = 120                 # Steward's own MCP face: how long a client's gated call
//!                                 # waits for the person (when it asked for progress); 0..=600
//!
//! [[mcp.servers]]
//! name = "notes"                  # a-z, 0-9, _: its tools become mcp.notes.<tool>
//! command = "python3"             # a local server over stdio …
//! args = ["notes_server.py"]
//! env = { NOTES_DIR = "~/notes" } # its environment: only PATH, HOME, LANG, TMPDIR and these
//! # url = "https://…/mcp"         # … or a streamable HTTP server
//! # token_file = "~/.config/notes.token"  # its bearer token (mode 0600)
//! timeout_secs = 30               # per call, 1..=600
//! start_timeout_secs = 15         # starting and listing, 1..=120
//! result_chars = 8000             # text per result, 500..=48000
//! ```
//!
//! The server starts on first use (the first turn that lists tools, or a call), is restarted
//! after it exits with a backoff (1 s doubling to [`MAX_BACKOFF_SECS`]), and a call that
//! outlives its timeout is abandoned and the server restarted. Its failures are typed tool
//! errors a turn reads and goes on from. What it returns is untrusted data, bounded to
//! [`MAX_RESULT_BYTES`] before the toolbox's own budget; its tools are gated until a person
//! lowers one (`steward policy set mcp.notes.read allow`). Its standard error goes to
//! `<home>/logs/mcp-<name>.stderr`, rewritten at each start.

use std::{
    collections::BTreeMap,
    future::Future,
    path::{Path, PathBuf},
    process::Stdio,
    sync::Arc,
    time::{Duration, Instant},
};

use rmcp::{
    RoleClient, ServiceExt,
    model::{
        CallToolRequestParams, ClientCapabilities, ClientConfig, ContentBlock, Implementation,
    },
    service::{Peer, RunningService},
    transport::{
        StreamableHttpClientTransport, TokioChildProcess,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde::Deserialize;
use serde_json::Value;
use steward_core::{
    ErrorKind, Steward,
    policy::ToolSpec,
    tools::{
        ExecError, ProvidedTools, SourceRef, ToolExecutor, ToolOutput, ToolProvider, ToolRun,
        Toolbox, check_external_input, external_name, valid_provider_name,
    },
};

use crate::mail::smtp::ConfigError;

/// Most outside servers one home may configure.
/// Fixed (not a setting).
pub const MAX_MCP_SERVERS: usize = 16;
/// Most tools taken from one server (the rest are left out, with a warning).
/// Fixed (not a setting).
pub const MAX_SERVER_TOOLS: usize = 128;
/// Most arguments and environment variables of a server's command, each.
/// Fixed (not a setting).
pub const MAX_COMMAND_ITEMS: usize = 64;
/// Seconds a call may take when the server's config does not say.
/// Default of `[[mcp.servers]] timeout_secs`.
pub const DEFAULT_CALL_TIMEOUT_SECS: u64 = 30;
/// Seconds starting a server and listing its tools may take when its config does not say.
/// Default of `[[mcp.servers]] start_timeout_secs`.
pub const DEFAULT_START_TIMEOUT_SECS: u64 = 15;
/// Longest wait before restarting a server that failed, seconds.
/// Fixed (not a setting): the upper end of the restart backoff.
pub const MAX_BACKOFF_SECS: u64 = 60;
/// Most bytes of input schemas taken from one server (the tools after are left out: every
/// model request carries them).
/// Fixed (not a setting).
pub const MAX_SERVER_SCHEMA_BYTES: usize = 128 * 1024;
/// Most bytes of text taken from one result (before the toolbox's character budget).
/// Fixed (not a setting).
pub const MAX_RESULT_BYTES: usize = 256 * 1024;
/// Largest token file read, bytes.
/// Fixed (not a setting).
const MAX_TOKEN_BYTES: u64 = 8 * 1024;
/// Characters of a call's input an approval card's summary shows.
/// Fixed (not a setting).
const SUMMARY_INPUT_CHARS: usize = 300;
/// The environment a server's process inherits (everything else is cleared).
const PASSED_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TMPDIR"];

/// `[[mcp.servers]]`: one outside server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Its name (`[a-z0-9_]`, at most 32): its tools are `mcp.<name>.<tool>`.
    pub name: String,
    /// The program of a stdio server.
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Its environment beyond PATH, HOME, LANG and TMPDIR.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The URL of a streamable HTTP server.
    pub url: Option<String>,
    /// A file holding its bearer token.
    pub token_file: Option<PathBuf>,
    /// Seconds a call may take.
    pub timeout_secs: Option<u64>,
    /// Seconds starting and listing may take.
    pub start_timeout_secs: Option<u64>,
    /// Characters of text per result.
    pub result_chars: Option<usize>,
}

/// `[mcp]`: the outside servers Steward's agent uses, and how Steward's own MCP face waits.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSettings {
    /// `[[mcp.servers]]`.
    #[serde(default)]
    pub servers: Vec<ServerConfig>,
    /// How long a client's gated call waits for the person's decision (when the client asked
    /// for progress), seconds, 0..=600 (0: it answers "pending" at once).
    #[serde(default)]
    pub wait_secs: u64,
}

/// `[mcp]` of `<home>/config.toml`, checked.
pub fn settings(mcp: Option<toml::Value>) -> Result<McpSettings, ConfigError> {
    let bad = |what: String| ConfigError(format!("[mcp]: {what}"));
    let Some(v) = mcp else { return Ok(McpSettings::default()) };
    let section: McpSettings = v.try_into().map_err(|e| bad(e.to_string()))?;
    if section.wait_secs > steward_core::tools::MAX_CLIENT_WAIT_SECS {
        return Err(bad(format!(
            "wait_secs must be 0..={}",
            steward_core::tools::MAX_CLIENT_WAIT_SECS
        )));
    }
    if section.servers.len() > MAX_MCP_SERVERS {
        return Err(bad(format!("at most {MAX_MCP_SERVERS} servers")));
    }
    let mut seen = std::collections::BTreeSet::new();
    for s in &section.servers {
        let at = |what: &str| ConfigError(format!("[[mcp.servers]] {}: {what}", s.name));
        if !valid_provider_name(&s.name) {
            return Err(at("the name must be 1..=32 of a-z, 0-9 and _"));
        }
        if !seen.insert(s.name.clone()) {
            return Err(at("named twice"));
        }
        match (&s.command, &s.url) {
            (Some(c), None) if !c.trim().is_empty() => {}
            (None, Some(u)) if u.starts_with("http://") || u.starts_with("https://") => {}
            (None, Some(_)) => return Err(at("url must be http:// or https://")),
            _ => return Err(at("give either command (stdio) or url (HTTP)")),
        }
        if s.token_file.is_some() && s.url.is_none() {
            return Err(at("token_file is for url servers"));
        }
        if s.args.len() > MAX_COMMAND_ITEMS || s.env.len() > MAX_COMMAND_ITEMS {
            return Err(at(&format!("at most {MAX_COMMAND_ITEMS} args and env entries")));
        }
        if s.timeout_secs.is_some_and(|t| !(1..=600).contains(&t)) {
            return Err(at("timeout_secs must be 1..=600"));
        }
        if s.start_timeout_secs.is_some_and(|t| !(1..=120).contains(&t)) {
            return Err(at("start_timeout_secs must be 1..=120"));
        }
    }
    Ok(section)
}

/// Adds each configured server to `toolbox` as a provider (nothing starts yet).
pub fn register(
    toolbox: &mut Toolbox,
    home: &Path,
    servers: Vec<ServerConfig>,
) -> Result<(), steward_core::tools::ToolError> {
    if servers.is_empty() {
        return Ok(());
    }
    let rt = Arc::new(McpRuntime::new().map_err(|e| {
        steward_core::tools::ToolError::Registration(format!("MCP client runtime: {e}"))
    })?);
    for config in servers {
        let budget = config.result_chars.unwrap_or(steward_core::tools::DEFAULT_RESULT_CHARS);
        let name = config.name.clone();
        let server = McpServer::new(config, home, Arc::clone(&rt));
        toolbox.add_provider(&name, Arc::new(server), budget)?;
    }
    Ok(())
}

/// The runtime the MCP clients run on: their own, so calls work from any thread (a turn's,
/// a blocking task's, a command's) and never block a caller's runtime.
struct McpRuntime(Option<tokio::runtime::Runtime>);

impl McpRuntime {
    fn new() -> std::io::Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("mcp-client")
            .enable_all()
            .build()?;
        Ok(Self(Some(rt)))
    }

    /// Runs `fut` on the runtime and waits for it on this thread, at most `limit` (the
    /// future bounds itself; this is the backstop).
    fn block<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
        limit: Duration,
    ) -> Option<T> {
        let rt = self.0.as_ref()?;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let task = rt.spawn(async move {
            let _ = tx.send(fut.await);
        });
        let got = rx.recv_timeout(limit + Duration::from_secs(2)).ok();
        if got.is_none() {
            // Nothing is left running that could still land after the caller gave up.
            task.abort();
        }
        got
    }
}

impl Drop for McpRuntime {
    fn drop(&mut self) {
        // Dropping a runtime inside another's async context panics; this never waits.
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

type Service = RunningService<RoleClient, ClientConfig>;

#[derive(Default)]
struct Conn {
    service: Option<Service>,
    /// Which start the running service is: a failure seen by a call to an older one changes
    /// nothing.
    generation: u64,
    /// Whether the running service has answered a listing or a call. One that fails before
    /// it ever answered is a failing start, and backs off.
    proven: bool,
    failures: u32,
    retry_at: Option<Instant>,
    last_error: String,
}

impl Conn {
    /// Stops the running service (its process is killed when the transport drops).
    fn stop(&mut self) {
        if let Some(s) = self.service.take() {
            tokio::spawn(async move {
                let _ = s.cancel().await;
            });
        }
    }

    /// Counts a failure and waits before the next start: 1 s doubling to
    /// [`MAX_BACKOFF_SECS`].
    fn back_off(&mut self, why: String) {
        self.failures = self.failures.saturating_add(1);
        let secs = 1u64
            .checked_shl(self.failures.saturating_sub(1).min(16))
            .unwrap_or(MAX_BACKOFF_SECS)
            .min(MAX_BACKOFF_SECS);
        self.retry_at = Some(Instant::now() + Duration::from_secs(secs));
        self.last_error = why;
    }

    /// After the running service failed: stopped; a proven one starts again on the next use,
    /// one that never answered backs off.
    fn failed(&mut self, why: String) {
        self.stop();
        if self.proven {
            self.retry_at = None;
            self.last_error = why;
        } else {
            self.back_off(why);
        }
    }
}

struct Inner {
    config: ServerConfig,
    stderr: PathBuf,
    call_timeout: Duration,
    start_timeout: Duration,
    conn: tokio::sync::Mutex<Conn>,
}

/// One outside server: started on first use, supervised, its tools listed as Steward tools.
pub struct McpServer {
    inner: Arc<Inner>,
    rt: Arc<McpRuntime>,
}

impl McpServer {
    fn new(config: ServerConfig, home: &Path, rt: Arc<McpRuntime>) -> Self {
        let stderr = home.join("logs").join(format!("mcp-{}.stderr", config.name));
        let call_timeout =
            Duration::from_secs(config.timeout_secs.unwrap_or(DEFAULT_CALL_TIMEOUT_SECS));
        let start_timeout =
            Duration::from_secs(config.start_timeout_secs.unwrap_or(DEFAULT_START_TIMEOUT_SECS));
        let inner = Inner {
            config,
            stderr,
            call_timeout,
            start_timeout,
            conn: tokio::sync::Mutex::new(Conn::default()),
        };
        Self { inner: Arc::new(inner), rt }
    }
}

impl Inner {
    fn name(&self) -> &str {
        &self.config.name
    }

    /// The running server's peer and its generation, starting it when it is not running
    /// (unless it is backing off after failures).
    async fn peer(&self) -> Result<(Peer<RoleClient>, u64), String> {
        let mut c = self.conn.lock().await;
        if let Some(s) = &c.service {
            // The service loop ends when the process exits (its pipe closes).
            if !s.is_closed() && !s.peer().is_transport_closed() {
                return Ok((s.peer().clone(), c.generation));
            }
            c.failed("the server exited".to_owned());
        }
        if let Some(at) = c.retry_at {
            let now = Instant::now();
            if now < at {
                return Err(format!(
                    "the MCP server {} is restarting in {} s (last failure: {})",
                    self.name(),
                    (at - now).as_secs().max(1),
                    c.last_error
                ));
            }
        }
        let started = tokio::time::timeout(self.start_timeout, self.start()).await;
        let err = match started {
            Ok(Ok(service)) => {
                c.retry_at = None;
                c.generation += 1;
                c.proven = false;
                let peer = service.peer().clone();
                c.service = Some(service);
                tracing::info!(server = self.name(), "MCP server started");
                return Ok((peer, c.generation));
            }
            Ok(Err(e)) => e,
            Err(_) => format!("it did not start within {} s", self.start_timeout.as_secs()),
        };
        c.back_off(err.clone());
        tracing::warn!(server = self.name(), error = %err, "MCP server failed to start");
        Err(format!("the MCP server {} cannot start: {err}", self.name()))
    }

    /// Start `generation` answered: its failures are forgotten.
    async fn answered(&self, generation: u64) {
        let mut c = self.conn.lock().await;
        if c.generation == generation {
            c.proven = true;
            c.failures = 0;
        }
    }

    /// Start `generation` failed a listing or a call so that it needs a new process (no
    /// answer in time, its transport gone).
    async fn failed(&self, generation: u64, why: &str) {
        let mut c = self.conn.lock().await;
        if c.generation == generation && c.service.is_some() {
            c.failed(why.to_owned());
        }
    }

    async fn start(&self) -> Result<Service, String> {
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("steward", env!("CARGO_PKG_VERSION")),
        );
        if let Some(url) = &self.config.url {
            let mut t = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            if let Some(file) = &self.config.token_file {
                if url.starts_with("http://") && !loopback(url) {
                    return Err(format!(
                        "{url}: a token is sent only over https (or plain http to this machine)"
                    ));
                }
                t = t.auth_header(read_token(file)?);
            }
            // reqwest is built without a default crypto provider (see steward_core::net).
            steward_core::net::install_crypto_provider();
            let transport = StreamableHttpClientTransport::from_config(t);
            return client.serve(transport).await.map_err(|e| e.to_string());
        }
        let program = self.config.command.as_deref().unwrap_or_default();
        let mut cmd = tokio::process::Command::new(expand(Path::new(program)));
        cmd.args(&self.config.args).env_clear();
        for key in PASSED_ENV {
            if let Some(v) = std::env::var_os(key) {
                cmd.env(key, v);
            }
        }
        for (k, v) in &self.config.env {
            cmd.env(k, expand(Path::new(v)));
        }
        // Killed when its transport drops (a restart, the toolbox closing).
        cmd.kill_on_drop(true);
        let stderr = match self.stderr.parent().map(std::fs::create_dir_all) {
            Some(Ok(())) => {
                std::fs::File::create(&self.stderr).map_or_else(|_| Stdio::null(), Stdio::from)
            }
            _ => Stdio::null(),
        };
        let (transport, _) = TokioChildProcess::builder(cmd)
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("{program}: {e}"))?;
        client.serve(transport).await.map_err(|e| e.to_string())
    }
}

fn expand(path: &Path) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => std::env::var_os("HOME")
            .map_or_else(|| path.to_path_buf(), |h| PathBuf::from(h).join(rest)),
        Err(_) => path.to_path_buf(),
    }
}

/// Whether `url` names this machine (`localhost`, `127.x`, `[::1]`).
fn loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let host = if host.starts_with('[') {
        host.split(']').next().unwrap_or_default().trim_start_matches('[')
    } else {
        host.split(':').next().unwrap_or_default()
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The bearer token in `file`: a file only its owner can read (on Unix), at most
/// [`MAX_TOKEN_BYTES`] (read through the one handle that was checked), trimmed.
fn read_token(file: &Path) -> Result<String, String> {
    use std::io::Read as _;
    let file = expand(file);
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", file.display());
    let f = std::fs::File::open(&file).map_err(|e| at(&e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = f.metadata().map_err(|e| at(&e))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(at(&"others can read it (chmod 600)"));
        }
    }
    let mut token = String::new();
    f.take(MAX_TOKEN_BYTES + 1).read_to_string(&mut token).map_err(|e| at(&e))?;
    if token.len() as u64 > MAX_TOKEN_BYTES {
        return Err(at(&format!("larger than {MAX_TOKEN_BYTES} bytes")));
    }
    Ok(token.trim().to_owned())
}

impl ToolProvider for McpServer {
    fn discover(&self) -> Result<ProvidedTools, String> {
        let inner = Arc::clone(&self.inner);
        // Starting and listing share the start timeout, each.
        let limit = inner.start_timeout * 2;
        let listed = self
            .rt
            .block(
                async move {
                    let (peer, generation) = inner.peer().await?;
                    let why = match tokio::time::timeout(inner.start_timeout, peer.list_all_tools())
                        .await
                    {
                        Ok(Ok(tools)) => {
                            inner.answered(generation).await;
                            return Ok(tools);
                        }
                        Ok(Err(e)) => format!("listing its tools: {}", service_error(&e)),
                        Err(_) => format!(
                            "listing its tools took longer than {} s",
                            inner.start_timeout.as_secs()
                        ),
                    };
                    inner.failed(generation, &why).await;
                    Err(why)
                },
                limit,
            )
            .unwrap_or_else(|| Err("the MCP client did not answer".to_owned()))?;
        let server = self.inner.name();
        if listed.len() > MAX_SERVER_TOOLS {
            tracing::warn!(
                server,
                listed = listed.len(),
                "only the first {MAX_SERVER_TOOLS} tools are kept"
            );
        }
        let mut out: ProvidedTools = Vec::new();
        let mut schema_bytes = 0usize;
        for tool in listed.into_iter().take(MAX_SERVER_TOOLS) {
            let Some(name) = external_name(server, &tool.name) else {
                tracing::warn!(server, "a tool whose name cannot be used is left out");
                continue;
            };
            let schema = Value::Object((*tool.input_schema).clone());
            schema_bytes += serde_json::to_vec(&schema).map_or(usize::MAX, |b| b.len());
            if schema_bytes > MAX_SERVER_SCHEMA_BYTES {
                tracing::warn!(server, tool = %name, "left out: the server's schemas are over {MAX_SERVER_SCHEMA_BYTES} bytes");
                break;
            }
            let description = tool.description.as_deref().unwrap_or_default();
            match ToolSpec::external(&name, server, description, schema.clone()) {
                Ok(spec) => {
                    let executor = McpTool {
                        inner: Arc::clone(&self.inner),
                        rt: Arc::clone(&self.rt),
                        name,
                        tool: tool.name.to_string(),
                        schema,
                    };
                    out.push((spec, Arc::new(executor)));
                }
                Err(e) => tracing::warn!(server, tool = %name, error = %e, "a tool left out"),
            }
        }
        Ok(out)
    }
}

/// A client error in words of our own: a JSON-RPC error's message is the server's text, so
/// only its code is kept (what the server says reaches the model only as fenced data).
fn service_error(e: &rmcp::service::ServiceError) -> String {
    match e {
        rmcp::service::ServiceError::McpError(e) => {
            format!("the server answered with JSON-RPC error {}", e.code.0)
        }
        e => e.to_string(),
    }
}

/// One tool of an outside server.
struct McpTool {
    inner: Arc<Inner>,
    rt: Arc<McpRuntime>,
    /// Its registry name (`mcp.<server>.<tool>`).
    name: String,
    /// Its name as the server gives it.
    tool: String,
    schema: Value,
}

impl ToolExecutor for McpTool {
    fn preflight(&self, _: &Steward, input: &Value) -> Result<Value, String> {
        check_external_input(&self.schema, input)
    }

    fn summary(&self, _: &Steward, input: &Value) -> String {
        let mut args = serde_json::to_string(input).unwrap_or_default();
        if let Some((at, _)) = args.char_indices().nth(SUMMARY_INPUT_CHARS) {
            args.truncate(at);
            args.push('…');
        }
        format!("{} (outside MCP server {}) with {args}", self.name, self.inner.name())
    }

    fn run(&self, _: &ToolRun<'_>, input: &Value) -> Result<ToolOutput, ExecError> {
        let server = self.inner.name().to_owned();
        let args = input.as_object().cloned().unwrap_or_default();
        let inner = Arc::clone(&self.inner);
        let tool = self.tool.clone();
        let limit = inner.start_timeout + inner.call_timeout;
        let called = self.rt.block(
            async move {
                let (peer, generation) =
                    inner.peer().await.map_err(|e| ("MCP_SERVER_UNAVAILABLE", e))?;
                let params = CallToolRequestParams::new(tool).with_arguments(args);
                match tokio::time::timeout(inner.call_timeout, peer.call_tool(params)).await {
                    Ok(Ok(r)) => {
                        inner.answered(generation).await;
                        Ok(r)
                    }
                    Ok(Err(e)) => {
                        let why = service_error(&e);
                        if matches!(e, rmcp::service::ServiceError::McpError(_)) {
                            // It answered: alive, it refused.
                            inner.answered(generation).await;
                        } else if peer.is_transport_closed() {
                            inner.failed(generation, &why).await;
                        }
                        Err(("MCP_CALL_FAILED", why))
                    }
                    Err(_) => {
                        let why = format!(
                            "no answer within {} s (the server is restarted)",
                            inner.call_timeout.as_secs()
                        );
                        inner.failed(generation, &why).await;
                        Err(("MCP_TIMEOUT", why))
                    }
                }
            },
            limit,
        );
        let result = match called {
            Some(Ok(r)) => r,
            Some(Err((code, why))) => {
                return Err(ExecError {
                    code,
                    kind: ErrorKind::Unavailable,
                    message: format!("{server}: {why}"),
                });
            }
            None => {
                return Err(ExecError {
                    code: "MCP_TIMEOUT",
                    kind: ErrorKind::Unavailable,
                    message: format!("{server}: the MCP client did not answer"),
                });
            }
        };
        // A tool's own error is its text: data from outside like any result (fenced, and
        // followed by taint tracking), not an error message of Steward's.
        let mut text = content_text(&result.content);
        let mut data = result.structured_content.unwrap_or(Value::Null);
        if result.is_error == Some(true) {
            text = format!("the tool reported an error:\n{text}");
            data = serde_json::json!({ "is_error": true, "structured": data });
        }
        let mut out = ToolOutput::text(text);
        out.data = data;
        let short = self.name.rsplit('.').next().unwrap_or_default().to_owned();
        out.sources = vec![SourceRef::External { server, tool: short }];
        Ok(out)
    }
}

/// The text of a result's content, other kinds named, at most [`MAX_RESULT_BYTES`].
fn content_text(content: &[ContentBlock]) -> String {
    let mut text = String::new();
    for block in content {
        if !text.is_empty() {
            text.push('\n');
        }
        match block.as_text() {
            Some(t) => text.push_str(&t.text),
            None => text.push_str("[non-text content omitted]"),
        }
        if text.len() > MAX_RESULT_BYTES {
            let mut at = MAX_RESULT_BYTES;
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text.truncate(at);
            text.push_str("\n[… cut at the MCP result bound]");
            break;
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<ServerConfig>, ConfigError> {
        let v: toml::Value = toml::from_str(text).unwrap();
        settings(v.get("mcp").cloned()).map(|s| s.servers)
    }

    #[test]
    fn bad_server_configs_are_refused_with_what_is_wrong() {
        let ok = parse("[[mcp.servers]]\nname = \"notes\"\ncommand = \"python3\"\n").unwrap();
        assert_eq!(ok[0].name, "notes");
        for (text, says) in [
            ("[[mcp.servers]]\nname = \"Notes\"\ncommand = \"x\"\n", "the name"),
            ("[[mcp.servers]]\nname = \"n\"\n", "either command"),
            ("[[mcp.servers]]\nname = \"n\"\ncommand = \"x\"\nurl = \"http://a\"\n", "either"),
            ("[[mcp.servers]]\nname = \"n\"\nurl = \"ftp://a\"\n", "http://"),
            ("[[mcp.servers]]\nname = \"n\"\ncommand = \"x\"\ntoken_file = \"t\"\n", "token_file"),
            ("[[mcp.servers]]\nname = \"n\"\ncommand = \"x\"\ntimeout_secs = 0\n", "timeout_secs"),
            ("[[mcp.servers]]\nname = \"n\"\ncommand = \"x\"\nbogus = 1\n", "bogus"),
            (
                "[[mcp.servers]]\nname = \"n\"\ncommand = \"x\"\n[[mcp.servers]]\nname = \"n\"\ncommand = \"y\"\n",
                "twice",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        let wait = parse("[mcp]\nwait_secs = 601\n").unwrap_err().to_string();
        assert!(wait.contains("wait_secs must be 0..=600"), "{wait}");
    }

    #[test]
    fn a_token_is_read_only_from_a_private_file_and_sent_to_loopback_over_plain_http() {
        for url in ["http://127.0.0.1:8000/mcp", "http://localhost/mcp", "http://[::1]:9/x"] {
            assert!(loopback(url), "{url}");
        }
        for url in ["http://example.org/mcp", "http://127.0.0.1.evil.example/", "http://10.0.0.1/"]
        {
            assert!(!loopback(url), "{url}");
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "  secret-token\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
            assert!(read_token(&file).unwrap_err().contains("chmod 600"));
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        assert_eq!(read_token(&file).unwrap(), "secret-token");
        std::fs::write(&file, "x".repeat(9_000)).unwrap();
        assert!(read_token(&file).unwrap_err().contains("larger than"));
    }

    #[test]
    fn a_server_that_cannot_start_is_an_unavailable_provider_typed_and_backing_off() {
        let dir = tempfile::tempdir().unwrap();
        let s = Arc::new(Steward::builder().home(dir.path().join("home")).open().unwrap());
        let mut tb = Toolbox::new(Arc::clone(&s));
        let config = ServerConfig {
            name: "broken".into(),
            command: Some(dir.path().join("no-such-program").display().to_string()),
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            token_file: None,
            timeout_secs: None,
            start_timeout_secs: Some(5),
            result_chars: None,
        };
        register(&mut tb, dir.path(), vec![config]).unwrap();
        // Listing does not fail over it; the inventory says why.
        assert!(tb.list().iter().all(|t| !t.name.starts_with("mcp.")));
        let inv = tb.inventory();
        let u = inv.unavailable.iter().find(|u| u.name == "mcp.broken.*").unwrap();
        assert!(u.reason.contains("no-such-program: No such file"), "{}", u.reason);
        // A call is a typed failure; the next one within the backoff does not try again.
        let input = serde_json::json!({});
        let call = steward_core::ToolCall {
            actor: "agent:steward",
            chat: None,
            tool: "mcp.broken.anything",
            input: &input,
        };
        let e = tb.call(&call, &steward_core::policy::DecisionContext::default()).unwrap_err();
        assert_eq!(steward_core::StewardError::code(&e), "TOOL_PROVIDER_UNAVAILABLE");
        // Backing off ("restarting in 1 s") or, on a slow machine, a new failed start.
        assert!(e.to_string().contains("no-such-program: No such file"), "{e}");
        // Nothing was asked of a person, nothing audited as run.
        let all = steward_core::approval::ApprovalQuery::default();
        assert!(s.list_approvals(&all).unwrap().is_empty());
    }
}
