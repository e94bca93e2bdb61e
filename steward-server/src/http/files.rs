//! Files and documents under the shared folders (`[files] roots`): find files, a document's
//! info, windows of its text, search inside it or across every indexed document. Paths pass the
//! same guard as the agent's tools; text is the file's, for the client to show as data.

use std::path::PathBuf;

use axum::{Json, extract::State, http::Method, routing::get};
use serde::Deserialize;
use steward_core::{
    docs::{DocHits, DocInfo, DocWindow, DocsHits},
    files::{FilePage, FileQuery},
};

use super::{ApiError, ApiQuery, AppState, Route, schema};

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::new(
            Method::GET,
            "/files/find",
            "Files under the shared folders by name words, glob, extension, dates and size, newest first",
            schema::<FilePage>,
            get(find),
        )
        .query(schema::<FindQuery>),
        Route::new(
            Method::GET,
            "/docs/info",
            "What a document is: type, pages, size, title, fingerprint, whether it has text",
            schema::<DocInfo>,
            get(info),
        )
        .query(schema::<PathQuery>),
        Route::new(
            Method::GET,
            "/docs/read",
            "A window of a document's text, from its start, a page or a cursor",
            schema::<DocWindow>,
            get(read),
        )
        .query(schema::<ReadQuery>),
        Route::new(
            Method::GET,
            "/docs/search",
            "The passages of one document that hold the words, best first",
            schema::<DocHits>,
            get(search),
        )
        .query(schema::<SearchQuery>),
        Route::new(
            Method::GET,
            "/docs/search_all",
            "Passages holding the words across every indexed document, best first",
            schema::<DocsHits>,
            get(search_all),
        )
        .query(schema::<SearchAllQuery>),
    ]
}

/// A file search; every condition given must hold.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub(super) struct FindQuery {
    /// Words the file name holds (case and width ignored).
    #[schemars(length(max = 256))]
    name: Option<String>,
    /// A glob on the path below its folder (`*`, `?`, `**`); without `/`, on the name.
    #[schemars(length(max = 256))]
    glob: Option<String>,
    /// The extension (`pdf`).
    ext: Option<String>,
    /// Only under this shared folder.
    root: Option<String>,
    /// Modified on or after (YYYY-MM-DD or RFC 3339).
    after: Option<String>,
    /// Modified before (YYYY-MM-DD or RFC 3339).
    before: Option<String>,
    /// At least this many bytes.
    min_size: Option<u64>,
    /// At most this many bytes.
    max_size: Option<u64>,
    /// Files to return (1..=200; absent: 50).
    #[schemars(range(min = 1, max = 200))]
    limit: Option<usize>,
    /// Where the last page stopped.
    cursor: Option<String>,
}

/// A document.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PathQuery {
    /// The document (absolute, or relative to a shared folder).
    #[schemars(length(min = 1, max = 4096))]
    path: String,
}

/// A window of a document.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReadQuery {
    /// The document (absolute, or relative to a shared folder).
    #[schemars(length(min = 1, max = 4096))]
    path: String,
    /// Where the last window stopped (not with `page`).
    cursor: Option<String>,
    /// The page, slide or sheet to start at, from 1 (not with `cursor`).
    #[schemars(range(min = 1))]
    page: Option<usize>,
    /// Characters to read (200..=12000; absent: 6000).
    #[schemars(range(min = 200, max = 12000))]
    chars: Option<usize>,
}

/// A search inside one document.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchQuery {
    /// The document (absolute, or relative to a shared folder).
    #[schemars(length(min = 1, max = 4096))]
    path: String,
    /// The words.
    #[schemars(length(min = 1, max = 512))]
    q: String,
    /// Passages to return (1..=10; absent: 5).
    #[schemars(range(min = 1, max = 10))]
    limit: Option<usize>,
}

/// A search across the indexed documents.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchAllQuery {
    /// The words.
    #[schemars(length(min = 1, max = 512))]
    q: String,
    /// Passages to return (1..=50; absent: 10).
    #[schemars(range(min = 1, max = 50))]
    limit: Option<usize>,
}

async fn find(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<FindQuery>,
) -> Result<Json<FilePage>, ApiError> {
    let date = |what: &str, t: &Option<String>| {
        t.as_deref()
            .map(|t| {
                steward_core::time::parse_date(t).map_err(|e| {
                    ApiError::new(
                        axum::http::StatusCode::BAD_REQUEST,
                        "FILES_BAD_QUERY",
                        format!("{what} {t:?}: {e}"),
                    )
                })
            })
            .transpose()
    };
    let query = FileQuery {
        name: q.name,
        glob: q.glob,
        extension: q.ext,
        modified_after: date("after", &q.after)?,
        modified_before: date("before", &q.before)?,
        min_size: q.min_size,
        max_size: q.max_size,
        root: q.root.map(PathBuf::from),
        cursor: q.cursor,
        limit: q.limit,
    };
    state.call(move |s| s.find_files(&query)).await.map(Json)
}

async fn info(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<PathQuery>,
) -> Result<Json<DocInfo>, ApiError> {
    state.call(move |s| s.doc_info(std::path::Path::new(&q.path))).await.map(Json)
}

async fn read(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ReadQuery>,
) -> Result<Json<DocWindow>, ApiError> {
    state
        .call(move |s| {
            s.read_doc(std::path::Path::new(&q.path), q.cursor.as_deref(), q.page, q.chars)
        })
        .await
        .map(Json)
}

async fn search(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<SearchQuery>,
) -> Result<Json<DocHits>, ApiError> {
    state.call(move |s| s.search_doc(std::path::Path::new(&q.path), &q.q, q.limit)).await.map(Json)
}

async fn search_all(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<SearchAllQuery>,
) -> Result<Json<DocsHits>, ApiError> {
    state.call(move |s| s.search_docs(&q.q, q.limit)).await.map(Json)
}
