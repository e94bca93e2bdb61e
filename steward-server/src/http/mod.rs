//! The HTTP + WebSocket API over steward-core.
//!
//! [`app`] builds the whole server from one route table ([`routes`]): each resource's module
//! lists its routes with the schemars types of their query, body and response, the same table
//! becomes the `Router` and the OpenAPI document ([`openapi::document`]), so the document cannot
//! drift from the routes. A handler extracts, calls the core on the blocking pool, and maps; if
//! it needed more, the core would grow it.
//!
//! The web client ([`web`]) is served at `/` from files embedded in the binary.
//!
//! Layers, outside in: Host/Origin checks on every route ([`auth`]), then the bearer token on
//! every route but `GET /health`. `/mcp` is the MCP face ([`crate::mcp`]) under the same
//! layers.

mod approvals;
pub mod attachments;
pub mod auth;
pub mod background;
pub mod chats;
mod devices;
mod error;
mod files;
pub mod idempotency;
pub mod live;
mod mail;
mod memory;
pub mod openapi;
mod ops;
mod pim;
mod policy;
mod serve;
mod system;
mod watches;
pub mod web;

use std::sync::Arc;

use axum::{
    Router,
    http::{Method, StatusCode},
    middleware::from_fn_with_state,
    routing::MethodRouter,
};
pub use error::{ApiError, ApiJson, ApiPath, ApiQuery, ErrorBody, status_of};
use schemars::{JsonSchema, Schema, SchemaGenerator};
pub use serve::{
    DEFAULT_PORT, Running, ServeConfig, ServeError, TLS_DRAIN_SECS, serve, shutdown_signal, spawn,
};
use steward_core::{
    Steward, StewardError,
    access::{AccessToken, OriginPolicy},
};

/// Where `steward serve` answers MCP clients (streamable HTTP).
pub const MCP_PATH: &str = "/mcp";

/// What every handler can reach: the core handle and the access rules.
#[derive(Debug)]
pub struct App {
    steward: Arc<Steward>,
    token: AccessToken,
    origins: OriginPolicy,
    person: String,
    live: live::Live,
    /// Bounds the core calls running at once (see [`core_concurrency`]).
    calls: tokio::sync::Semaphore,
    /// Set when served over TLS: cookies are then marked `Secure`.
    tls: std::sync::atomic::AtomicBool,
    /// The background runner the server runs while it serves, when one is attached.
    runner: std::sync::OnceLock<Arc<steward_core::runner::Runner>>,
    /// The agent whose chats the server serves, when one is attached.
    agent: std::sync::OnceLock<steward_core::agent::Agent>,
}

/// Core calls allowed to run at once: twice the available cores. SQLite and tantivy work is
/// CPU-bound; more threads than that only add context switches, open more reader connections
/// and grow memory, while the excess waits cheaply on the async side.
pub fn core_concurrency() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get) * 2
}

/// The router's state: a cheap handle on the [`App`].
#[derive(Debug, Clone)]
pub struct AppState(pub Arc<App>);

impl std::ops::Deref for AppState {
    type Target = App;

    fn deref(&self) -> &App {
        &self.0
    }
}

impl AppState {
    /// State for `steward`, accepting `token` for `person` and the hosts and origins of
    /// `origins` besides loopback.
    pub fn new(
        steward: Arc<Steward>,
        token: AccessToken,
        origins: OriginPolicy,
        person: impl Into<String>,
    ) -> Self {
        Self(Arc::new(App {
            steward,
            token,
            origins,
            person: person.into(),
            live: live::Live::default(),
            calls: tokio::sync::Semaphore::new(core_concurrency()),
            tls: std::sync::atomic::AtomicBool::new(false),
            runner: std::sync::OnceLock::new(),
            agent: std::sync::OnceLock::new(),
        }))
    }

    /// Runs `runner` while the server serves (started when it listens, stopped when it
    /// stops); `steward serve` attaches the home's configured runner. Without one the server
    /// schedules nothing.
    #[must_use]
    pub fn with_runner(self, runner: steward_core::runner::Runner) -> Self {
        let _ = self.runner.set(Arc::new(runner));
        self
    }

    /// The attached runner.
    pub fn runner(&self) -> Option<&Arc<steward_core::runner::Runner>> {
        self.runner.get()
    }

    /// Serves `agent`'s chats (`/chats`, `/runs`); `steward serve` attaches the home's agent.
    /// Without one those routes answer 503 `AGENT_UNAVAILABLE`.
    #[must_use]
    pub fn with_agent(self, agent: steward_core::agent::Agent) -> Self {
        let _ = self.agent.set(agent);
        self
    }

    /// The attached agent.
    pub fn agent(&self) -> Option<&steward_core::agent::Agent> {
        self.agent.get()
    }

    /// The core handle.
    pub fn steward(&self) -> &Arc<Steward> {
        &self.steward
    }

