//! Chat with the agent across the FFI: `Steward.open_agent()` gives the home's [`ChatAgent`];
//! `start_turn` sends a message and streams the run's events to a [`TurnListener`] on a thread
//! of its own until the run ends, returning a [`TurnHandle`] to cancel it. The runner, its
//! lanes, bounds and approval pauses are the core's (`steward_core::agent`).

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use steward_core::agent::{Agent, ChatSummary, EventRecord, RunFollower, TurnEvent, TurnResult};

use crate::{FfiError, Steward};

/// How long one wait of a turn's thread lasts before it checks for cancellation again.
const WAIT: Duration = Duration::from_millis(500);
/// The longest `wait` accepted, seconds.
pub const MAX_TURN_WAIT_SECS: u64 = 3600;

/// Receives one run's events. Called on the run's own thread, never concurrently.
#[uniffi::export(callback_interface)]
pub trait TurnListener: Send + Sync {
    /// One event of the run, in order.
    fn on_event(&self, event: TurnEventInfo);
    /// The run ended (after its `turn_ended` event): its result. The last call.
    fn on_end(&self, result: TurnOutcome);
    /// Following the run failed; nothing more is sent.
    fn on_error(&self, error: FfiError);
}

/// One event of a run.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct TurnEventInfo {
    /// Its position in the chats' feed.
    pub seq: i64,
    /// The run.
    pub run_id: String,
    /// The chat.
    pub chat_id: String,
    /// The kind: `turn_started`, `text_delta`, `tool_proposed`, `tool_started`,
    /// `tool_finished`, `approval_required`, `context_compacted`, `usage`, `turn_ended`, …
    pub kind: String,
    /// For `text_delta`: the text; otherwise empty.
    pub text: String,
    /// The whole event as JSON (`type` names it).
    pub event_json: String,
    /// Unix seconds.
    pub at: i64,
}

impl From<EventRecord> for TurnEventInfo {
    fn from(e: EventRecord) -> Self {
        let event_json = e.event.to_json();
        let kind = serde_kind(&event_json);
        let text = match e.event {
            TurnEvent::TextDelta { text } => text,
            _ => String::new(),
        };
        Self { seq: e.seq, run_id: e.run_id, chat_id: e.chat_id, kind, text, event_json, at: e.at }
    }
}

/// The `type` of an event's JSON.
fn serde_kind(json: &str) -> String {
    // `{"type":"…",` is how every event serializes (an internally tagged enum).
    json.strip_prefix("{\"type\":\"")
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
        .to_owned()
}

/// What a run ended with.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct TurnOutcome {
    /// The run.
    pub run_id: String,
    /// The chat.
    pub chat_id: String,
    /// `completed`, `awaiting_approval`, `max_model_calls`, `max_tool_calls`, `budget`,
    /// `deadline`, `cancelled`, `model_unavailable` or `error`.
    pub end_reason: String,
    /// The approvals the chat waits for.
    pub approvals: Vec<i64>,
    /// The final answer's text.
    pub text: String,
    /// Model calls made.
    pub model_calls: i64,
    /// Tool calls proposed.
    pub tool_calls: i64,
    /// Prompt tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// What its model calls cost, millionths of a USD (0 when unpriced).
    pub cost_micros: i64,
    /// The error, when there was one.
    pub error: Option<String>,
}

impl From<TurnResult> for TurnOutcome {
    fn from(r: TurnResult) -> Self {
        Self {
            run_id: r.run_id,
            chat_id: r.chat_id,
            end_reason: r.end_reason.as_str().to_owned(),
            approvals: r.approvals,
            text: r.text,
            model_calls: r.usage.model_calls,
            tool_calls: r.usage.tool_calls,
            input_tokens: r.usage.input_tokens,
            output_tokens: r.usage.output_tokens,
            cost_micros: r.usage.cost_micros,
            error: r.error,
        }
    }
}

/// A chat.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct ChatInfo {
    /// Its id.
    pub id: String,
    /// Its title (empty until set).
    pub title: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds of the last activity.
    pub updated_at: i64,
}

impl From<ChatSummary> for ChatInfo {
    fn from(c: ChatSummary) -> Self {
        Self { id: c.id, title: c.title, created_at: c.created_at, updated_at: c.updated_at }
    }
}

fn core(e: &steward_core::agent::AgentError) -> FfiError {
    FfiError::from_core(e)
}

/// The agent of a home: it runs the home's turns in this process (unless another process
/// does) and resumes chats as approvals are decided. Dropping it stops both.
#[derive(uniffi::Object)]
pub struct ChatAgent {
    inner: Agent,
}

impl Drop for ChatAgent {
    fn drop(&mut self) {
        self.inner.shutdown();
    }
}

#[uniffi::export]
impl Steward {
    /// The home's agent, with the tools and bounds its configuration names.
    pub fn open_agent(&self) -> Result<Arc<ChatAgent>, FfiError> {
        let agent =
            steward_connectors::home::agent(self.handle()).map_err(|e| FfiError::from_core(&e))?;
        if agent.runs_turns() && agent.config().resume_on_decision {
            agent.watch_approvals().map_err(|e| FfiError::Steward {
                kind: "unavailable".into(),
                code: "AGENT_THREAD".into(),
                message: format!("cannot start the approval watcher: {e}"),
            })?;
        }
        Ok(Arc::new(ChatAgent { inner: agent }))
    }
}

