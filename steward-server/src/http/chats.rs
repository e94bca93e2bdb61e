//! Chats with the agent: create, list, read, rename, delete; start a turn (the run id comes
//! back at once), follow its events by cursor, cancel it.

use std::time::Duration;

use axum::{
    Json,
    extract::State,
    http::{Method, StatusCode},
    routing::{get, post},
};
use serde::{Deserialize, Serialize};
use steward_core::agent::{
    Agent, ChatMessage, ChatSummary, EventRecord, MAX_EVENT_PAGE, MAX_MESSAGE_PAGE, ToolCallRecord,
    TurnRecord,
};

use super::{ApiError, ApiJson, ApiPath, ApiQuery, AppState, Route, schema};

/// Longest an events request waits for a first event, seconds.
/// Fixed (not a setting).
pub const MAX_EVENT_WAIT_SECS: u64 = 25;

/// Which chats to list.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ChatsQuery {
    /// Chats to skip.
    pub offset: usize,
    /// Chats to return (1..=100; absent: 20).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<usize>,
}

/// A chat with its first messages, its tool calls and its latest turns.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ChatDetail {
    /// The chat.
    pub chat: ChatSummary,
    /// Its messages, oldest first (at most 200; page on with `GET /chats/{id}/messages`).
    pub messages: Vec<ChatMessage>,
    /// Every tool call with its decision.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Its latest turns, newest first (at most 20).
    pub turns: Vec<TurnRecord>,
}

/// A page of a chat's messages.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct MessagesQuery {
    /// Messages after this id (0: from the start).
    pub after: i64,
    /// Messages to return (1..=200; absent: 200).
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<usize>,
}

/// A message to the agent.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnInput {
    /// What the person says.
    pub text: String,
}

/// The run a message started (or joined, when a turn was already running in the chat).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct TurnStarted {
    /// The run.
    pub run_id: String,
    /// The chat.
    pub chat_id: String,
}

/// A new title.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameInput {
    /// The title (at most 200 characters).
    pub title: String,
}

/// Which events to return.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct EventsQuery {
    /// Events after this sequence number (0: from the start).
    pub after: i64,
    /// Events to return (1..=500; absent: 100).
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<usize>,
    /// Seconds to wait for a first event when there is none yet (0..=25; absent: 0).
    #[schemars(range(min = 0, max = 25))]
    pub wait: Option<u64>,
}

/// Whether a cancel reached a running turn.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct CancelOutcome {
    /// `false` when the run had already ended (or is unknown).
    pub cancelled: bool,
}

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::new(
            Method::POST,
            "/chats",
            "Start a new, empty chat",
            schema::<ChatSummary>,
            post(create),
        ),
        Route::new(
            Method::GET,
            "/chats",
            "Chats, most recently active first",
            schema::<Vec<ChatSummary>>,
            get(list),
        )
        .query(schema::<ChatsQuery>),
        Route::new(
            Method::GET,
            "/chats/{id}",
            "A chat: its messages, tool calls with their decisions, and latest turns",
            schema::<ChatDetail>,
            get(show),
        )
        .text_id(),
        Route::new(
            Method::GET,
            "/chats/{id}/messages",
            "A page of a chat's messages, oldest first",
            schema::<Vec<ChatMessage>>,
            get(messages),
        )
        .text_id()
        .query(schema::<MessagesQuery>),
        Route::new(
            Method::POST,
            "/chats/{id}/title",
            "Rename a chat",
            schema::<ChatSummary>,
            post(rename),
        )
        .text_id()
        .body(schema::<RenameInput>),
        Route::new(
            Method::POST,
            "/chats/{id}/delete",
            "Delete a chat (tombstoned; its content purged)",
            schema::<serde_json::Value>,
            post(delete),
        )
        .text_id(),
        Route::new(
            Method::POST,
            "/chats/{id}/turns",
            "Send a message: the run id returns at once; the turn runs on the server, independent \
             of this connection (a message sent while a turn runs joins it at its next model call)",
            schema::<TurnStarted>,
            post(start),
        )
        .text_id()
        .body(schema::<TurnInput>),
        Route::new(
            Method::GET,
            "/chats/{id}/events",
            "A chat's turn events after a cursor (`after`), waiting up to `wait` seconds for one",
            schema::<Vec<EventRecord>>,
            get(events),
        )
        .text_id()
        .query(schema::<EventsQuery>),
        Route::new(
            Method::GET,
            "/runs/{id}",
            "One turn as recorded",
            schema::<TurnRecord>,
            get(run),
        )
        .text_id(),
        Route::new(
            Method::POST,
            "/runs/{id}/cancel",
            "Cancel a turn at its next safe point",
            schema::<CancelOutcome>,
            post(cancel),
        )
        .text_id(),
    ]
}

