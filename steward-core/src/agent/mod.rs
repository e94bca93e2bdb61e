//! The agent: durable chat turns over the tool registry.
//!
//! [`Agent::start_turn`] returns a run id at once; the turn runs on its own thread,
//! independent of the caller, and writes everything to `chats.db`: the messages the model
//! sees next, every proposed tool call with the gate's decision, the turn's counters and an
//! event feed ([`TurnEvent`], each with a sequence number a client resumes from).
//!
//! The order of a turn: the host builds the context (identity, time and the rule that tool
//! text is data are injected by the host, never taken from the model); the model answers,
//! streamed; each proposed call goes through [`Toolbox::call`] (preflight, policy, run or
//! approval request); results go back wrapped as untrusted data when they came from mail or
//! a public service; the loop ends on an answer without calls or on a bound
//! ([`AgentConfig`]). A gated call ends the turn [`EndReason::AwaitingApproval`]; the
//! person's decision resumes the chat with a new turn ([`Agent::resolve_decided`], run by
//! the agent's approval watcher): approved → the executor runs exactly the approved input;
//! denied → the model is told it was declined, and the identical call is refused for the
//! rest of the chat; revise → the note goes back as feedback; expiry is a denial. Nothing
//! fails open.
//!
//! One lane per chat: a message sent while a turn runs is queued and applied at the next
//! model boundary, never in the middle of a tool call. Different chats run concurrently, at
//! most [`AgentConfig::max_concurrent_turns`] at once.

pub mod notify;
pub(crate) mod store;
pub(crate) mod taint;
mod turn;

pub(crate) use turn::for_model;

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use serde::{Deserialize, Serialize};
use store::ChatStore;
pub use store::{
    ChatMessage, ChatSummary, EventRecord, MAX_CHAT_PAGE, MAX_EVENT_PAGE, MAX_MESSAGE_PAGE,
    MAX_TITLE_CHARS, ToolCallRecord, TurnRecord,
};

use crate::{
    Steward,
    error::{ErrorKind, StewardError},
    llm::Capability,
    store::StoreError,
    time::now_secs,
    tools::Toolbox,
};

/// The identity the agent's calls carry in the policy and the audit trail.
pub const AGENT_ACTOR: &str = turn::AGENT_ACTOR;

/// Model calls one turn may make.
/// Default of `[agent] max_model_calls`.
pub const MAX_MODEL_CALLS: u32 = 12;
/// Tool calls one turn may propose.
/// Default of `[agent] max_tool_calls`.
pub const MAX_TOOL_CALLS: u32 = 24;
/// Wall time of one turn, seconds.
/// Default of `[agent] deadline_secs`.
pub const TURN_DEADLINE_SECS: u64 = 300;
/// Tokens (prompt + output) one turn may spend.
/// Default of `[agent] max_turn_tokens`.
pub const MAX_TURN_TOKENS: u64 = 400_000;
/// What one turn may cost, in millionths of a USD (2 USD), priced by `[llm.rates]` (a model
/// without rates costs 0). Default of `[agent] max_turn_cost_usd`.
pub const MAX_TURN_COST_MICROS: i64 = 2_000_000;
/// Times the identical (tool, input) call may run in one turn; the next is refused.
/// Default of [`AgentConfig::max_identical_calls`] (a program's setting; a loop guard, not in `[agent]`).
pub const MAX_IDENTICAL_CALLS: usize = 2;
/// Unparseable tool-call payloads in a row that end a turn.
/// Default of [`AgentConfig::max_bad_payloads`] (a program's setting; a loop guard, not in `[agent]`).
pub const MAX_BAD_PAYLOADS: u32 = 3;
/// Turns running at once across chats.
/// Default of `[agent] max_concurrent_turns`.
pub const MAX_CONCURRENT_TURNS: usize = 8;
/// Messages a chat may queue while its turn runs.
/// Fixed (not a setting).
pub const MAX_QUEUED_MESSAGES: usize = 16;
/// Longest message a person may send, characters.
/// Fixed (not a setting).
pub const MAX_USER_MESSAGE_CHARS: usize = 32_000;
/// The context the model is given, characters (history beyond it is compacted).
/// Default of `[agent] context_chars`.
pub const CONTEXT_CHARS: usize = 200_000;
/// Output tokens asked for per model call.
/// Default of `[agent] max_output_tokens`.
pub const MAX_OUTPUT_TOKENS: u32 = 2_048;
/// Longest summary that stands for a chat's oldest messages, characters.
/// Default of `[agent] summary_chars`.
pub const SUMMARY_CHARS: usize = 4_000;
/// Most conversation text one summary request carries, characters (each message is cut to
/// [`SUMMARY_MESSAGE_CHARS`] first).
/// Fixed (not a setting).
pub const SUMMARY_INPUT_CHARS: usize = 60_000;
/// Longest single message in a summary request, characters.
/// Fixed (not a setting).
pub const SUMMARY_MESSAGE_CHARS: usize = 2_000;
/// The output tokens asked for a text of at most `chars` characters: generous (a token is
/// about four characters of English, fewer of other scripts), so the text the code cuts to
/// `chars` is never cut short by the model first.
pub(crate) fn output_tokens_for(chars: usize) -> u32 {
    u32::try_from(chars / 2 + 64).unwrap_or(u32::MAX)
}
/// Streamed text buffered before a `text_delta` event is recorded, characters.
/// Fixed (not a setting).
pub const DELTA_FLUSH_CHARS: usize = 200;

