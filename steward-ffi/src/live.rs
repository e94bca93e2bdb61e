//! Live streams across the FFI: a callback interface receives the current state first, then
//! every protocol event (approval transitions, journal transitions, queued watch events, sync
//! progress, status transitions) — the core's [`Subscription`] — on a thread of its own until
//! the returned [`TaskHandle`] is cancelled or dropped.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use steward_core::protocol::{Cursor, Envelope, ProtocolEvent, ProtocolSnapshot, Subscription};

use crate::{ApprovalCard, FfiError, OperationSummary, Steward};

/// How long one wait of the stream's thread lasts before it checks for cancellation again.
const WAIT: Duration = Duration::from_millis(500);

/// Receives a live stream. Called on the stream's own thread, never concurrently.
#[uniffi::export(callback_interface)]
pub trait LiveListener: Send + Sync {
    /// The current state (only when the stream started without a cursor), before any event.
    fn on_snapshot(&self, snapshot: LiveSnapshot);
    /// One event, in order.
    fn on_event(&self, event: LiveEvent);
    /// The stream failed and has stopped.
    fn on_error(&self, error: FfiError);
}

/// The state a stream starts from.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct LiveSnapshot {
    /// The cursor to resume from after this state.
    pub cursor: String,
    /// Requests waiting for a person, newest first.
    pub pending_approvals: Vec<ApprovalCard>,
    /// The newest journaled operations.
    pub operations: Vec<OperationSummary>,
    /// The system status's overall state: `unknown`, `ok`, `warning` or `error`.
    pub status: String,
}

impl From<ProtocolSnapshot> for LiveSnapshot {
    fn from(s: ProtocolSnapshot) -> Self {
        Self {
            cursor: s.cursor,
            pending_approvals: s.pending_approvals.into_iter().map(Into::into).collect(),
            operations: s.operations.into_iter().map(Into::into).collect(),
            status: s.observation.system.status.as_str().to_owned(),
        }
    }
}

/// One protocol event; `cursor` is where to resume after applying it.
#[derive(Debug, Clone, PartialEq, uniffi::Enum)]
pub enum LiveEvent {
    /// An approval request changed (`requested`, `approved`, `denied`, `expired`, …).
    Approval {
        /// Where to resume after this event.
        cursor: String,
        /// The request.
        approval_id: i64,
        /// What happened to it.
        event: String,
        /// Who did it.
        actor: String,
        /// Unix seconds.
        at: i64,
    },
    /// A journaled operation changed state.
    Operation {
        /// Where to resume after this event.
        cursor: String,
        /// The operation.
        operation_id: i64,
        /// The state it left (absent when it was recorded).
        from: Option<String>,
        /// The state it entered.
        to: String,
        /// Unix seconds.
        at: i64,
    },
    /// A watch queued an event.
    Watch {
        /// Where to resume after this event.
        cursor: String,
        /// The watch.
        watch_id: i64,
        /// `time.reached`, `watch.expired`, …
        event_type: String,
        /// The rules it matched.
        matched_rules: Vec<String>,
        /// The deterministic text.
        text: String,
        /// Unix seconds.
        at: i64,
    },
    /// A queued watch event was delivered, or given up.
    WatchDelivery {
        /// Where to resume after this event.
        cursor: String,
        /// The queued event.
        event_id: i64,
        /// The watch.
        watch_id: i64,
        /// `delivered` or `failed`.
        outcome: crate::states::DeliveryResult,
        /// Unix seconds.
        at: i64,
    },
    /// Something happened in a chat's turn: streamed text, a tool call, an approval pause, the
    /// end (the event as JSON, `type` naming it, as `GET /chats/{id}/events` gives it).
    Chat {
        /// Where to resume after this event.
        cursor: String,
        /// The turn.
        run_id: String,
        /// The chat.
        chat_id: String,
        /// The event's JSON.
        event_json: String,
        /// Unix seconds.
        at: i64,
    },
    /// Memory changed: `proposed`, `accepted`, `rejected`, `forgotten`, `written`,
    /// `edited_outside`, `expired`, `suppressed` (ids only, never the words).
    Memory {
        /// Where to resume after this event.
        cursor: String,
        /// What happened.
        event: String,
        /// The note or proposal, when the event has one.
        id: Option<String>,
        /// Who.
        actor: String,
        /// Unix seconds.
        at: i64,
    },
    /// A sync run progressed or finished (an observation: the cursor does not move).
    Ingest {
        /// Where to resume after this event.
        cursor: String,
        /// The sync run.
        run_id: i64,
        /// The account synced.
        account: String,
        /// Files the run set out to ingest.
        files_total: i64,
        /// Files ingested so far.
        files_done: i64,
        /// Whether the run has finished.
        finished: bool,
        /// Unix seconds.
        at: i64,
    },
    /// A status item changed state (an observation: the cursor does not move).
    Status {
        /// Where to resume after this event.
        cursor: String,
        /// The item (`disk`, `ingest`, `watches`, …).
        name: String,
        /// Its state before.
        from: Option<String>,
        /// Its state now.
        to: String,
        /// For a person.
        detail: String,
        /// Unix seconds.
        at: i64,
    },
}