/// Runs `f` on the attached agent, on the blocking pool.
async fn on_agent<T: Send + 'static>(
    state: &AppState,
    f: impl FnOnce(&Agent) -> Result<T, steward_core::agent::AgentError> + Send + 'static,
) -> Result<T, ApiError> {
    let agent = state.agent().cloned().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "AGENT_UNAVAILABLE",
            "this server runs no agent (steward serve attaches one)",
        )
    })?;
    state.call(move |_| f(&agent)).await
}

async fn create(State(state): State<AppState>) -> Result<Json<ChatSummary>, ApiError> {
    on_agent(&state, Agent::create_chat).await.map(Json)
}

async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ChatsQuery>,
) -> Result<Json<Vec<ChatSummary>>, ApiError> {
    on_agent(&state, move |a| a.list_chats(q.offset, q.limit.unwrap_or(20))).await.map(Json)
}

async fn show(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<ChatDetail>, ApiError> {
    on_agent(&state, move |a| {
        Ok(ChatDetail {
            chat: a.chat(&id)?,
            messages: a.messages(&id, 0, MAX_MESSAGE_PAGE)?,
            tool_calls: a.tool_calls(&id)?,
            turns: a.turns(&id, 20)?,
        })
    })
    .await
    .map(Json)
}

async fn messages(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<MessagesQuery>,
) -> Result<Json<Vec<ChatMessage>>, ApiError> {
    on_agent(&state, move |a| a.messages(&id, q.after, q.limit.unwrap_or(MAX_MESSAGE_PAGE)))
        .await
        .map(Json)
}

async fn rename(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(input): ApiJson<RenameInput>,
) -> Result<Json<ChatSummary>, ApiError> {
    on_agent(&state, move |a| a.rename_chat(&id, &input.title)).await.map(Json)
}

async fn delete(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    on_agent(&state, move |a| a.delete_chat(&id)).await?;
    Ok(Json(serde_json::json!({"deleted": true})))
}

async fn start(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(input): ApiJson<TurnInput>,
) -> Result<Json<TurnStarted>, ApiError> {
    on_agent(&state, move |a| {
        let run_id = a.start_turn(&id, &input.text)?;
        Ok(TurnStarted { run_id, chat_id: id })
    })
    .await
    .map(Json)
}

async fn events(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> Result<Json<Vec<EventRecord>>, ApiError> {
    // Out of the documented ranges is refused, not quietly clamped: a client asking to wait
    // 60 s would otherwise time out its own request expecting an answer that never comes.
    let wait = q.wait.unwrap_or(0);
    let limit = q.limit.unwrap_or(100);
    if wait > MAX_EVENT_WAIT_SECS || limit == 0 || limit > MAX_EVENT_PAGE {
        return Err(ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "BAD_QUERY",
            format!(
                "wait must be 0..={MAX_EVENT_WAIT_SECS} seconds and limit 1..={MAX_EVENT_PAGE}"
            ),
        ));
    }
    let wait = Duration::from_secs(wait);
    on_agent(&state, move |a| {
        a.chat(&id)?;
        a.wait_events(Some(&id), q.after, limit, wait)
    })
    .await
    .map(Json)
}

async fn run(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<TurnRecord>, ApiError> {
    on_agent(&state, move |a| a.turn(&id)).await.map(Json)
}

async fn cancel(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<CancelOutcome>, ApiError> {
    on_agent(&state, move |a| Ok(CancelOutcome { cancelled: a.cancel(&id) })).await.map(Json)
}
