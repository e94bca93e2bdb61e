//! Mail: search, one message, one thread.

use axum::{Json, extract::State, http::Method, routing::get};
use serde::Deserialize;
use steward_core::{
    mirror::{
        BodyWindow,
        read::{MessageRead, READ_WINDOW_CHARS, THREAD_PAGE, ThreadPage},
    },
    search::{SearchPage, SearchParams},
};

use super::{ApiError, ApiPath, ApiQuery, AppState, Route, schema};

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::new(
            Method::GET,
            "/search",
            "Search mail: free text, substrings and filters",
            schema::<SearchPage>,
            get(search),
        )
        .query(schema::<SearchParams>),
        Route::new(
            Method::GET,
            "/messages/{id}",
            "One message: headers, attachments and a window of the body",
            schema::<MessageRead>,
            get(message),
        )
        .query(schema::<BodyQuery>),
        Route::new(
            Method::GET,
            "/threads/{id}",
            "A page of a thread's messages, newest first",
            schema::<ThreadPage>,
            get(thread),
        )
        .query(schema::<PageQuery>),
    ]
}

/// Which window of the body to return.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub(super) struct BodyQuery {
    /// First character of the window (the previous read's `next_offset`).
    offset: usize,
    /// Characters in the window (1..=12000; absent: 6000).
    #[schemars(range(min = 1, max = 12_000))]
    chars: Option<usize>,
}

/// A page of a list.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub(super) struct PageQuery {
    /// Items to skip.
    offset: usize,
    /// Items to return (1..=100; absent: 20).
    #[schemars(range(min = 1, max = 100))]
    limit: Option<usize>,
}

async fn search(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<SearchParams>,
) -> Result<Json<SearchPage>, ApiError> {
    state.call(move |s| s.search(&params.into_request()?)).await.map(Json)
}

async fn message(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<BodyQuery>,
) -> Result<Json<MessageRead>, ApiError> {
    let window = BodyWindow { offset: q.offset, max_chars: q.chars.unwrap_or(READ_WINDOW_CHARS) };
    state.call(move |s| s.read_message(id, window)).await.map(Json)
}

async fn thread(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<Json<ThreadPage>, ApiError> {
    let limit = q.limit.unwrap_or(THREAD_PAGE);
    state.call(move |s| s.read_thread(id, q.offset, limit)).await.map(Json)
}
