//! Health, counts, the audit trail and what the models cost.

use axum::{Json, extract::State, http::Method, routing::get};
use serde::{Deserialize, Serialize};
use steward_core::{
    AuditPage, audit::AuditQuery, llm::UsageReport, mirror::MirrorStats, runner::JobStatus,
    status::SystemStatus,
};

use super::{ApiError, ApiQuery, AppState, Route, schema};

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::new(
            Method::GET,
            "/stats",
            "Counts of the mirror: messages, mailboxes, body states, failed files",
            schema::<MirrorStats>,
            get(stats),
        ),
        Route::new(
            Method::GET,
            "/system/status",
            "Stores, disk, index, embedder, ingest, watches, audit and journal: ok, warning, error or unknown (observational)",
            schema::<SystemStatus>,
            get(status),
        ),
        Route::new(
            Method::GET,
            "/system/jobs",
            "The background jobs this server runs: configured or not, interval and budget, the last run (outcome, summary, error) and the next",
            schema::<Vec<JobStatus>>,
            get(jobs),
        ),
        Route::new(
            Method::GET,
            "/audit",
            "The redacted audit trail, newest first, filtered",
            schema::<AuditPage>,
            get(audit),
        )
        .query(schema::<AuditQuery>),
        Route::new(
            Method::GET,
            "/usage",
            "What the models cost over a window: totals and groups by service, action, model and UTC day, and outside agents' tool calls",
            schema::<UsageReport>,
            get(usage),
        )
        .query(schema::<UsageQuery>),
    ]
}

/// `GET /health`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(super) struct HealthResponse {
    /// Always `ok` when the server answers.
    status: &'static str,
    /// The server's version.
    version: &'static str,
}

pub(super) async fn health() -> Json<HealthResponse> {
    Json(HealthResponse { status: "ok", version: env!("CARGO_PKG_VERSION") })
}

async fn stats(State(state): State<AppState>) -> Result<Json<MirrorStats>, ApiError> {
    state.call(|s| s.mail_stats()).await.map(Json)
}

async fn status(State(state): State<AppState>) -> Result<Json<SystemStatus>, ApiError> {
    state.run(|s| s.system_status()).await.map(Json)
}

async fn jobs(State(state): State<AppState>) -> Result<Json<Vec<JobStatus>>, ApiError> {
    let Some(runner) = state.runner().map(std::sync::Arc::clone) else {
        return Err(ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "JOBS_NO_RUNNER",
            "this server runs no background jobs (steward serve runs the home's)",
        ));
    };
    state.call(move |_| runner.status()).await.map(Json)
}

async fn audit(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> Result<Json<AuditPage>, ApiError> {
    state.call(move |s| s.audit_page(&q)).await.map(Json)
}

/// The window of a usage report.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct UsageQuery {
    /// `7d`, `24h`, `90m` (before now), `all`, `YYYY-MM-DD` or an RFC 3339 instant (absent: `7d`).
    #[serde(default)]
    #[schemars(length(max = 40))]
    since: Option<String>,
}

async fn usage(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<UsageQuery>,
) -> Result<Json<UsageReport>, ApiError> {
    let since = q.since.unwrap_or_else(|| "7d".to_owned());
    state.call(move |s| s.usage_report(&since, steward_core::time::now_secs())).await.map(Json)
}
