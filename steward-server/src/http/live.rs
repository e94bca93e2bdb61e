//! `GET /ws`: the protocol events, live.
//!
//! One pump per server reads the core's durable feeds ([`Steward::protocol_after`], every
//! [`PUMP_POLL_MS`]) and its observed levels (sync progress and status transitions,
//! [`Steward::protocol_observe`]) and fans them out through a bounded broadcast channel. A
//! session first sends a snapshot (or, with `?after=<cursor>`, replays what the client missed,
//! at most [`MAX_REPLAY`] events, else a `reset` and a fresh snapshot; then the current
//! `observation`), then the live events it has not seen, heartbeats every [`HEARTBEAT_SECS`],
//! and closes when the server stops. A client that
//! falls [`FEED_CAPACITY`] events behind, or does not take a message within
//! [`SEND_TIMEOUT_SECS`], is disconnected (close code 1013) instead of being buffered for.
//!
//! [`Steward::protocol_after`]: steward_core::Steward::protocol_after
//! [`Steward::protocol_observe`]: steward_core::Steward::protocol_observe

use std::{sync::Arc, time::Duration};

use axum::{
    extract::{
        State,
        ws::{
            CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade,
            rejection::WebSocketUpgradeRejection,
        },
    },
    http::{Method, StatusCode},
    response::Response,
    routing::get,
};
use serde::Deserialize;
use serde_json::json;
use steward_core::{
    StewardError as _,
    protocol::{Cursor, Envelope, MAX_PROTOCOL_PAGE, Subscription},
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast, watch};

use super::{ApiError, ApiQuery, AppState, Route, schema};

/// Events the broadcast channel holds for the slowest client before it is disconnected.
/// Fixed (not a setting).
pub const FEED_CAPACITY: usize = 1_024;
/// Most events a resuming client is replayed before it is sent a fresh snapshot instead.
/// Fixed (not a setting).
pub const MAX_REPLAY: usize = 1_000;
/// Seconds between heartbeats.
/// Fixed (not a setting).
pub const HEARTBEAT_SECS: u64 = 15;
/// Seconds a client may take to accept one message.
/// Fixed (not a setting).
pub const SEND_TIMEOUT_SECS: u64 = 5;
/// How often the pump reads the feeds.
/// Fixed (not a setting).
pub const PUMP_POLL_MS: u64 = 200;
/// Most WebSocket sessions at once.
/// Fixed (not a setting).
pub const MAX_SESSIONS: usize = 256;

/// An event as the pump publishes it: serialized once, sent to every session as is.
#[derive(Debug)]
pub(crate) struct Outgoing {
    event: steward_core::protocol::ProtocolEvent,
    text: Utf8Bytes,
}

/// The server's live side: the fan-out, the stop signal and the session bound.
#[derive(Debug)]
pub(crate) struct Live {
    feed: tokio::sync::OnceCell<broadcast::Sender<Arc<Outgoing>>>,
    stop: watch::Sender<bool>,
    sessions: Arc<Semaphore>,
}

impl Default for Live {
    fn default() -> Self {
        Self {
            feed: tokio::sync::OnceCell::new(),
            stop: watch::channel(false).0,
            sessions: Arc::new(Semaphore::new(MAX_SESSIONS)),
        }
    }
}

impl Live {
    /// Stops the pump and closes every session (part of a graceful shutdown).
    pub(crate) fn stop(&self) {
        self.stop.send_replace(true);
    }
}

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::new(
            Method::GET,
            "/ws",
            "WebSocket: a snapshot, then protocol events (each with the cursor to resume from)",
            schema::<Envelope>,
            get(ws),
        )
        .query(schema::<WsQuery>),
    ]
}

/// Where to resume.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub(super) struct WsQuery {
    /// The last cursor the client applied; absent: start from a snapshot.
    after: Option<String>,
}

async fn ws(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<WsQuery>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let after = q.after.as_deref().map(str::parse::<Cursor>).transpose()?;
    let upgrade = upgrade.map_err(|r| {
        ApiError::new(StatusCode::UPGRADE_REQUIRED, "WS_UPGRADE_REQUIRED", r.body_text())
    })?;
    let permit = Arc::clone(&state.live.sessions).try_acquire_owned().map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "WS_TOO_MANY_SESSIONS",
            format!("at most {MAX_SESSIONS} live sessions"),
        )
    })?;
    let feed = feed(&state).await?;
    Ok(upgrade
        .max_message_size(64 * 1024)
        .on_upgrade(move |socket| session(state, socket, feed, after, permit)))
}

/// The broadcast sender, starting the pump on first use. The pump's starting position is read
/// before any session reads its own, so every event after a session's start is published.
async fn feed(state: &AppState) -> Result<broadcast::Sender<Arc<Outgoing>>, ApiError> {
    state
        .live
        .feed
        .get_or_try_init(|| async {
            let (_, sub) = state
                .call(|s| s.protocol_cursor().and_then(|c| s.protocol_subscribe(Some(c))))
                .await?;
            let (tx, _) = broadcast::channel(FEED_CAPACITY);
            tokio::spawn(pump(state.clone(), tx.clone(), sub));
            Ok(tx)
        })
        .await
        .cloned()
}