/// The agent's bounds (named; every one is in force on every turn).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentConfig {
    /// The model tier turns use; `None`: the chat tier of the configured models.
    pub capability: Option<Capability>,
    /// See [`MAX_MODEL_CALLS`].
    pub max_model_calls: u32,
    /// See [`MAX_TOOL_CALLS`].
    pub max_tool_calls: u32,
    /// See [`TURN_DEADLINE_SECS`].
    pub deadline: Duration,
    /// See [`MAX_TURN_TOKENS`].
    pub max_turn_tokens: u64,
    /// See [`MAX_TURN_COST_MICROS`].
    pub max_turn_cost_micros: i64,
    /// See [`MAX_IDENTICAL_CALLS`].
    pub max_identical_calls: usize,
    /// See [`MAX_BAD_PAYLOADS`].
    pub max_bad_payloads: u32,
    /// See [`MAX_CONCURRENT_TURNS`].
    pub max_concurrent_turns: usize,
    /// See [`CONTEXT_CHARS`].
    pub context_chars: usize,
    /// See [`MAX_OUTPUT_TOKENS`].
    pub max_output_tokens: u32,
    /// The tier that summarizes old messages; `None`: the nearest tier below the chat's with
    /// a model, else the chat's own.
    pub summary_capability: Option<Capability>,
    /// See [`SUMMARY_CHARS`].
    pub summary_chars: usize,
    /// Who the person is, for the host's context ("Ada Lovelace <ada@example.org>").
    pub person: Option<String>,
    /// Resume chats automatically when a person decides an approval (the approval watcher).
    pub resume_on_decision: bool,
}

impl AgentConfig {
    /// Whether the settings agree with each other and with the configured models (`llm`,
    /// when there are any): a tier named here must have a model (with tools, for the chat's),
    /// and the summary must leave room for the conversation (at most half the context).
    pub fn check(&self, llm: Option<&crate::llm::LlmConfig>) -> Result<(), AgentError> {
        if self.summary_chars.saturating_mul(2) > self.context_chars {
            return Err(AgentError::Invalid(format!(
                "[agent] summary_chars ({}) must be at most half of context_chars ({})",
                self.summary_chars, self.context_chars
            )));
        }
        let Some(llm) = llm else { return Ok(()) };
        if let Some(t) = self.capability
            && llm.route(t, true).is_empty()
        {
            return Err(AgentError::Invalid(format!(
                "[agent] tier = \"{}\": no model with tools serves that tier in [llm]",
                t.as_str()
            )));
        }
        if let Some(t) = self.summary_capability
            && llm.route(t, false).is_empty()
        {
            return Err(AgentError::Invalid(format!(
                "[agent] summary_tier = \"{}\": no model serves that tier in [llm]",
                t.as_str()
            )));
        }
        Ok(())
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            capability: None,
            max_model_calls: MAX_MODEL_CALLS,
            max_tool_calls: MAX_TOOL_CALLS,
            deadline: Duration::from_secs(TURN_DEADLINE_SECS),
            max_turn_tokens: MAX_TURN_TOKENS,
            max_turn_cost_micros: MAX_TURN_COST_MICROS,
            max_identical_calls: MAX_IDENTICAL_CALLS,
            max_bad_payloads: MAX_BAD_PAYLOADS,
            max_concurrent_turns: MAX_CONCURRENT_TURNS,
            context_chars: CONTEXT_CHARS,
            max_output_tokens: MAX_OUTPUT_TOKENS,
            summary_capability: None,
            summary_chars: SUMMARY_CHARS,
            person: None,
            resume_on_decision: true,
        }
    }
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The model answered without calling a tool.
    Completed,
    /// A call waits for a person; the decision resumes the chat.
    AwaitingApproval,
    /// [`AgentConfig::max_model_calls`] reached.
    MaxModelCalls,
    /// [`AgentConfig::max_tool_calls`] reached.
    MaxToolCalls,
    /// [`AgentConfig::max_turn_tokens`] or [`AgentConfig::max_turn_cost_micros`] reached.
    Budget,
    /// [`AgentConfig::deadline`] reached.
    Deadline,
    /// Cancelled.
    Cancelled,
    /// No model answered.
    ModelUnavailable,
    /// Something else failed (the turn's `error` says what).
    Error,
}

impl EndReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::AwaitingApproval => "awaiting_approval",
            Self::MaxModelCalls => "max_model_calls",
            Self::MaxToolCalls => "max_tool_calls",
            Self::Budget => "budget",
            Self::Deadline => "deadline",
            Self::Cancelled => "cancelled",
            Self::ModelUnavailable => "model_unavailable",
            Self::Error => "error",
        }
    }

    /// The reason named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Completed,
            Self::AwaitingApproval,
            Self::MaxModelCalls,
            Self::MaxToolCalls,
            Self::Budget,
            Self::Deadline,
            Self::Cancelled,
            Self::ModelUnavailable,
            Self::Error,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

