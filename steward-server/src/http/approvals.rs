//! Approvals: list, read, and a person's decision. Deciding needs the person's authority,
//! which the server mints only for a request authenticated with a person's token.

use axum::{
    Extension, Json,
    extract::State,
    http::Method,
    routing::{get, post},
};
use steward_core::approval::{
    Approval, ApprovalDetail, ApprovalQuery, DecisionInput, DecisionKind,
};

use super::{ApiError, ApiJson, ApiPath, ApiQuery, AppState, Route, auth::Person, schema};

pub(super) fn routes() -> Vec<Route> {
    let decide = |path, summary, handler| {
        Route::new(Method::POST, path, summary, schema::<Approval>, handler)
            .body(schema::<DecisionInput>)
    };
    vec![
        Route::new(
            Method::GET,
            "/approvals",
            "Approval requests, newest first",
            schema::<Vec<Approval>>,
            get(list),
        )
        .query(schema::<ApprovalQuery>),
        Route::new(
            Method::GET,
            "/approvals/{id}",
            "One request with its transitions",
            schema::<ApprovalDetail>,
            get(detail),
        ),
        decide(
            "/approvals/{id}/approve",
            "Approve (with `edit`, run that input instead; `pin` for secure requests)",
            post(approve),
        ),
        decide("/approvals/{id}/deny", "Deny", post(deny)),
        decide("/approvals/{id}/revise", "Send back to the agent with `note`", post(revise)),
    ]
}

async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ApprovalQuery>,
) -> Result<Json<Vec<Approval>>, ApiError> {
    state.call(move |s| s.list_approvals(&q)).await.map(Json)
}

async fn detail(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<ApprovalDetail>, ApiError> {
    state.call(move |s| s.approval_detail(id)).await.map(Json)
}

async fn decide(
    state: AppState,
    person: Person,
    id: i64,
    kind: DecisionKind,
    input: DecisionInput,
) -> Result<Json<Approval>, ApiError> {
    state
        .call(move |s| {
            let who = s.human(&person.name)?;
            s.decide_approval(id, kind, &input, &who)
        })
        .await
        .map(Json)
}

async fn approve(
    State(state): State<AppState>,
    Extension(person): Extension<Person>,
    ApiPath(id): ApiPath<i64>,
    ApiJson(input): ApiJson<DecisionInput>,
) -> Result<Json<Approval>, ApiError> {
    decide(state, person, id, DecisionKind::Approve, input).await
}

async fn deny(
    State(state): State<AppState>,
    Extension(person): Extension<Person>,
    ApiPath(id): ApiPath<i64>,
    ApiJson(input): ApiJson<DecisionInput>,
) -> Result<Json<Approval>, ApiError> {
    decide(state, person, id, DecisionKind::Deny, input).await
}

async fn revise(
    State(state): State<AppState>,
    Extension(person): Extension<Person>,
    ApiPath(id): ApiPath<i64>,
    ApiJson(input): ApiJson<DecisionInput>,
) -> Result<Json<Approval>, ApiError> {
    decide(state, person, id, DecisionKind::Revise, input).await
}
