//! The write journal: operations and their states.

use axum::{Json, extract::State, http::Method, routing::get};
use serde::Deserialize;
use steward_core::journal::{OpState, Operation, OperationSummary};

use super::{ApiError, ApiPath, ApiQuery, AppState, Route, schema};

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::new(
            Method::GET,
            "/ops",
            "Journaled write operations, newest first",
            schema::<Vec<OperationSummary>>,
            get(list),
        )
        .query(schema::<OpsQuery>),
        Route::new(
            Method::GET,
            "/ops/{id}",
            "One operation with its complete input and evidence",
            schema::<Operation>,
            get(show),
        ),
    ]
}

/// Which operations to list.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub(super) struct OpsQuery {
    /// Only this state (`pending`, `started`, `backend_returned`, `confirmed`, …).
    state: Option<String>,
    /// Operations to skip.
    offset: usize,
    /// Operations to return (1..=100; absent: 20).
    #[schemars(range(min = 1, max = 100))]
    limit: Option<usize>,
}

async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<OpsQuery>,
) -> Result<Json<Vec<OperationSummary>>, ApiError> {
    state
        .call(move |s| {
            let op_state = q.state.as_deref().map(str::parse::<OpState>).transpose()?;
            s.list_write_operations(op_state, q.offset, q.limit.unwrap_or(20))
        })
        .await
        .map(Json)
}

async fn show(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<Operation>, ApiError> {
    state.call(move |s| s.read_write_operation(id)).await.map(Json)
}
