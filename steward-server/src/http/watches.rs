//! Watches: list, create (or propose, when rules grant actions), stop, and their queued
//! events.

use axum::{
    Extension, Json,
    extract::State,
    http::Method,
    routing::{get, post},
};
use steward_core::{
    WatchProposal,
    watch::{QueuedEvent, WatchDefinition, WatchEventQuery, WatchQuery, WatchSummary},
};

use super::{ApiError, ApiJson, ApiPath, ApiQuery, AppState, Route, auth::Person, schema};

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
            "/watches/proposals",
            "Propose a watch as the person: without grants it starts now (`started`); with grants \
             the answer is the Confirm approval (`watch.create_agent`, its summary saying in words \
             what the watch may do) that starts it once approved on /approvals (`needs_approval`)",
            schema::<WatchProposal>,
            post(propose),
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
    state.call(move |s| s.list_watches(&q)).await.map(Json)
}

async fn create(
    State(state): State<AppState>,
    ApiJson(def): ApiJson<WatchDefinition>,
) -> Result<Json<WatchSummary>, ApiError> {
    state.call(move |s| s.create_watch(&def)).await.map(Json)
}

async fn propose(
    State(state): State<AppState>,
    Extension(person): Extension<Person>,
    ApiJson(def): ApiJson<WatchDefinition>,
) -> Result<Json<WatchProposal>, ApiError> {
    // Approvals are asked for by an agent identity and decided by a person: the web client
    // proposes as an agent acting for the person signed in, who then decides on /approvals.
    let requester = format!("agent:web:{}", person.name);
    state.call(move |s| s.propose_watch(&def, &requester)).await.map(Json)
}

async fn stop(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<WatchSummary>, ApiError> {
    state.call(move |s| s.stop_watch(id)).await.map(Json)
}

async fn events(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<WatchEventQuery>,
) -> Result<Json<Vec<QueuedEvent>>, ApiError> {
    state.call(move |s| s.watch_events(&q)).await.map(Json)
}