#[uniffi::export]
impl ChatAgent {
    /// A new, empty chat.
    pub fn create_chat(&self) -> Result<ChatInfo, FfiError> {
        self.inner.create_chat().map(Into::into).map_err(|e| core(&e))
    }

    /// Chats, most recently active first.
    pub fn chats(&self, offset: u32, limit: u32) -> Result<Vec<ChatInfo>, FfiError> {
        let list = self.inner.list_chats(offset as usize, limit as usize).map_err(|e| core(&e))?;
        Ok(list.into_iter().map(Into::into).collect())
    }

    /// Sets a chat's title.
    pub fn rename_chat(&self, id: String, title: String) -> Result<ChatInfo, FfiError> {
        self.inner.rename_chat(&id, &title).map(Into::into).map_err(|e| core(&e))
    }

    /// Deletes a chat (its content is purged).
    pub fn delete_chat(&self, id: String) -> Result<(), FfiError> {
        self.inner.delete_chat(&id).map_err(|e| core(&e))
    }

    /// Resolves the calls whose approvals a person decided into their chats and resumes them
    /// (the agent's watcher does this by itself); returns how many.
    pub fn resolve_decided(&self) -> Result<u64, FfiError> {
        self.inner.resolve_decided().map(|n| n as u64).map_err(|e| core(&e))
    }

    /// The result of a run that has ended (`RUN_RUNNING` before).
    pub fn result(&self, run_id: String) -> Result<TurnOutcome, FfiError> {
        self.inner.result(&run_id).map(Into::into).map_err(|e| core(&e))
    }

    /// Sends `text` to chat `chat` (a new chat when absent) and streams the run's events to
    /// `listener` until it ends. A message that cannot run (no model, another process runs
    /// the turns, bad text, unknown chat) is an error here and leaves no chat behind.
    pub fn start_turn(
        &self,
        chat: Option<String>,
        text: String,
        listener: Box<dyn TurnListener>,
    ) -> Result<Arc<TurnHandle>, FfiError> {
        let agent = &self.inner;
        let sent = agent.send(chat.as_deref(), &text).map_err(|e| core(&e))?;
        let follower = agent.follow(&sent.run_id, &sent.chat_id, sent.cursor);
        let (run, chat) = (sent.run_id, sent.chat_id);
        let stopped = Arc::new(AtomicBool::new(false));
        let (a, flag) = (agent.clone(), Arc::clone(&stopped));
        let thread = std::thread::Builder::new()
            .name("steward-turn".into())
            .spawn(move || follow(&a, follower, listener.as_ref(), &flag))
            .map_err(|e| FfiError::Steward {
                kind: "unavailable".into(),
                code: "AGENT_THREAD".into(),
                message: format!("cannot follow the turn: {e}"),
            })?;
        Ok(Arc::new(TurnHandle {
            agent: agent.clone(),
            run_id: run,
            chat_id: chat,
            stopped,
            thread: Mutex::new(Some(thread)),
        }))
    }
}

fn follow(
    agent: &Agent,
    mut follower: RunFollower,
    listener: &dyn TurnListener,
    stopped: &AtomicBool,
) {
    while !stopped.load(Ordering::Relaxed) && !follower.done() {
        match follower.next(WAIT) {
            Ok(Some(e)) => listener.on_event(e.into()),
            Ok(None) => {}
            Err(e) => return listener.on_error(core(&e)),
        }
    }
    if follower.done() && !stopped.load(Ordering::Relaxed) {
        match agent.result(follower.run_id()) {
            Ok(r) => listener.on_end(r.into()),
            Err(e) => listener.on_error(core(&e)),
        }
    }
}

/// A run being followed. `cancel` asks the run to stop at its next safe point (its
/// `turn_ended` still arrives); `stop_following` (or dropping the handle) only stops the
/// callbacks.
#[derive(uniffi::Object)]
pub struct TurnHandle {
    agent: Agent,
    run_id: String,
    chat_id: String,
    stopped: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

#[uniffi::export]
impl TurnHandle {
    /// The run's id.
    pub fn run_id(&self) -> String {
        self.run_id.clone()
    }

    /// The chat's id.
    pub fn chat_id(&self) -> String {
        self.chat_id.clone()
    }

    /// Asks the run to stop at its next safe point; false when it has already ended.
    pub fn cancel(&self) -> bool {
        self.agent.cancel(&self.run_id)
    }

    /// Stops the callbacks (the run goes on).
    pub fn stop_following(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// Whether the callbacks have stopped (the run ended, or `stop_following`).
    pub fn is_finished(&self) -> bool {
        self.thread
            .lock()
            .ok()
            .and_then(|t| t.as_ref().map(std::thread::JoinHandle::is_finished))
            .unwrap_or(true)
    }

    /// Waits up to `timeout_secs` (at most 3600) for the run to end: its result, or none
    /// while it runs. Blocks: call it off the main thread.
    pub fn wait(&self, timeout_secs: u64) -> Result<Option<TurnOutcome>, FfiError> {
        let secs = timeout_secs.min(MAX_TURN_WAIT_SECS);
        let r = self.agent.wait(&self.run_id, Duration::from_secs(secs)).map_err(|e| core(&e))?;
        Ok(r.map(Into::into))
    }
}

impl Drop for TurnHandle {
    fn drop(&mut self) {
        // Not joined: the handle may be dropped from a callback on the run's own thread.
        self.stop_following();
    }
}