/// What happens in a turn, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TurnEvent {
    /// The turn began.
    TurnStarted {
        /// Why: `message` (the person wrote) or `decision` (a person decided an approval).
        trigger: String,
    },
    /// A message the person sent while the turn ran was applied at a model boundary.
    MessageApplied {
        /// Its text.
        text: String,
    },
    /// More of the answer.
    TextDelta {
        /// The text.
        text: String,
    },
    /// The model proposed a call.
    ToolProposed {
        /// The call's id.
        call_id: String,
        /// The tool.
        tool: String,
        /// The arguments as written.
        input: String,
    },
    /// An allowed call started.
    ToolStarted {
        /// The call's id.
        call_id: String,
        /// The tool.
        tool: String,
    },
    /// A call ended (ran, failed, denied, refused, or resolved after a decision).
    ToolFinished {
        /// The call's id.
        call_id: String,
        /// The tool.
        tool: String,
        /// `ran`, `failed`, `denied`, `invalid`, `refused`, `declined`, `revision_requested`,
        /// `expired`, `cancelled`.
        status: String,
        /// What the model was told (bounded by the tool's budget).
        result: String,
        /// The items it came from.
        sources: Vec<crate::tools::SourceRef>,
        /// Whether any source is untrusted.
        untrusted: bool,
    },
    /// A gated call waits for a person.
    ApprovalRequired {
        /// The call's id.
        call_id: String,
        /// The approval.
        approval_id: i64,
        /// The tool.
        tool: String,
        /// What it does, in words.
        summary: String,
        /// The input's fields copied from untrusted content, with their sources.
        taint: Option<crate::approval::Taint>,
    },
    /// The context was made to fit: old tool results dropped (their calls kept, answered),
    /// then, when that was not enough, the oldest exchanges replaced by a summary a cheaper
    /// tier wrote (or, when that failed, left out).
    ContextCompacted {
        /// How many tool results and messages were dropped or summarized.
        dropped: usize,
        /// Whether a new summary now stands for the oldest messages.
        #[serde(default)]
        summarized: bool,
        /// Characters of context before.
        before_chars: usize,
        /// Characters after.
        after_chars: usize,
    },
    /// One model call's usage.
    Usage {
        /// The model.
        model: String,
        /// Prompt tokens.
        input_tokens: u64,
        /// Output tokens.
        output_tokens: u64,
    },
    /// The turn ended.
    TurnEnded {
        /// Why.
        reason: EndReason,
        /// The error, for `error` and `model_unavailable`.
        error: Option<String>,
        /// The run that takes the messages sent while this one ran and not applied by it
        /// (it ended on a bound, a cancellation or an approval pause first).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        next_run: Option<String>,
    },
}

impl TurnEvent {
    /// The event as JSON (`type` names it), as the HTTP API and the FFI carry it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }
}

/// Errors of the agent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// No live chat has this id.
    #[error("chat {0} not found")]
    ChatNotFound(String),
    /// No turn has this id.
    #[error("run {0} not found")]
    RunNotFound(String),
    /// The run has not ended yet.
    #[error("run {0} is still running")]
    Running(String),
    /// A followed run sent no event for longer than the turn deadline allows.
    #[error("run {0} sent no event for {1} s")]
    Silent(String, u64),
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
    /// The chat's queue is full.
    #[error("chat {0} already has {MAX_QUEUED_MESSAGES} messages waiting for its turn")]
    Busy(String),
    /// No model is configured.
    #[error("the agent needs a chat model: {0}")]
    NoModel(String),
    /// Another process runs this home's agent.
    #[error(
        "another Steward process runs this home's agent (steward serve?): send the message there"
    )]
    Elsewhere,
    /// `chats.db` failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The approval store failed (its own code and kind pass through).
    #[error(transparent)]
    Approval(#[from] Box<crate::approval::ApprovalError>),
}

impl StewardError for AgentError {
    fn code(&self) -> &'static str {
        match self {
            Self::ChatNotFound(_) => "CHAT_NOT_FOUND",
            Self::RunNotFound(_) => "RUN_NOT_FOUND",
            Self::Running(_) => "RUN_RUNNING",
            Self::Silent(..) => "RUN_SILENT",
            Self::Invalid(_) => "AGENT_INVALID_INPUT",
            Self::Busy(_) => "CHAT_BUSY",
            Self::NoModel(_) => "AGENT_NO_MODEL",
            Self::Elsewhere => "AGENT_RUNS_ELSEWHERE",
            Self::Store(e) => e.code(),
            Self::Approval(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::ChatNotFound(_) | Self::RunNotFound(_) => ErrorKind::NotFound,
            Self::Invalid(_) => ErrorKind::InvalidInput,
            Self::Busy(_) | Self::Running(_) => ErrorKind::Conflict,
            // The home's state refuses the request (no model configured, or another process
            // runs its turns): a conflict to resolve by configuration, not a server failure.
            Self::NoModel(_) | Self::Elsewhere => ErrorKind::Conflict,
            Self::Silent(..) => ErrorKind::Unavailable,
            Self::Store(e) => e.kind(),
            Self::Approval(e) => e.kind(),
        }
    }
}

/// A message sent ([`Agent::send`]): its chat, its run, and the chat's event position
/// before it (follow the run from there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The chat.
    pub chat_id: String,
    /// The run that carries the message.
    pub run_id: String,
    /// The chat's newest event before the message.
    pub cursor: i64,
}

