//! The engine over `watches.db`: the types and the store here; definitions, the poll
//! cycle, the queue and its delivery, granted actions and row readers in their own files.

mod actions;
mod definitions;
mod delivery;
mod poll;
mod rows;

use definitions::*;
use rows::*;

use std::{
    collections::{BTreeMap, HashSet},
    path::Path,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
};

use rusqlite::{OptionalExtension as _, params};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    COMPOSE_ATTEMPTS, CapabilityRegistry, DEFAULT_POLL_SECS, DomainEvent, GrantContext,
    MAX_ACTIVE_WATCHES, MAX_DELIVERY_ATTEMPTS, MAX_DELIVERY_BATCH, MAX_FILTERS,
    MAX_INSTRUCTION_CHARS, MAX_REF_CHARS, MAX_RULES, MAX_WATCH_PAGE, MIN_POLL_SECS,
    MIN_URGENT_POLL_SECS, RELATIVE_GRACE_SECS, Trigger, WatchAdapter, WatchDefinition, WatchError,
    WatchRule, at_path,
    grants::{check_rule_grants, determined_arguments, guard_arguments},
};
use crate::{
    Limits,
    approval::canonical_json,
    store::{Database, Migration, OpenOptions, Schema, StoreError, json_column},
    time::{CivilTime, parse_date},
};

/// Watches whose observations share one write transaction during a poll.
/// Fixed (not a setting).
const POLL_WRITE_BATCH: usize = 256;

/// What one poll saw of one watch.
struct Observation {
    id: i64,
    rules: Vec<WatchRule>,
    events: Vec<DomainEvent>,
    current: Value,
    terminal: bool,
}

const SCHEMA: Schema = Schema {
    name: "watches",
    migrations: &[
        Migration {
            version: 1,
            name: "watches",
            sql: include_str!("../../../migrations/watches/001_watches.sql"),
        },
        Migration {
            version: 2,
            name: "deliveries",
            sql: include_str!("../../../migrations/watches/002_deliveries.sql"),
        },
        Migration {
            version: 3,
            name: "grants",
            sql: include_str!("../../../migrations/watches/003_grants.sql"),
        },
    ],
};

fn q(ctx: &'static str) -> impl Fn(rusqlite::Error) -> WatchError {
    move |e| match e {
        // A stored JSON column that no longer parses.
        rusqlite::Error::FromSqlConversionFailure(..) => WatchError::Corrupt(format!("{ctx}: {e}")),
        e => WatchError::Store(StoreError::query(ctx, e)),
    }
}

crate::state::state_enum! {
    /// A watch's state.
    pub enum WatchStatus {
        /// Polled; its events are queued.
        Active => "active",
        /// A person stopped it.
        Stopped => "stopped",
        /// Its time ran out.
        Expired => "expired",
        /// Its resource reached an end (a train arrived).
        Completed => "completed",
    }
}

crate::state::state_enum! {
    /// A queued event's state.
    pub enum EventStatus {
        /// Waiting for delivery.
        Pending => "pending",
        /// The person was told.
        Delivered => "delivered",
        /// Given up after its attempts ran out.
        Failed => "failed",
    }
}

crate::state::state_enum! {
    /// What came of delivering an event.
    pub enum DeliveryResult {
        /// The person was told.
        Delivered => "delivered",
        /// Given up.
        Failed => "failed",
    }
}

crate::state::state_enum! {
    /// A granted action run's state.
    pub enum ActionRunStatus {
        /// Claimed: running, or cut off by a crash (never run again).
        Claimed => "claimed",
        /// It took effect.
        Succeeded => "succeeded",
        /// It did not.
        Failed => "failed",
        /// Nobody knows (a crash, a timeout after sending).
        Unknown => "unknown",
    }
}

/// A watch as a list shows it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct WatchSummary {
    /// Its id.
    pub id: i64,
    /// The adapter.
    pub source: String,
    /// What it watches.
    pub resource_ref: String,
    /// The rules, relative times frozen.
    pub rules: Vec<WatchRule>,
    /// The person's words.
    pub instruction: String,
    /// The chat it came from.
    pub chat: Option<String>,
    /// Its state.
    pub status: WatchStatus,
    /// The last observed state.
    pub snapshot: Value,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub expires_at: i64,
    /// Unix seconds.
    pub last_checked_at: Option<i64>,
    /// The last source failure, kept until a snapshot succeeds.
    pub last_error: Option<String>,
    /// The person's approval of its grants (a continuation's child: its parent's).
    pub approval_id: Option<i64>,
    /// The watch whose continuation made this one.
    pub parent_id: Option<i64>,
    /// Which attempt of a continuation this is (1 for a watch a person created).
    pub attempt: i64,
}

/// A delivery outcome in the feed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DeliveryOutcome {
    /// Position in the delivery feed.
    pub seq: i64,
    /// The event.
    pub event_id: i64,
    /// Its watch.
    pub watch_id: i64,
    /// Delivered, or given up.
    pub outcome: DeliveryResult,
    /// The notification as it was sent (absent when none was composed).
    pub text: Option<String>,
    /// Unix seconds.
    pub at: i64,
}