/// Publishes what the core's [`Subscription`] returns (feeds and observed levels), one pass per
/// [`PUMP_POLL_MS`] (at once again while a pass fills a page).
async fn pump(state: AppState, tx: broadcast::Sender<Arc<Outgoing>>, sub: Subscription) {
    let mut stop = state.live.stop.subscribe();
    let mut sub = Some(sub);
    loop {
        if *stop.borrow() {
            return;
        }
        let mut more = false;
        if let Some(mut current) = sub.take() {
            let at = current.cursor();
            let pass =
                state.run(move |s| (current.next(s, Duration::ZERO, &|| false), current)).await;
            match pass {
                Ok((result, current)) => {
                    sub = Some(current);
                    match result {
                        Ok(events) => {
                            more = events.len() >= MAX_PROTOCOL_PAGE;
                            for e in events {
                                let Ok(text) = serde_json::to_string(&e) else { continue };
                                // No receiver is fine: nobody is connected.
                                let _ = tx
                                    .send(Arc::new(Outgoing { event: e.event, text: text.into() }));
                            }
                        }
                        Err(e) => tracing::warn!(code = e.code(), "protocol feed unreadable"),
                    }
                }
                // The pass panicked and took the subscription: start again where it was.
                Err(_) => {
                    sub = state
                        .call(move |s| s.protocol_subscribe(Some(at)))
                        .await
                        .ok()
                        .map(|(_, n)| n);
                }
            }
        }
        if sub.is_none() {
            tracing::error!("the protocol pump cannot resubscribe; live sessions get no events");
            return;
        }
        if more {
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(PUMP_POLL_MS)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Sends one text message; false when the client is gone or too slow.
async fn send_text(socket: &mut WebSocket, text: Utf8Bytes) -> bool {
    matches!(
        tokio::time::timeout(
            Duration::from_secs(SEND_TIMEOUT_SECS),
            socket.send(Message::Text(text))
        )
        .await,
        Ok(Ok(()))
    )
}

/// Sends one value as JSON; false when the client is gone or too slow.
async fn send(socket: &mut WebSocket, v: &impl serde::Serialize) -> bool {
    match serde_json::to_string(v) {
        Ok(text) => send_text(socket, text.into()).await,
        Err(_) => false,
    }
}

async fn close(socket: &mut WebSocket, code: u16, reason: &'static str) {
    let frame = CloseFrame { code, reason: reason.into() };
    let _ = tokio::time::timeout(
        Duration::from_secs(SEND_TIMEOUT_SECS),
        socket.send(Message::Close(Some(frame))),
    )
    .await;
}

/// Sends a snapshot; returns its cursor.
async fn snapshot(state: &AppState, socket: &mut WebSocket) -> Option<Cursor> {
    let snap = match state.call(|s| s.protocol_snapshot()).await {
        Ok(s) => s,
        Err(e) => {
            let _ = send(socket, &json!({"type": "error", "code": e.code()})).await;
            return None;
        }
    };
    let cursor = snap.cursor.parse().ok()?;
    let mut v = serde_json::to_value(&snap).ok()?;
    if let Some(m) = v.as_object_mut() {
        m.insert("type".into(), json!("snapshot"));
    }
    send(socket, &v).await.then_some(cursor)
}

/// Sends the current observed levels (after a replay: progress is not replayed).
async fn observation(state: &AppState, socket: &mut WebSocket) -> bool {
    match state.call(|s| s.protocol_observation()).await {
        Ok(o) => {
            let mut v = serde_json::to_value(&o).unwrap_or_default();
            if let Some(m) = v.as_object_mut() {
                m.insert("type".into(), json!("observation"));
            }
            send(socket, &v).await
        }
        Err(e) => {
            let _ = send(socket, &json!({"type": "error", "code": e.code()})).await;
            false
        }
    }
}

/// Replays the events after `from`; `None` when the client is gone, `Some(None)` when there
/// were more than [`MAX_REPLAY`].
async fn replay(state: &AppState, socket: &mut WebSocket, from: Cursor) -> Option<Option<Cursor>> {
    let mut cursor = from;
    let mut sent = 0;
    loop {
        let page = state.call(move |s| s.protocol_after(cursor, MAX_PROTOCOL_PAGE)).await.ok()?;
        if page.is_empty() {
            return Some(Some(cursor));
        }
        if sent + page.len() > MAX_REPLAY {
            return Some(None);
        }
        for e in page {
            cursor = cursor.after(&e.event);
            sent += 1;
            if !send(socket, &e).await {
                return None;
            }
        }
    }
}

async fn session(
    state: AppState,
    mut socket: WebSocket,
    feed: broadcast::Sender<Arc<Outgoing>>,
    after: Option<Cursor>,
    _permit: OwnedSemaphorePermit,
) {
    // Subscribe before reading the store, so nothing falls between the two.
    let mut rx = feed.subscribe();
    let mut stop = state.live.stop.subscribe();
    let start = match after {
        None => snapshot(&state, &mut socket).await,
        Some(from) => match replay(&state, &mut socket, from).await {
            Some(Some(c)) => observation(&state, &mut socket).await.then_some(c),
            Some(None) => {
                let reset = json!({"type": "reset", "reason": "more than the replay bound"});
                if send(&mut socket, &reset).await {
                    snapshot(&state, &mut socket).await
                } else {
                    None
                }
            }
            None => None,
        },
    };
    let Some(mut cursor) = start else { return };
    let mut heartbeat = tokio::time::interval(Duration::from_secs(HEARTBEAT_SECS));
    heartbeat.tick().await;
    loop {
        tokio::select! {
            r = rx.recv() => match r {
                Ok(e) => {
                    if cursor.covers(&e.event) {
                        continue;
                    }
                    if !send_text(&mut socket, e.text.clone()).await {
                        return;
                    }
                    cursor = cursor.after(&e.event);
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    close(&mut socket, 1013, "too slow: reconnect with the last cursor").await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = heartbeat.tick() => {
                if !send(&mut socket, &json!({"type": "heartbeat", "cursor": cursor.to_string()})).await {
                    return;
                }
            }
            m = socket.recv() => match m {
                None | Some(Err(_) | Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            },
            _ = stop.changed() => {
                close(&mut socket, 1001, "the server is stopping").await;
                return;
            }
        }
    }
}
