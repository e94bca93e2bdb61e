//! The write journal: operations and their states.

use axum::{Json, extract::State, http::Method, routing::get};
use steward_core::journal::{Operation, OperationSummary, OpsQuery};

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

async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<OpsQuery>,
) -> Result<Json<Vec<OperationSummary>>, ApiError> {
    state.call(move |s| s.query_write_operations(&q)).await.map(Json)
}

async fn show(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<Operation>, ApiError> {
    state.call(move |s| s.read_write_operation(id)).await.map(Json)
}
