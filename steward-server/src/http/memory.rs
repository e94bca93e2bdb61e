//! Memory: the review inbox (accept, edit-and-accept, reject), the accepted notes, search,
//! forget with its receipt, reconcile. Reviewing and forgetting need the person's authority,
//! which the server mints only for a request authenticated with a person's token.

use axum::{
    Extension, Json,
    extract::State,
    http::Method,
    routing::{get, post},
};
use serde::Deserialize;
use steward_core::memory::{
    ForgetReceipt, ForgetSelector, MemoryEdit, MemoryHit, MemoryKind, MemoryQuery, Note, Proposal,
    ReconcileReport, RejectReason, Tombstone,
};

use super::{ApiError, ApiJson, ApiPath, ApiQuery, AppState, Route, auth::Person, schema};

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::new(
            Method::GET,
            "/memory/inbox",
            "Proposals waiting for review, oldest first, each with the notes it may replace",
            schema::<Vec<Proposal>>,
            get(inbox),
        ),
        Route::new(
            Method::GET,
            "/memory/proposals/{id}",
            "One proposal",
            schema::<Proposal>,
            get(proposal),
        )
        .text_id(),
        Route::new(
            Method::POST,
            "/memory/proposals/{id}/accept",
            "Accept a proposal (with the person's changes, if any): it becomes a note",
            schema::<Note>,
            post(accept),
        )
        .text_id()
        .body(schema::<MemoryEdit>),
        Route::new(
            Method::POST,
            "/memory/proposals/{id}/reject",
            "Reject a proposal: the same fact is never proposed again",
            schema::<Tombstone>,
            post(reject),
        )
        .text_id()
        .body(schema::<RejectInput>),
        Route::new(
            Method::GET,
            "/memory/notes/{id}",
            "One accepted note with its provenance",
            schema::<MemoryHit>,
            get(note),
        )
        .text_id(),
        Route::new(
            Method::GET,
            "/memory/search",
            "Accepted notes by words and meaning, filtered by kind, subject and time",
            schema::<Vec<MemoryHit>>,
            get(search),
        )
        .query(schema::<SearchQuery>),
        Route::new(
            Method::POST,
            "/memory/forget",
            "Forget notes and the proposals from the same sources; the receipt says what went",
            schema::<ForgetReceipt>,
            post(forget),
        )
        .body(schema::<ForgetInput>),
        Route::new(
            Method::POST,
            "/memory/reconcile",
            "Read the note files again (edits made outside Steward are audited as the person's)",
            schema::<ReconcileReport>,
            post(reconcile),
        ),
    ]
}

/// Why a proposal is rejected.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub(super) struct RejectInput {
    /// Why: `wrong`, `outdated`, `private` or `trivial` (a category, kept with the
    /// tombstone; the person's own words would repeat the fact).
    reason: Option<RejectReason>,
}

/// A memory search.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchQuery {
    /// Words to look for.
    #[schemars(length(min = 1, max = 500))]
    q: String,
    /// Only these kinds, comma-separated (`person,preference`).
    kinds: Option<String>,
    /// Only notes about this subject (`person:anna@example.org`).
    subject: Option<String>,
    /// Answer from what was true and known then (RFC 3339).
    as_of: Option<chrono::DateTime<chrono::Utc>>,
    /// Notes to return (1..=20; absent: 10).
    #[schemars(range(min = 1, max = 20))]
    limit: Option<usize>,
}

/// What to forget.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ForgetInput {
    /// By id (with its history), subject or words.
    selector: ForgetSelector,
    /// Say what would go; remove nothing.
    #[serde(default)]
    dry_run: bool,
}

async fn inbox(State(state): State<AppState>) -> Result<Json<Vec<Proposal>>, ApiError> {
    state.call(|s| s.memory_inbox()).await.map(Json)
}

async fn proposal(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Proposal>, ApiError> {
    state.call(move |s| s.memory_proposal(&id)).await.map(Json)
}

async fn accept(
    State(state): State<AppState>,
    Extension(person): Extension<Person>,
    ApiPath(id): ApiPath<String>,
    ApiJson(edit): ApiJson<MemoryEdit>,
) -> Result<Json<Note>, ApiError> {
    state
        .call(move |s| {
            let who = s.human(&person.name)?;
            s.memory_accept(&who, &id, Some(&edit))
        })
        .await
        .map(Json)
}

async fn reject(
    State(state): State<AppState>,
    Extension(person): Extension<Person>,
    ApiPath(id): ApiPath<String>,
    ApiJson(input): ApiJson<RejectInput>,
) -> Result<Json<Tombstone>, ApiError> {
    state
        .call(move |s| {
            let who = s.human(&person.name)?;
            s.memory_reject(&who, &id, input.reason)
        })
        .await
        .map(Json)
}

async fn note(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<MemoryHit>, ApiError> {
    state.call(move |s| s.memory_note(&id)).await.map(Json)
}

async fn search(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<SearchQuery>,
) -> Result<Json<Vec<MemoryHit>>, ApiError> {
    let mut kinds = Vec::new();
    for k in q.kinds.iter().flat_map(|k| k.split(',')).map(str::trim).filter(|k| !k.is_empty()) {
        kinds.push(MemoryKind::parse(k).ok_or_else(|| {
            ApiError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "MEMORY_BAD_QUERY",
                format!("unknown kind {k:?}"),
            )
        })?);
    }
    let query = MemoryQuery {
        text: q.q,
        kinds,
        subject: q.subject,
        as_of: q.as_of,
        limit: q.limit.unwrap_or(10),
    };
    state.call(move |s| s.memory_search(&query)).await.map(Json)
}

async fn forget(
    State(state): State<AppState>,
    Extension(person): Extension<Person>,
    ApiJson(input): ApiJson<ForgetInput>,
) -> Result<Json<ForgetReceipt>, ApiError> {
    state
        .call(move |s| {
            let who = s.human(&person.name)?;
            s.memory_forget(&who, &input.selector, input.dry_run)
        })
        .await
        .map(Json)
}

async fn reconcile(State(state): State<AppState>) -> Result<Json<ReconcileReport>, ApiError> {
    state.call(|s| s.memory_reconcile()).await.map(Json)
}