impl From<Envelope> for LiveEvent {
    fn from(e: Envelope) -> Self {
        let cursor = e.cursor;
        match e.event {
            ProtocolEvent::Approval { approval_id, event, actor, at, .. } => {
                Self::Approval { cursor, approval_id, event, actor, at }
            }
            ProtocolEvent::Operation { operation_id, from, to, at, .. } => {
                Self::Operation { cursor, operation_id, from, to, at }
            }
            ProtocolEvent::Watch { watch_id, event_type, matched_rules, text, at, .. } => {
                Self::Watch { cursor, watch_id, event_type, matched_rules, text, at }
            }
            ProtocolEvent::WatchDelivery { event_id, watch_id, outcome, at, .. } => {
                Self::WatchDelivery { cursor, event_id, watch_id, outcome: outcome.into(), at }
            }
            ProtocolEvent::Chat { run_id, chat_id, event, at, .. } => {
                Self::Chat { cursor, run_id, chat_id, event_json: event.to_json(), at }
            }
            ProtocolEvent::Memory { event, id, actor, at, .. } => {
                Self::Memory { cursor, event, id, actor, at }
            }
            ProtocolEvent::Ingest { progress, at } => Self::Ingest {
                cursor,
                run_id: progress.run_id,
                account: progress.account,
                files_total: progress.files_total,
                files_done: progress.files_done,
                finished: progress.finished_at.is_some(),
                at,
            },
            ProtocolEvent::Status { name, from, to, detail, at } => Self::Status {
                cursor,
                name,
                from: from.map(|h| h.as_str().to_owned()),
                to: to.as_str().to_owned(),
                detail,
                at,
            },
        }
    }
}

/// A running stream. `cancel` (or dropping the handle) stops it: no callback is made after the
/// one in progress returns.
#[derive(uniffi::Object)]
pub struct TaskHandle {
    cancelled: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

#[uniffi::export]
impl TaskHandle {
    /// Stops the stream.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    /// Whether the stream has stopped (cancelled, or after an error).
    pub fn is_finished(&self) -> bool {
        self.thread
            .lock()
            .ok()
            .and_then(|t| t.as_ref().map(std::thread::JoinHandle::is_finished))
            .unwrap_or(true)
    }
}

impl Drop for TaskHandle {
    fn drop(&mut self) {
        // Not joined: the handle may be dropped from a callback on the stream's own thread.
        self.cancel();
    }
}

#[uniffi::export]
impl Steward {
    /// Streams the protocol to `listener`: without `after`, the current state first, then every
    /// event; with the cursor of the last event applied, what happened since and then every
    /// event. A bad cursor is an error here; later failures go to `on_error`.
    pub fn subscribe(
        &self,
        after: Option<String>,
        listener: Box<dyn LiveListener>,
    ) -> Result<Arc<TaskHandle>, FfiError> {
        let after = after
            .as_deref()
            .map(str::parse::<Cursor>)
            .transpose()
            .map_err(|e| FfiError::from_core(&e))?;
        let steward = self.handle();
        let (snapshot, subscription) =
            steward.protocol_subscribe(after).map_err(|e| FfiError::from_core(&e))?;
        let cancelled = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancelled);
        let thread = std::thread::Builder::new()
            .name("steward-live".into())
            .spawn(move || stream(&steward, snapshot, subscription, listener.as_ref(), &flag))
            .map_err(|e| FfiError::Steward {
                kind: "unavailable".into(),
                code: "LIVE_THREAD".into(),
                message: format!("cannot start the stream: {e}"),
            })?;
        Ok(Arc::new(TaskHandle { cancelled, thread: Mutex::new(Some(thread)) }))
    }
}

fn stream(
    steward: &steward_core::Steward,
    snapshot: Option<ProtocolSnapshot>,
    mut subscription: Subscription,
    listener: &dyn LiveListener,
    cancelled: &AtomicBool,
) {
    if let Some(s) = snapshot {
        listener.on_snapshot(s.into());
    }
    let is_cancelled = || cancelled.load(Ordering::Relaxed);
    while !is_cancelled() {
        match subscription.next(steward, WAIT, &is_cancelled) {
            Ok(events) => {
                for e in events {
                    if is_cancelled() {
                        return;
                    }
                    listener.on_event(e.into());
                }
            }
            Err(e) => {
                listener.on_error(FfiError::from_core(&e));
                return;
            }
        }
    }
}