/// Reads one run's events in order, ending after its `turn_ended` ([`Agent::follow`]). When
/// that run ended before applying a message sent to it, the follower goes on with the run
/// that takes the message (`turn_ended.next_run`); [`RunFollower::run_id`] then names it.
#[derive(Debug)]
pub struct RunFollower {
    agent: Agent,
    run: String,
    chat: String,
    cursor: i64,
    buffered: VecDeque<EventRecord>,
    done: bool,
    heard: std::time::Instant,
}

/// Events read from the store at once by a [`RunFollower`].
/// Fixed (not a setting).
const FOLLOW_BATCH: usize = 100;
/// How much longer than the turn deadline a followed run may stay silent.
/// Fixed (not a setting).
const SILENCE_MARGIN: Duration = Duration::from_secs(60);

impl RunFollower {
    /// The run.
    pub fn run_id(&self) -> &str {
        &self.run
    }

    /// The chat.
    pub fn chat_id(&self) -> &str {
        &self.chat
    }

    /// Whether the run's `turn_ended` has been returned.
    pub fn done(&self) -> bool {
        self.done
    }

    /// The next event of the run, waiting up to `wait` for one: `None` when none came (or the
    /// run has ended). A run silent for longer than the turn deadline plus a minute (its
    /// process died and no one reopened the home) is `RUN_SILENT`.
    pub fn next(&mut self, wait: Duration) -> Result<Option<EventRecord>, AgentError> {
        let e = self.peek(wait)?;
        if let Some(e) = &e {
            self.take(e.seq);
        }
        Ok(e)
    }

    /// The next event of the run without taking it: the same event again until
    /// [`RunFollower::take`] takes it (a frontend that may fail to hand it over — a cancelled
    /// Python future — takes it only once handed over, so nothing is lost).
    pub fn peek(&mut self, wait: Duration) -> Result<Option<EventRecord>, AgentError> {
        let mut filled = false;
        loop {
            // Other runs of the chat share its feed; they are not this follower's.
            while self.buffered.front().is_some_and(|e| e.run_id != self.run) {
                self.buffered.pop_front();
            }
            if let Some(e) = self.buffered.front() {
                self.heard = std::time::Instant::now();
                return Ok(Some(e.clone()));
            }
            if self.done || filled {
                let silent = self.agent.config().deadline + SILENCE_MARGIN;
                if !self.done && self.heard.elapsed() > silent {
                    return Err(AgentError::Silent(self.run.clone(), silent.as_secs()));
                }
                return Ok(None);
            }
            let events =
                self.agent.wait_events(Some(&self.chat), self.cursor, FOLLOW_BATCH, wait)?;
            if let Some(last) = events.last() {
                self.cursor = last.seq;
            }
            self.buffered.extend(events);
            filled = true;
        }
    }

    /// Takes event `seq` if it is the one [`RunFollower::peek`] shows; false otherwise.
    pub fn take(&mut self, seq: i64) -> bool {
        if !self.buffered.front().is_some_and(|e| e.seq == seq && e.run_id == self.run) {
            return false;
        }
        let Some(e) = self.buffered.pop_front() else { return false };
        if let TurnEvent::TurnEnded { next_run, .. } = e.event {
            match next_run {
                // The messages it did not apply go on in the next run: follow that one (its
                // events already read stay buffered).
                Some(next) => self.run = next,
                None => {
                    self.done = true;
                    self.buffered.clear();
                }
            }
        }
        true
    }
}

/// `text` trimmed, when it is a message the runner takes.
fn checked_text(text: &str) -> Result<&str, AgentError> {
    let text = text.trim();
    if text.is_empty() || text.chars().count() > MAX_USER_MESSAGE_CHARS {
        return Err(AgentError::Invalid(format!(
            "a message has 1..={MAX_USER_MESSAGE_CHARS} characters"
        )));
    }
    Ok(text)
}

/// What one run used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct TurnUsage {
    /// Model calls made.
    pub model_calls: i64,
    /// Tool calls proposed.
    pub tool_calls: i64,
    /// Prompt tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// What its model calls cost, millionths of a USD (`[llm.rates]`; 0 when unpriced).
    pub cost_micros: i64,
}

/// What a turn ended with, for a caller that waits ([`Agent::wait`]).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TurnResult {
    /// The run.
    pub run_id: String,
    /// The chat.
    pub chat_id: String,
    /// Why it ended.
    pub end_reason: EndReason,
    /// The approvals the chat waits for.
    pub approvals: Vec<i64>,
    /// The final answer's text (the last assistant message of the run).
    pub text: String,
    /// What the run used.
    pub usage: TurnUsage,
    /// The error, when there was one.
    pub error: Option<String>,
    /// The run that takes the messages this one ended without applying (it stopped on a
    /// bound, a cancellation or an approval pause first): wait for that one's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run: Option<String>,
}

#[derive(Default)]
struct Lane {
    run: Option<String>,
    /// The run takes no more messages (it passed its last model boundary); later ones go
    /// to `next`.
    closing: bool,
    /// The run id reserved for the messages the current run will not apply.
    next: Option<String>,
    queued: VecDeque<String>,
    /// A decision arrived while the lane ran: start a turn when it ends.
    resume: bool,
}