    /// Whether this state is served over TLS (its cookies are `Secure`).
    pub fn served_over_tls(&self) -> bool {
        self.tls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops the background work and closes live sessions; [`serve`] calls it when its
    /// shutdown signal fires, so in-flight requests finish and nothing keeps the server up.
    pub fn stop(&self) {
        self.live.stop();
        if let Some(agent) = self.agent.get() {
            agent.shutdown();
        }
    }

    /// Runs a core call on the blocking pool (SQLite and tantivy block).
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Steward) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let steward = Arc::clone(&self.steward);
        // The semaphore is never closed, so acquiring only waits.
        let _permit = self.calls.acquire().await;
        tokio::task::spawn_blocking(move || f(&steward)).await.map_err(|e| {
            tracing::error!(error = %e, "a core call panicked or was cancelled");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "INTERNAL",
                "internal error; the server log has the details",
            )
        })
    }

    /// Runs a fallible core call on the blocking pool and maps its error.
    pub(crate) async fn call<T, E>(
        &self,
        f: impl FnOnce(&Steward) -> Result<T, E> + Send + 'static,
    ) -> Result<T, ApiError>
    where
        T: Send + 'static,
        E: StewardError + Send + 'static,
    {
        self.run(f).await?.map_err(ApiError::from)
    }
}

/// A schema of `T` registered in the generator (a `$ref` into the document's components).
pub(crate) type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// The schema function of `T`.
pub(crate) fn schema<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// One route: its handler and its description.
pub struct Route {
    /// The method.
    pub method: Method,
    /// The path, with `{name}` parameters (the same syntax in axum and OpenAPI).
    pub path: &'static str,
    /// One line for the document.
    pub summary: &'static str,
    /// The query parameters' type, if any.
    pub(crate) query: Option<SchemaFn>,
    /// The JSON body's type, if any.
    pub(crate) body: Option<SchemaFn>,
    /// The 200 response's type.
    pub(crate) response: SchemaFn,
    /// Whether it is reachable without a token (`/health`, `/pair`).
    pub public: bool,
    /// The 200 response's media type.
    pub(crate) content_type: &'static str,
    /// Whether its `{id}` is a text id (`chat_…`, `mprop…`) rather than a number.
    pub(crate) text_id: bool,
    pub(crate) handler: MethodRouter<AppState>,
}

impl Route {
    pub(crate) fn new(
        method: Method,
        path: &'static str,
        summary: &'static str,
        response: SchemaFn,
        handler: MethodRouter<AppState>,
    ) -> Self {
        Self {
            method,
            path,
            summary,
            query: None,
            body: None,
            response,
            public: false,
            content_type: "application/json",
            text_id: false,
            handler,
        }
    }

    pub(crate) fn query(mut self, q: SchemaFn) -> Self {
        self.query = Some(q);
        self
    }

    pub(crate) fn body(mut self, b: SchemaFn) -> Self {
        self.body = Some(b);
        self
    }

    pub(crate) fn text_id(mut self) -> Self {
        self.text_id = true;
        self
    }

    pub(crate) fn public(mut self) -> Self {
        self.public = true;
        self
    }

    pub(crate) fn html(mut self) -> Self {
        self.content_type = "text/html";
        self
    }

    pub(crate) fn binary(mut self) -> Self {
        self.content_type = "application/octet-stream";
        self
    }
}

/// Every route of the API, grouped by resource.
pub fn routes() -> Vec<Route> {
    let mut all = vec![
        Route::new(
            Method::GET,
            "/health",
            "Liveness; the only route without a token",
            schema::<system::HealthResponse>,
            axum::routing::get(system::health),
        )
        .public(),
    ];
    all.extend(devices::routes());
    all.extend(mail::routes());
    all.extend(pim::routes());
    all.extend(files::routes());
    all.extend(memory::routes());
    all.extend(attachments::routes());
    all.extend(approvals::routes());
    all.extend(policy::routes());
    all.extend(ops::routes());
    all.extend(watches::routes());
    all.extend(chats::routes());
    all.extend(system::routes());
    all.extend(live::routes());
    all.push(Route::new(
        Method::GET,
        "/openapi.json",
        "This document",
        schema::<serde_json::Value>,
        axum::routing::get(openapi::serve_document),
    ));
    all
}

/// The whole server as a router.
pub fn app(state: AppState) -> Router {
    let (public, private): (Vec<_>, Vec<_>) = routes().into_iter().partition(|r| r.public);
    let mut guarded = Router::new();
    for r in private {
        guarded = guarded.route(r.path, r.handler);
    }
    // The MCP face of the agent's tools (streamable HTTP), behind the same checks.
    if let Some(agent) = state.agent() {
        guarded =
            guarded.nest_service(MCP_PATH, crate::mcp::http_service(Arc::clone(agent.toolbox())));
    }
    // route_layer: the last added runs first, so the token is checked before idempotency.
    let guarded = guarded
        .route_layer(from_fn_with_state(state.clone(), idempotency::idempotency))
        .route_layer(from_fn_with_state(state.clone(), auth::require_token));
    let mut open = Router::new();
    for r in public {
        open = open.route(r.path, r.handler);
    }
    // The web client's files: public, outside the document (they are not the API).
    open.merge(web::router())
        .merge(guarded)
        .fallback(not_found)
        .layer(from_fn_with_state(state.clone(), auth::check_origin))
        // No answer is ever sniffed into another type (a JSON body read as HTML).
        .layer(axum::middleware::map_response(nosniff))
        .with_state(state)
}

async fn nosniff(mut res: axum::response::Response) -> axum::response::Response {
    res.headers_mut()
        .entry(axum::http::header::X_CONTENT_TYPE_OPTIONS)
        .or_insert(axum::http::HeaderValue::from_static("nosniff"));
    res
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "NO_SUCH_ROUTE", "no such route")
}
