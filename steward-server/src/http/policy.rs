//! The policy: read it, and a person's change of one tool's rule.

use axum::{
    Extension, Json,
    extract::State,
    http::Method,
    routing::{get, put},
};
use serde::Deserialize;
use steward_core::{PolicyOverview, ToolRuleInput, policy::PolicyVersion};

use super::{ApiError, ApiJson, ApiPath, ApiQuery, AppState, Route, auth::Person, schema};

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::new(
            Method::GET,
            "/policy",
            "The policy in force, the tools and earlier versions",
            schema::<PolicyOverview>,
            get(show),
        )
        .query(schema::<HistoryQuery>),
        Route::new(
            Method::PUT,
            "/policy/{tool}",
            "Set one tool's level or rule (a person's change; audited)",
            schema::<PolicyVersion>,
            put(set),
        )
        .body(schema::<ToolRuleInput>),
    ]
}

/// How much history to include.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub(super) struct HistoryQuery {
    /// Earlier versions to include (0..=100).
    #[schemars(range(max = 100))]
    history: usize,
}

async fn show(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<HistoryQuery>,
) -> Result<Json<PolicyOverview>, ApiError> {
    state.call(move |s| s.policy_overview(q.history)).await.map(Json)
}

async fn set(
    State(state): State<AppState>,
    Extension(person): Extension<Person>,
    ApiPath(tool): ApiPath<String>,
    ApiJson(input): ApiJson<ToolRuleInput>,
) -> Result<Json<PolicyVersion>, ApiError> {
    state
        .call(move |s| {
            let who = s
                .human(&person.name)
                .map_err(|e| steward_core::policy::PolicyError::Approval(Box::new(e)))?;
            s.set_tool_rule(&who, &tool, &input)
        })
        .await
        .map(Json)
}