pub(crate) struct Shared {
    steward: Arc<Steward>,
    toolbox: Arc<Toolbox>,
    config: AgentConfig,
    store: Arc<ChatStore>,
    lanes: Mutex<HashMap<String, Lane>>,
    cancels: Mutex<HashMap<String, Arc<AtomicBool>>>,
    /// Turns running (bounded by `max_concurrent_turns`).
    running: (Mutex<usize>, Condvar),
    /// Bumped on every event.
    changed: (Mutex<u64>, Condvar),
    stop: AtomicBool,
    /// Held while this process runs the home's turns (`agent.lock`); `None`: another process
    /// does, and this agent only reads.
    owner: Option<std::fs::File>,
}

/// The agent of one home.
#[derive(Clone)]
pub struct Agent {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").field("config", &self.shared.config).finish_non_exhaustive()
    }
}

fn new_id(prefix: &str) -> String {
    let mut bytes = [0u8; 12];
    if getrandom::fill(&mut bytes).is_err() {
        // Unique enough within a process when the system has no entropy to give.
        let n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes.copy_from_slice(&n.to_le_bytes()[..12]);
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}_{hex}")
}

impl Agent {
    /// The agent over `toolbox` (and its handle), with `config`. Turns a dead process left
    /// running are marked interrupted, and approvals decided while nobody watched are
    /// resolved into their chats. A handle has one agent: while one opened on it lives (and
    /// is not shut down), opening again returns that one, with its tools and configuration —
    /// two agents of one handle would each think the other process runs the turns.
    pub fn open(toolbox: Arc<Toolbox>, config: AgentConfig) -> Result<Self, AgentError> {
        let steward = Arc::clone(toolbox.steward());
        let handle = Arc::clone(&steward);
        let mut slot = handle.agent.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(shared) = slot.upgrade()
            && !shared.stop.load(Ordering::SeqCst)
        {
            return Ok(Self { shared });
        }
        config.check(steward.llm_config())?;
        let store = Arc::clone(steward.chat_store()?);
        // One process runs a home's turns: the one holding the lock. Only it may call turns
        // that are still `running` dead (their process is gone, or it would hold the lock).
        let owner = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(steward.home().join("agent.lock"))
            .ok()
            .filter(|f| f.try_lock().is_ok());
        let interrupted =
            if owner.is_some() { store.interrupt_running(now_secs())? } else { Vec::new() };
        let agent = Self {
            shared: Arc::new(Shared {
                steward,
                toolbox,
                config,
                store,
                lanes: Mutex::new(HashMap::new()),
                cancels: Mutex::new(HashMap::new()),
                running: (Mutex::new(0), Condvar::new()),
                changed: (Mutex::new(0), Condvar::new()),
                stop: AtomicBool::new(false),
                owner,
            }),
        };
        *slot = Arc::downgrade(&agent.shared);
        drop(slot);
        for (run, chat) in interrupted {
            let ended = TurnEvent::TurnEnded {
                reason: EndReason::Error,
                error: Some("interrupted: the process stopped during the turn".to_owned()),
                next_run: None,
            };
            agent.shared.event(&run, &chat, &ended);
        }
        Ok(agent)
    }

    /// Whether this process runs the home's turns (else another one does, and this agent
    /// reads chats but starts nothing).
    pub fn runs_turns(&self) -> bool {
        self.shared.owner.is_some()
    }

    fn runs_here(&self) -> Result<(), AgentError> {
        if self.shared.owner.is_some() { Ok(()) } else { Err(AgentError::Elsewhere) }
    }

    /// Whether a turn could start here now: this process runs the home's turns
    /// (`AGENT_RUNS_ELSEWHERE`) and a chat model is configured (`AGENT_NO_MODEL`). A frontend
    /// asks before it creates a chat for a first message.
    pub fn ready(&self) -> Result<(), AgentError> {
        self.runs_here()?;
        self.shared.steward.llm().map_err(|e| AgentError::NoModel(e.to_string()))?;
        Ok(())
    }

    /// The tools its turns call (and the MCP face serves).
    pub fn toolbox(&self) -> &Arc<Toolbox> {
        &self.shared.toolbox
    }

    /// The bounds in force.
    pub fn config(&self) -> &AgentConfig {
        &self.shared.config
    }

    /// A new, empty chat.
    pub fn create_chat(&self) -> Result<ChatSummary, AgentError> {
        self.shared.store.create_chat(&new_id("chat"), now_secs())
    }

    /// A page of chats, most recently active first.
    pub fn list_chats(&self, offset: usize, limit: usize) -> Result<Vec<ChatSummary>, AgentError> {
        self.shared.store.list_chats(offset, limit)
    }

    /// One chat.
    pub fn chat(&self, id: &str) -> Result<ChatSummary, AgentError> {
        self.shared.store.chat(id)
    }