/// What [`Watches::health`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct WatchHealth {
    /// Watches still active.
    pub active: i64,
    /// Active watches whose last check failed (their source is down or refused).
    pub failing: i64,
    /// Events queued and not delivered yet.
    pub pending_events: i64,
    /// Events given up after the delivery attempts ran out.
    pub failed_events: i64,
    /// The latest check of any watch (Unix seconds).
    pub last_checked_at: Option<i64>,
}

/// A queued (or delivered) event.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct QueuedEvent {
    /// Its id.
    pub id: i64,
    /// The watch.
    pub watch_id: i64,
    /// `<watch id>:<adapter key>`.
    pub event_key: String,
    /// The rules it matched.
    pub matched_rules: Vec<String>,
    /// The event.
    pub event: DomainEvent,
    /// Its state.
    pub status: EventStatus,
    /// The composed text, once made (a retry sends the same text).
    pub notification: Option<String>,
    /// Failed attempts.
    pub attempts: i64,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub delivered_at: Option<i64>,
    /// The last failure.
    pub last_error: Option<String>,
}

/// Which watches to list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct WatchQuery {
    /// Only this state.
    pub status: Option<WatchStatus>,
    /// Watches to skip.
    pub offset: usize,
    /// Watches to return (1..=100; absent: 20).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<usize>,
}

/// Which events to list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct WatchEventQuery {
    /// Only events still to deliver.
    pub pending: bool,
    /// Only this watch's.
    pub watch_id: Option<i64>,
    /// Events to skip.
    pub offset: usize,
    /// Events to return (1..=100; absent: 20).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<usize>,
}

/// What one poll did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PollReport {
    /// Another poll was running: this one did nothing.
    pub skipped: bool,
    /// Watches that expired.
    pub expired: usize,
    /// Watches whose source answered.
    pub checked: usize,
    /// Watches whose source failed (previous snapshot kept).
    pub failed: usize,
    /// Watches whose source did not answer within the cycle's time budget (previous snapshot
    /// kept; asked again next cycle).
    pub deferred: usize,
    /// New events queued.
    pub queued: usize,
    /// Watches that completed.
    pub completed: usize,
    /// Seconds until the next poll should run.
    pub next_poll_secs: u64,
}

/// Why a delivery did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryError {
    /// The channel is busy (a call in progress): the event stays pending, no attempt counted.
    Busy,
    /// It failed; the event is retried later.
    Failed(String),
}

/// The host's way of telling the person.
pub trait Delivery {
    /// Composes the notification (a model may do it); `Err` counts as a failed attempt, and
    /// after [`COMPOSE_ATTEMPTS`] of them the event's `fallback_text` is used instead.
    fn compose(&self, event: &QueuedEvent) -> Result<String, String>;
    /// Sends `text`.
    fn send(&self, event: &QueuedEvent, text: &str) -> Result<(), DeliveryError>;
}

/// What one delivery pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DeliveryReport {
    /// Sent.
    pub delivered: usize,
    /// Left pending because the channel was busy.
    pub busy: usize,
    /// Failed this time (retried later).
    pub failed: usize,
    /// Given up after [`MAX_DELIVERY_ATTEMPTS`].
    pub abandoned: usize,
}

/// A granted action an event makes available to a background turn.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct GrantedAction {
    /// The event.
    pub event_id: i64,
    /// The rule that grants it.
    pub rule_id: String,
    /// The capability.
    pub tool: String,
    /// Every argument its constraints fix (templates filled, relative times frozen).
    pub arguments: Value,
    /// Arguments still to choose within their constraint (`one_of`, `range`).
    pub open_fields: Vec<String>,
    /// Why it cannot run now (a template field without a value), if so.
    pub unavailable: Option<String>,
    /// Already claimed for this event (it never runs again).
    pub claimed: bool,
}

/// A durable claim, written before the action runs.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ActionClaim {
    /// The run's id (to finish it).
    pub run_id: i64,
    /// `<event id>:<rule id>:<tool>`.
    pub action_key: String,
    /// The checked arguments to run (relative times frozen).
    pub arguments: Value,
}

/// How a granted action ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActionStatus {
    /// It took effect.
    Succeeded,
    /// It did not.
    Failed,
    /// Nobody knows (a crash, a timeout after sending).
    Unknown,
}

impl ActionStatus {
    fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
        }
    }
}

/// What the executor reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ActionResult {
    /// How it ended.
    pub status: ActionStatus,
    /// A structured outcome (`not_answered`, `busy`, …) a continuation may follow.
    #[serde(default)]
    pub outcome: Option<String>,
    /// The error, when it failed.
    #[serde(default)]
    pub error: Option<String>,
}

/// A recorded action run.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ActionRun {
    /// Its id.
    pub id: i64,
    /// `<event id>:<rule id>:<tool>`.
    pub action_key: String,
    /// The watch.
    pub watch_id: i64,
    /// The event.
    pub event_id: i64,
    /// The rule.
    pub rule_id: String,
    /// The capability.
    pub tool: String,
    /// Its state.
    pub status: ActionRunStatus,
    /// The checked arguments.
    pub arguments: Value,
    /// The structured outcome.
    pub outcome: Option<String>,
    /// The error.
    pub error: Option<String>,
    /// Unix seconds.
    pub started_at: i64,
    /// Unix seconds.
    pub finished_at: Option<i64>,
    /// The continuation's child watch, when the outcome scheduled one.
    pub child_watch_id: Option<i64>,
}

