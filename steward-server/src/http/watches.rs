//! Watches: list, create, stop, and their queued events.

use axum::{
    Json,
    extract::State,
    http::Method,
    routing::{get, post},
};
use steward_core::watch::{
    QueuedEvent, WatchDefinition, WatchEventQuery, WatchQuery, WatchSummary,
};

use super::{ApiError, ApiJson, ApiPath, ApiQuery, AppState, Route, schema};

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::new(
            Method::GET,
            "/watches",
            "Watches, newest first",
            schema::<Vec<WatchSummary>>,
            get(list),
        )
        .query(schema::<WatchQuery>),
        Route::new(
            Method::POST,
            "/watches",
            "Create a watch (its initial snapshot is taken now; nothing already true is replayed)",
            schema::<WatchSummary>,
            post(create),
        )
        .body(schema::<WatchDefinition>),
        Route::new(
            Method::POST,
            "/watches/{id}/stop",
            "Stop a watch (idempotent)",
            schema::<WatchSummary>,
            post(stop),
        ),
        Route::new(
            Method::GET,
            "/watches/events",
            "Queued watch events, oldest first",
            schema::<Vec<QueuedEvent>>,
            get(events),
        )
        .query(schema::<WatchEventQuery>),
    ]
}

async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<WatchQuery>,
) -> Result<Json<Vec<WatchSummary>>, ApiError> {
    state.call(move |s| s.watches()?.list(&q)).await.map(Json)
}

async fn create(
    State(state): State<AppState>,
    ApiJson(def): ApiJson<WatchDefinition>,
) -> Result<Json<WatchSummary>, ApiError> {
    let now = steward_core::time::now_secs();
    state.call(move |s| s.watches()?.create(&def, now)).await.map(Json)
}

async fn stop(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<WatchSummary>, ApiError> {
    let now = steward_core::time::now_secs();
    state.call(move |s| s.watches()?.stop(id, now)).await.map(Json)
}

async fn events(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<WatchEventQuery>,
) -> Result<Json<Vec<QueuedEvent>>, ApiError> {
    state.call(move |s| s.watches()?.events(&q)).await.map(Json)
}