    /// A page of a chat's messages after message `after` (0: from the start).
    pub fn messages(
        &self,
        chat: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<ChatMessage>, AgentError> {
        if limit == 0 || limit > MAX_MESSAGE_PAGE {
            return Err(AgentError::Invalid(format!("limit must be 1..={MAX_MESSAGE_PAGE}")));
        }
        self.shared.store.chat(chat)?;
        self.shared.store.messages(chat, after, limit)
    }

    /// Every tool call of a chat with its decision.
    pub fn tool_calls(&self, chat: &str) -> Result<Vec<ToolCallRecord>, AgentError> {
        self.shared.store.chat(chat)?;
        self.shared.store.calls(chat)
    }

    /// The chat's turns, newest first (at most `limit`, ≤ [`MAX_CHAT_PAGE`]).
    pub fn turns(&self, chat: &str, limit: usize) -> Result<Vec<TurnRecord>, AgentError> {
        self.shared.store.turns(chat, limit.clamp(1, MAX_CHAT_PAGE))
    }

    /// Sets a chat's title.
    pub fn rename_chat(&self, id: &str, title: &str) -> Result<ChatSummary, AgentError> {
        self.shared.store.rename(id, title, now_secs())
    }

    /// Deletes a chat: tombstoned, its content purged. Refused while a turn runs in it.
    pub fn delete_chat(&self, id: &str) -> Result<(), AgentError> {
        let lanes = self.shared.lanes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // A run whose end is recorded no longer holds the chat (its thread may still tidy up).
        let running = lanes
            .get(id)
            .and_then(|l| l.run.as_deref())
            .is_some_and(|run| self.shared.store.turn(run).map_or(true, |t| t.status == "running"));
        if running {
            return Err(AgentError::Busy(id.to_owned()));
        }
        self.shared.store.delete(id, now_secs())
    }

    /// Sends `text` to `chat`: starts a turn and returns its run id at once, or — when a turn
    /// runs in this chat — queues the text for that turn's next model boundary and returns
    /// its run id.
    pub fn start_turn(&self, chat: &str, text: &str) -> Result<String, AgentError> {
        let text = checked_text(text)?;
        self.shared.store.chat(chat)?;
        self.ready()?;
        let mut lanes = self.shared.lanes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let lane = lanes.entry(chat.to_owned()).or_default();
        if let Some(run) = &lane.run {
            if lane.queued.len() >= MAX_QUEUED_MESSAGES {
                return Err(AgentError::Busy(chat.to_owned()));
            }
            let carrier = if lane.closing { self.shared.reserve_next(lane) } else { run.clone() };
            lane.queued.push_back(text.to_owned());
            return Ok(carrier);
        }
        let run = new_id("run");
        lane.run = Some(run.clone());
        drop(lanes);
        self.spawn(chat, &run, Some(text.to_owned()));
        Ok(run)
    }

    fn spawn(&self, chat: &str, run: &str, text: Option<String>) {
        // A reserved run already has its flag (it may be cancelled before it starts).
        let cancel = Arc::clone(
            self.shared
                .cancels
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(run.to_owned())
                .or_insert_with(|| Arc::new(AtomicBool::new(false))),
        );
        let shared = Arc::clone(&self.shared);
        let agent = self.clone();
        let (c, r) = (chat.to_owned(), run.to_owned());
        // Shut down meanwhile (after `shutdown` set every flag it found): this run starts
        // cancelled, records its message and ends at once.
        if self.shared.stop.load(Ordering::SeqCst) {
            cancel.store(true, Ordering::SeqCst);
        }
        let spawned = std::thread::Builder::new().name(format!("turn-{run}")).spawn(move || {
            shared.acquire();
            turn::run(&shared, &c, &r, text, &cancel);
            shared.release();
            agent.finish_lane(&c, &r);
        });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start a turn thread");
            let ended = TurnEvent::TurnEnded {
                reason: EndReason::Error,
                error: Some(format!("cannot start the turn: {e}")),
                next_run: None,
            };
            self.shared.event(run, chat, &ended);
            self.finish_lane(chat, run);
        }
    }