/// Runs a granted action (the host's connectors). Called only after the claim is durable.
pub trait ActionExecutor {
    /// Runs `tool` with the checked `arguments`.
    fn execute(&self, tool: &str, arguments: &Value) -> ActionResult;

    /// Runs a claimed action: `action_key` (`<event id>:<rule id>:<tool>`) names it uniquely
    /// and durably, so an executor that journals its effect keys it by this (a crash between
    /// the effect and [`Watches::finish_action`] is then never a second effect). By default
    /// [`ActionExecutor::execute`].
    fn execute_claimed(&self, action_key: &str, tool: &str, arguments: &Value) -> ActionResult {
        let _ = action_key;
        self.execute(tool, arguments)
    }
}

/// What [`Watches::run_granted`] did for one event.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct GrantedRunReport {
    /// Actions that ran (claimed, executed, finished).
    pub ran: Vec<ActionRun>,
    /// `<rule>:<tool>: why` for each granted action that did not run.
    pub skipped: Vec<String>,
}

/// The watches of one home.
pub struct Watches {
    db: Database,
    adapters: BTreeMap<String, Arc<dyn WatchAdapter>>,
    caps: CapabilityRegistry,
    polling: Mutex<()>,
    /// Poll workers still running, per source.
    busy: Mutex<BTreeMap<String, Arc<AtomicUsize>>>,
}

/// Counts a poll worker out when it ends, however it ends.
struct BusyGuard(Arc<AtomicUsize>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How long one poll cycle may take and how many snapshots of one source may run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollBudget {
    /// Watches not answered by then are deferred to the next cycle (`None`: wait for all).
    pub deadline: Option<std::time::Instant>,
    /// Worker threads per source (1 without a deadline: the poll runs on the caller's thread).
    pub per_source: usize,
}

impl Default for PollBudget {
    fn default() -> Self {
        Self { deadline: None, per_source: 1 }
    }
}

impl std::fmt::Debug for Watches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watches").field("adapters", &self.adapters.keys()).finish_non_exhaustive()
    }
}

/// An RFC 3339 instant with an explicit offset, as Unix seconds.
fn instant(text: &str) -> Result<i64, WatchError> {
    crate::time::parse_instant(text).map_err(|_| {
        WatchError::Invalid(format!(
            "{text:?} must be an RFC 3339 instant with an explicit offset (2026-12-24T18:00:00+01:00)"
        ))
    })
}

fn rfc3339(secs: i64) -> String {
    CivilTime::from_unix(secs).rfc3339()
}

/// A snapshot timestamp: Unix milliseconds, Unix seconds, or RFC 3339.
pub(crate) fn timestamp(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().map(|x| if x > 100_000_000_000 { x / 1000 } else { x }),
        Value::String(s) => parse_date(s).ok(),
        _ => None,
    }
}

impl Watches {
    /// Opens (creating) `<home>/watches.db` with these adapters.
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn open(
        home: &Path,
        limits: &Limits,
        adapters: &[Arc<dyn WatchAdapter>],
    ) -> Result<Self, WatchError> {
        let db =
            Database::open(&home.join("watches.db"), &SCHEMA, OpenOptions::small_writes(limits))?;
        let adapters = adapters.iter().map(|a| (a.source().to_owned(), Arc::clone(a))).collect();
        Ok(Self {
            db,
            adapters,
            caps: CapabilityRegistry::builtin(),
            polling: Mutex::new(()),
            busy: Mutex::new(BTreeMap::new()),
        })
    }

    /// Replaces the capabilities grants may name (default: [`CapabilityRegistry::builtin`]).
    #[must_use]
    pub fn with_capabilities(mut self, caps: CapabilityRegistry) -> Self {
        self.caps = caps;
        self
    }

    /// The capabilities grants may name.
    pub fn capabilities(&self) -> &CapabilityRegistry {
        &self.caps
    }

    /// The sources this engine can watch.
    pub fn sources(&self) -> Vec<String> {
        self.adapters.keys().cloned().collect()
    }

    fn adapter(&self, source: &str) -> Result<&Arc<dyn WatchAdapter>, WatchError> {
        self.adapters.get(source).ok_or_else(|| WatchError::UnknownSource(source.to_owned()))
    }
}

fn page(limit: Option<usize>) -> Result<i64, WatchError> {
    let limit = limit.unwrap_or(20);
    if limit == 0 || limit > MAX_WATCH_PAGE {
        return Err(WatchError::Invalid(format!("limit must be 1..={MAX_WATCH_PAGE}")));
    }
    Ok(i64::try_from(limit).unwrap_or(20))
}

fn offset(o: usize) -> i64 {
    i64::try_from(o).unwrap_or(i64::MAX)
}

fn to_json<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned())
}