    /// The lane of `chat` is free again; a message or decision that arrived meanwhile starts
    /// a turn. While the agent shuts down that turn still runs, cancelled from the start: its
    /// message is kept in the chat and the run ends `cancelled` with no model call, so no
    /// message is lost and nobody waits on a run that never starts.
    fn finish_lane(&self, chat: &str, run: &str) {
        let mut run = run.to_owned();
        loop {
            self.shared
                .cancels
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&run);
            let mut lanes =
                self.shared.lanes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let Some(lane) = lanes.get_mut(chat) else { return };
            lane.run = None;
            lane.closing = false;
            let reserved = lane.next.take();
            let next_text = lane.queued.pop_front();
            let resume = std::mem::take(&mut lane.resume);
            if next_text.is_none() && !resume {
                return;
            }
            let next = reserved.unwrap_or_else(|| new_id("run"));
            lane.run = Some(next.clone());
            drop(lanes);
            if !self.shared.stop.load(Ordering::SeqCst) {
                self.spawn(chat, &next, next_text);
                return;
            }
            turn::run(&self.shared, chat, &next, next_text, &AtomicBool::new(true));
            run = next;
        }
    }

    /// Asks the run to stop at its next safe point (before a model call, while streaming,
    /// between tools). Unknown or finished runs: `false`.
    pub fn cancel(&self, run: &str) -> bool {
        // A run whose end is recorded is over, even while its thread still tidies up.
        if self.shared.store.turn(run).is_ok_and(|t| t.status != "running") {
            return false;
        }
        let map = self.shared.cancels.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(run).is_some_and(|c| {
            c.store(true, Ordering::SeqCst);
            true
        })
    }

    /// The run of `chat` that runs now, else its newest recorded one (`None`: no turn yet).
    /// Follow a chat resumed by a decision with it.
    pub fn latest_run(&self, chat: &str) -> Result<Option<String>, AgentError> {
        self.shared.store.chat(chat)?;
        let lanes = self.shared.lanes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(run) = lanes.get(chat).and_then(|l| l.run.clone()) {
            return Ok(Some(run));
        }
        // Still held: a lane is freed only after its run's end is recorded.
        let newest = self.shared.store.turns(chat, 1)?.into_iter().next().map(|t| t.run_id);
        drop(lanes);
        Ok(newest)
    }

    /// Sends `text` to chat `chat` (a new chat when `None`) and returns where to follow it
    /// from: what every frontend does with a person's message. A message that cannot run (bad
    /// text, no model, turns run elsewhere, unknown chat) is refused before any chat is made.
    pub fn send(&self, chat: Option<&str>, text: &str) -> Result<Sent, AgentError> {
        checked_text(text)?;
        let chat_id = match chat {
            Some(c) => self.chat(c)?.id,
            None => {
                self.ready()?;
                self.create_chat()?.id
            }
        };
        let cursor = self.event_position(Some(&chat_id))?;
        let run_id = self.start_turn(&chat_id, text)?;
        Ok(Sent { chat_id, run_id, cursor })
    }

    /// A follower of run `run` of chat `chat`, reading its events after `cursor` ([`Sent`]
    /// says where a new run starts; 0 reads the chat from its beginning).
    pub fn follow(&self, run: &str, chat: &str, cursor: i64) -> RunFollower {
        RunFollower {
            agent: self.clone(),
            run: run.to_owned(),
            chat: chat.to_owned(),
            cursor,
            buffered: VecDeque::new(),
            done: false,
            heard: std::time::Instant::now(),
        }
    }

    /// A follower of recorded run `run` from its first event.
    pub fn follow_run(&self, run: &str) -> Result<RunFollower, AgentError> {
        let chat = self.shared.store.turn(run)?.chat_id;
        Ok(self.follow(run, &chat, 0))
    }

    /// A turn as recorded.
    pub fn turn(&self, run: &str) -> Result<TurnRecord, AgentError> {
        self.shared.store.turn(run)
    }

    /// Waits (at most `timeout`) for run `run` to end and returns its result; `None` when it
    /// still runs.
    pub fn wait(&self, run: &str, timeout: Duration) -> Result<Option<TurnResult>, AgentError> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let seen = self.shared.position();
            match self.shared.store.turn(run) {
                Ok(t) if t.status != "running" => return self.result_of(&t).map(Some),
                Ok(_) => {}
                // Started but not yet recorded by its thread.
                Err(AgentError::RunNotFound(_)) => {}
                Err(e) => return Err(e),
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.shared.wait_change(seen, left.min(Duration::from_millis(500)));
        }
    }

    /// The result of run `run` once it has ended (`RUN_RUNNING`, a conflict, while it runs).
    pub fn result(&self, run: &str) -> Result<TurnResult, AgentError> {
        let t = self.shared.store.turn(run)?;
        if t.status == "running" {
            return Err(AgentError::Running(t.run_id));
        }
        self.result_of(&t)
    }

    fn result_of(&self, t: &TurnRecord) -> Result<TurnResult, AgentError> {
        Ok(TurnResult {
            run_id: t.run_id.clone(),
            chat_id: t.chat_id.clone(),
            end_reason: t.end_reason.unwrap_or(EndReason::Error),
            approvals: self.shared.store.awaiting_approvals(Some(&t.chat_id))?,
            text: self.shared.store.last_answer(&t.chat_id, &t.run_id)?.unwrap_or_default(),
            usage: TurnUsage {
                model_calls: t.model_calls,
                tool_calls: t.tool_calls,
                input_tokens: t.input_tokens,
                output_tokens: t.output_tokens,
                cost_micros: t.cost_micros,
            },
            error: t.error.clone(),
            next_run: t.next_run.clone(),
        })
    }

    /// The newest event's position (of `chat`, or of every chat): follow a turn about to
    /// start from here. 0 when there is none.
    pub fn event_position(&self, chat: Option<&str>) -> Result<i64, AgentError> {
        self.shared.store.event_position(chat)
    }

    /// Events after `after` (of `chat`, or every chat), at most `limit`.
    pub fn events_after(
        &self,
        chat: Option<&str>,
        after: i64,
        limit: usize,
    ) -> Result<Vec<EventRecord>, AgentError> {
        self.shared.store.events_after(chat, after, limit)
    }

    /// [`Agent::events_after`], waiting up to `timeout` for one when there are none yet.
    pub fn wait_events(
        &self,
        chat: Option<&str>,
        after: i64,
        limit: usize,
        timeout: Duration,
    ) -> Result<Vec<EventRecord>, AgentError> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let seen = self.shared.position();
            let events = self.shared.store.events_after(chat, after, limit)?;
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if !events.is_empty() || left.is_zero() {
                return Ok(events);
            }
            self.shared.wait_change(seen, left);
        }
    }

    /// Resolves every call waiting for an approval a person has decided (or that expired)
    /// and resumes the chats they belong to. Returns how many calls were resolved. The
    /// approval watcher calls this; a frontend may too, right after a decision.
    pub fn resolve_decided(&self) -> Result<usize, AgentError> {
        self.runs_here()?;
        let approvals = match self.shared.steward.approvals() {
            Ok(a) => a,
            Err(e) => return Err(AgentError::Approval(Box::new(e))),
        };
        if let Err(e) = approvals.expire_due(now_secs()) {
            tracing::warn!(error = %e, "approval expiry failed");
        }
        let mut resolved = 0;
        let mut chats = Vec::new();
        for id in self.shared.store.awaiting_approvals(None)? {
            if let Some(chat) = turn::resolve_one(&self.shared, id)? {
                resolved += 1;
                if !chats.contains(&chat) {
                    chats.push(chat);
                }
            }
        }
        for chat in chats {
            // Resume once nothing else in the chat waits for a person.
            if self.shared.store.awaiting_approvals(Some(&chat))?.is_empty() {
                self.resume(&chat);
            }
        }
        Ok(resolved)
    }

    fn resume(&self, chat: &str) {
        let mut lanes = self.shared.lanes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let lane = lanes.entry(chat.to_owned()).or_default();
        if lane.run.is_some() {
            lane.resume = true;
            return;
        }
        let run = new_id("run");
        lane.run = Some(run.clone());
        drop(lanes);
        self.spawn(chat, &run, None);
    }

    /// Watches the approval feed on a thread of its own and resolves decided calls as they
    /// come ([`Agent::resolve_decided`]); stops with [`Agent::shutdown`].
    pub fn watch_approvals(&self) -> std::io::Result<std::thread::JoinHandle<()>> {
        let agent = self.clone();
        std::thread::Builder::new().name("agent-approvals".into()).spawn(move || {
            let Ok(approvals) = agent.shared.steward.approvals() else { return };
            let mut cursor = approvals.feed_position().unwrap_or(0);
            if let Err(e) = agent.resolve_decided() {
                tracing::warn!(error = %e, "resolving decided approvals failed");
            }
            while !agent.shared.stop.load(Ordering::SeqCst) {
                match approvals.wait_events(cursor, 100, Duration::from_secs(1)) {
                    Ok(events) if !events.is_empty() => {
                        cursor = events.last().map_or(cursor, |e| e.seq);
                        if let Err(e) = agent.resolve_decided() {
                            tracing::warn!(error = %e, "resolving decided approvals failed");
                        }
                    }
                    Ok(_) => {
                        // Expiry happens by time, not by an event.
                        let _ = agent.resolve_decided();
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "approval feed unavailable");
                        std::thread::sleep(Duration::from_secs(1));
                    }
                }
            }
        })
    }

    /// Stops new turns and the approval watcher; running turns are cancelled at their next
    /// safe point.
    pub fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let map = self.shared.cancels.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for c in map.values() {
            c.store(true, Ordering::SeqCst);
        }
    }
}

impl Shared {
    /// The run id reserved for what `lane`'s run will not apply, with its cancel flag, so a
    /// person can cancel it from the moment its id is known (lock order: lanes, then cancels).
    fn reserve_next(&self, lane: &mut Lane) -> String {
        let next = lane.next.get_or_insert_with(|| new_id("run")).clone();
        self.cancels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(next.clone())
            .or_insert_with(|| Arc::new(AtomicBool::new(false)));
        next
    }

    fn acquire(&self) {
        let (lock, cv) = &self.running;
        let mut n = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while *n >= self.config.max_concurrent_turns.max(1) {
            n = cv.wait(n).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        *n += 1;
    }

    fn release(&self) {
        let (lock, cv) = &self.running;
        let mut n = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *n = n.saturating_sub(1);
        cv.notify_one();
    }

    fn position(&self) -> u64 {
        *self.changed.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn wait_change(&self, seen: u64, timeout: Duration) {
        let (lock, cv) = &self.changed;
        let n = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if *n == seen {
            let _ = cv.wait_timeout(n, timeout);
        }
    }

    /// Records an event (a failure to record is logged: the turn goes on, the chat's
    /// messages stay the truth).
    pub(crate) fn event(&self, run: &str, chat: &str, event: &TurnEvent) {
        if let Err(e) = self.store.append_event(run, chat, event, now_secs()) {
            tracing::warn!(error = %e, "a turn event could not be recorded");
        }
        self.notify();
    }

    /// Wakes whoever waits for a change (events, turn ends).
    pub(crate) fn notify(&self) {
        let (lock, cv) = &self.changed;
        let mut n = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *n = n.wrapping_add(1);
        drop(n);
        cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_reasons_round_trip_their_wire_names() {
        for r in [
            EndReason::Completed,
            EndReason::AwaitingApproval,
            EndReason::MaxModelCalls,
            EndReason::MaxToolCalls,
            EndReason::Budget,
            EndReason::Deadline,
            EndReason::Cancelled,
            EndReason::ModelUnavailable,
            EndReason::Error,
        ] {
            assert_eq!(EndReason::parse(r.as_str()), Some(r));
            assert_eq!(serde_json::to_value(r).unwrap(), serde_json::json!(r.as_str()));
        }
        assert_eq!(EndReason::parse("nope"), None);
    }
}
