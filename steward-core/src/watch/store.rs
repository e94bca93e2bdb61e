//! The engine over `watches.db`.

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
            sql: include_str!("../../migrations/watches/001_watches.sql"),
        },
        Migration {
            version: 2,
            name: "deliveries",
            sql: include_str!("../../migrations/watches/002_deliveries.sql"),
        },
        Migration {
            version: 3,
            name: "grants",
            sql: include_str!("../../migrations/watches/003_grants.sql"),
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
    pub fn open(
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

    /// Checks and freezes the rules: unique ids, exactly one of event or trigger, bounded
    /// filters, relative `after_minutes` turned into an instant now.
    fn freeze_rules(
        &self,
        adapter: &dyn WatchAdapter,
        rules: &[WatchRule],
        now: i64,
    ) -> Result<Vec<WatchRule>, WatchError> {
        let fields = adapter.grant_fields();
        let bad = |m: String| Err(WatchError::Invalid(m));
        if rules.is_empty() || rules.len() > MAX_RULES {
            return bad(format!("a watch has 1..={MAX_RULES} rules"));
        }
        let mut ids = HashSet::new();
        let mut out = Vec::with_capacity(rules.len());
        for r in rules {
            let id_ok = !r.id.is_empty()
                && r.id.len() <= 64
                && r.id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
            if !id_ok {
                return bad(format!("rule id {:?}: 1..=64 of a-z, 0-9, -, _, .", r.id));
            }
            if !ids.insert(r.id.clone()) {
                return bad(format!("rule id {:?} is used twice", r.id));
            }
            check_rule_grants(r, &self.caps, &fields)?;
            adapter
                .check_rule(r)
                .map_err(|m| WatchError::Invalid(format!("rule {}: {m}", r.id)))?;
            if r.filter.len() > MAX_FILTERS {
                return bad(format!("rule {}: at most {MAX_FILTERS} where filters", r.id));
            }
            let mut r = r.clone();
            match (&r.event, &r.trigger) {
                (Some(e), None) if !e.is_empty() && e.len() <= 64 => {}
                (None, Some(Trigger::BeforeTime { field, minutes })) => {
                    if field.is_empty() || !(0..=1_440).contains(minutes) {
                        return bad(format!(
                            "rule {}: before_time needs a field and 0..=1440 minutes",
                            r.id
                        ));
                    }
                    if !r.filter.is_empty() {
                        return bad(format!("rule {}: where filters apply to events only", r.id));
                    }
                }
                (None, Some(Trigger::TimeReached { at, after_minutes })) => {
                    let when = match (at, after_minutes) {
                        (Some(a), None) => instant(a)?,
                        (None, Some(m)) if (1..=525_600).contains(m) => now + m * 60,
                        _ => {
                            return bad(format!(
                                "rule {}: time_reached needs exactly one of at or after_minutes (1..=525600)",
                                r.id
                            ));
                        }
                    };
                    r.trigger =
                        Some(Trigger::TimeReached { at: Some(rfc3339(when)), after_minutes: None });
                }
                _ => return bad(format!("rule {}: exactly one of event or trigger", r.id)),
            }
            out.push(r);
        }
        Ok(out)
    }

    /// Checks a definition and freezes it (relative times become instants) without asking its
    /// source: what an approval card shows and, once approved, exactly what is created.
    pub fn prepare(&self, def: &WatchDefinition, now: i64) -> Result<WatchDefinition, WatchError> {
        let adapter = self.adapter(&def.source)?;
        if def.resource_ref.is_empty() || def.resource_ref.chars().count() > MAX_REF_CHARS {
            return Err(WatchError::Invalid(format!(
                "resource_ref must be 1..={MAX_REF_CHARS} characters"
            )));
        }
        if def.instruction.trim().is_empty()
            || def.instruction.chars().count() > MAX_INSTRUCTION_CHARS
        {
            return Err(WatchError::Invalid(format!(
                "instruction must be 1..={MAX_INSTRUCTION_CHARS} characters"
            )));
        }
        adapter.check_ref(&def.resource_ref).map_err(|reason| WatchError::BadResource {
            source_name: def.source.clone(),
            reason,
        })?;
        let rules = self.freeze_rules(adapter.as_ref(), &def.rules, now)?;
        if let Some(e) = def.expires_at.as_deref().map(instant).transpose()?
            && e <= now
        {
            return Err(WatchError::Invalid("expires_at is in the past".to_owned()));
        }
        Ok(WatchDefinition { rules, instruction: def.instruction.trim().to_owned(), ..def.clone() })
    }

    /// Creates a watch: checks it, captures the initial snapshot (conditions already true are
    /// not replayed) and stores it. A source that fails now fails the creation. A definition
    /// with grants is refused (`WATCH_NEEDS_APPROVAL`): see [`Watches::create_approved`].
    pub fn create(&self, def: &WatchDefinition, now: i64) -> Result<WatchSummary, WatchError> {
        let def = self.prepare(def, now)?;
        if let Some(r) = def.rules.iter().find(|r| !r.grants.is_empty()) {
            return Err(WatchError::NeedsApproval(r.id.clone()));
        }
        self.insert(&def, &Origin::default(), now)
    }

    /// Creates the watch a person approved: `approved` is the approval store's token for a
    /// `watch.create_agent` request, and the watch started is exactly its input. Idempotent: a
    /// second activation of the same approval returns the watch the first made.
    pub fn create_approved(
        &self,
        approved: &crate::approval::ApprovedInput,
        now: i64,
    ) -> Result<WatchSummary, WatchError> {
        if approved.tool() != crate::WATCH_GRANTS_TOOL {
            return Err(WatchError::Invalid(format!(
                "approval {} is not a {} request",
                approved.approval_id(),
                crate::WATCH_GRANTS_TOOL
            )));
        }
        let approval_id = approved.approval_id();
        if let Some(w) = self.by_approval(approval_id)? {
            return Ok(w);
        }
        let def: WatchDefinition = serde_json::from_value(approved.input().clone())
            .map_err(|e| WatchError::Invalid(e.to_string()))?;
        let def = self.prepare(&def, now)?;
        let origin = Origin { approval_id: Some(approval_id), ..Origin::default() };
        match self.insert(&def, &origin, now) {
            // A concurrent activation won the unique index.
            Err(WatchError::Store(_)) if self.by_approval(approval_id)?.is_some() => {
                self.by_approval(approval_id)?.ok_or(WatchError::NotFound { what: "watch", id: 0 })
            }
            other => other,
        }
    }

    fn by_approval(&self, approval_id: i64) -> Result<Option<WatchSummary>, WatchError> {
        self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {WATCH_COLUMNS} FROM watches WHERE approval_id = ?1 AND parent_id IS NULL"
            ))
            .and_then(|mut s| s.query_row([approval_id], watch_row).optional())
            .map_err(q("watch by approval"))
        })
    }

    /// Snapshots and stores a prepared definition.
    fn insert(
        &self,
        def: &WatchDefinition,
        origin: &Origin,
        now: i64,
    ) -> Result<WatchSummary, WatchError> {
        let adapter = self.adapter(&def.source)?;
        let expires = def.expires_at.as_deref().map(instant).transpose()?;
        let snapshot = adapter.snapshot(&def.resource_ref, now).map_err(|e| {
            WatchError::SourceUnavailable { source_name: def.source.clone(), reason: e.0 }
        })?;
        let expires_at = expires.unwrap_or_else(|| adapter.default_expiry(&snapshot, now));
        if expires_at <= now {
            return Err(WatchError::Invalid(
                "the watch would end before it starts (its source's default expiry has passed)"
                    .to_owned(),
            ));
        }
        let id = self.db.write(|tx| insert_watch(tx, def, origin, &snapshot, expires_at, now))?;
        self.get(id)
    }

    /// One watch.
    pub fn get(&self, id: i64) -> Result<WatchSummary, WatchError> {
        self.db
            .read(|c| {
                c.prepare_cached(&format!("SELECT {WATCH_COLUMNS} FROM watches WHERE id = ?1"))
                    .and_then(|mut s| s.query_row([id], watch_row).optional())
                    .map_err(q("get watch"))
            })?
            .ok_or(WatchError::NotFound { what: "watch", id })
    }

    /// A page of watches, newest first.
    pub fn list(&self, query: &WatchQuery) -> Result<Vec<WatchSummary>, WatchError> {
        let limit = page(query.limit)?;
        self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {WATCH_COLUMNS} FROM watches WHERE (?1 IS NULL OR status = ?1)
                 ORDER BY id DESC LIMIT ?2 OFFSET ?3"
            ))
            .and_then(|mut s| {
                s.query_map(params![query.status, limit, offset(query.offset)], watch_row)?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(q("list watches"))
        })
    }

    /// Stops a watch. Idempotent, and only ever moves `active → stopped`.
    pub fn stop(&self, id: i64, now: i64) -> Result<WatchSummary, WatchError> {
        self.db.write(|tx| {
            tx.execute(
                "UPDATE watches SET status = 'stopped', ended_at = ?2 WHERE id = ?1 AND status = 'active'",
                params![id, now],
            )
            .map_err(q("stop watch"))
        })?;
        self.get(id)
    }

    fn active(&self) -> Result<Vec<WatchSummary>, WatchError> {
        self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {WATCH_COLUMNS} FROM watches WHERE status = 'active' ORDER BY id"
            ))
            .and_then(|mut s| s.query_map([], watch_row)?.collect::<Result<Vec<_>, _>>())
            .map_err(q("active watches"))
        })
    }

    /// One poll cycle (single flight: a poll that finds another running does nothing), on
    /// the calling thread, without a time budget. See [`Watches::poll_within`].
    pub fn poll(&self, now: i64) -> Result<PollReport, WatchError> {
        self.poll_within(now, &PollBudget::default())
    }

    /// One poll cycle within `budget`: each source's watches are snapshot by up to
    /// `budget.per_source` worker threads of its own, so a source that hangs stalls neither
    /// the other sources nor the cycle. Watches not answered by the deadline are `deferred`
    /// (their last snapshot stays, the failure is recorded, the next cycle asks again); a
    /// source whose workers from an earlier cycle are still stuck gets only the workers it has
    /// left, and none when all are stuck. Observations are applied in watch order.
    pub fn poll_within(&self, now: i64, budget: &PollBudget) -> Result<PollReport, WatchError> {
        let Ok(_guard) = self.polling.try_lock() else {
            return Ok(PollReport { skipped: true, ..PollReport::default() });
        };
        let mut report = PollReport { expired: self.expire_due(now)?, ..PollReport::default() };
        let mut next = DEFAULT_POLL_SECS.max(MIN_POLL_SECS);
        let active = self.active()?;
        let snapshots = if budget.deadline.is_none() && budget.per_source <= 1 {
            let mut out = BTreeMap::new();
            for w in &active {
                if let Some(adapter) = self.adapters.get(&w.source) {
                    out.insert(w.id, adapter.snapshot(&w.resource_ref, now));
                }
            }
            out
        } else {
            self.snapshot_concurrently(&active, now, budget)
        };
        let mut batch: Vec<Observation> = Vec::new();
        for w in active {
            let id = w.id;
            let Some(adapter) = self.adapters.get(&w.source) else {
                self.record_failure(id, &format!("no adapter for source {:?}", w.source), now)?;
                report.failed += 1;
                continue;
            };
            let current = match snapshots.get(&id) {
                Some(Ok(s)) => s.clone(),
                Some(Err(e)) => {
                    self.record_failure(id, &e.0, now)?;
                    report.failed += 1;
                    continue;
                }
                None => {
                    self.record_failure(
                        id,
                        &format!(
                            "not checked: the {} source did not answer within the poll cycle's time budget",
                            w.source
                        ),
                        now,
                    )?;
                    report.deferred += 1;
                    continue;
                }
            };
            report.checked += 1;
            let mut events = adapter.events(&w.snapshot, &current, now);
            events.extend(temporal_events(&w.rules, &current, now));
            let terminal = adapter.is_terminal(&current);
            if !terminal && let Some(u) = adapter.urgency(&current) {
                next = next.min(u.max(MIN_URGENT_POLL_SECS));
            }
            batch.push(Observation { id, rules: w.rules, events, current, terminal });
            if batch.len() >= POLL_WRITE_BATCH {
                self.apply(&mut batch, now, &mut report)?;
            }
        }
        self.apply(&mut batch, now, &mut report)?;
        report.next_poll_secs = next;
        Ok(report)
    }

    /// Snapshots `active` with worker threads per source until `budget.deadline`; what did not
    /// answer in time is absent from the result.
    fn snapshot_concurrently(
        &self,
        active: &[WatchSummary],
        now: i64,
        budget: &PollBudget,
    ) -> BTreeMap<i64, Result<Value, super::SourceError>> {
        type Answer = (i64, Result<Value, super::SourceError>);
        let mut by_source: BTreeMap<&str, Vec<(i64, String)>> = BTreeMap::new();
        for w in active {
            by_source.entry(w.source.as_str()).or_default().push((w.id, w.resource_ref.clone()));
        }
        let (tx, rx) = std::sync::mpsc::channel::<Answer>();
        let mut expected = 0usize;
        for (source, items) in by_source {
            let Some(adapter) = self.adapters.get(source) else { continue };
            let busy = self.busy_workers(source);
            let free = budget.per_source.max(1).saturating_sub(busy.load(Ordering::SeqCst));
            if free == 0 {
                tracing::warn!(source, "every poll worker of this source is still stuck; skipped");
                continue;
            }
            let workers = free.min(items.len());
            expected += items.len();
            let queue = Arc::new(Mutex::new(std::collections::VecDeque::from(items)));
            for _ in 0..workers {
                let (adapter, queue, tx, mine) =
                    (Arc::clone(adapter), Arc::clone(&queue), tx.clone(), Arc::clone(&busy));
                let deadline = budget.deadline;
                busy.fetch_add(1, Ordering::SeqCst);
                let spawned =
                    std::thread::Builder::new().name(format!("poll-{source}")).spawn(move || {
                        let _busy = BusyGuard(mine);
                        loop {
                            if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                                return;
                            }
                            let item =
                                queue.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
                            let Some((id, resource)) = item else { return };
                            let answer = adapter.snapshot(&resource, now);
                            if tx.send((id, answer)).is_err() {
                                return;
                            }
                        }
                    });
                if let Err(e) = spawned {
                    busy.fetch_sub(1, Ordering::SeqCst);
                    tracing::warn!(source, error = %e, "cannot start a poll worker");
                }
            }
        }
        drop(tx);
        let mut out = BTreeMap::new();
        while out.len() < expected {
            let answer = match budget.deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(std::time::Instant::now());
                    match rx.recv_timeout(left) {
                        Ok(a) => a,
                        Err(_) => break,
                    }
                }
                None => match rx.recv() {
                    Ok(a) => a,
                    Err(_) => break,
                },
            };
            out.insert(answer.0, answer.1);
        }
        out
    }

    /// Poll workers of `source` still running (stuck in a snapshot from an earlier cycle).
    fn busy_workers(&self, source: &str) -> Arc<AtomicUsize> {
        let mut busy = self.busy.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(busy.entry(source.to_owned()).or_default())
    }

    fn record_failure(&self, id: i64, error: &str, now: i64) -> Result<(), WatchError> {
        let error: String = error.chars().take(500).collect();
        self.db.write(|tx| {
            tx.execute(
                "UPDATE watches SET last_error = ?2, last_error_at = ?3, last_checked_at = ?3
                 WHERE id = ?1 AND status = 'active'",
                params![id, error, now],
            )
            .map_err(q("record watch failure"))
        })?;
        Ok(())
    }

    fn expire_due(&self, now: i64) -> Result<usize, WatchError> {
        self.db.write(|tx| {
            let due: Vec<(i64, String, String)> = tx
                .prepare_cached(
                    "SELECT id, source, instruction FROM watches
                     WHERE status = 'active' AND expires_at <= ?1 ORDER BY id",
                )
                .and_then(|mut s| {
                    s.query_map([now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(q("due watches"))?;
            for (id, source, instruction) in &due {
                tx.execute(
                    "UPDATE watches SET status = 'expired', ended_at = ?2 WHERE id = ?1 AND status = 'active'",
                    params![id, now],
                )
                .map_err(q("expire watch"))?;
                let ev = DomainEvent {
                    key: "watch.expired".to_owned(),
                    kind: "watch.expired".to_owned(),
                    at: now,
                    data: json!({"watch_id": id, "source": source}),
                    previous: None,
                    current: None,
                    fallback_text: format!("Stopped watching ({source}): \"{instruction}\" expired."),
                };
                insert_event(tx, *id, &ev, &[], now)?;
            }
            Ok(due.len())
        })
    }

    /// Matches and stores the observed watches' events and new snapshots, each watch's
    /// atomically (a batch shares one transaction, so a crash keeps all or none of it).
    fn apply(
        &self,
        batch: &mut Vec<Observation>,
        now: i64,
        report: &mut PollReport,
    ) -> Result<(), WatchError> {
        if batch.is_empty() {
            return Ok(());
        }
        let (queued, completed) = self.db.write(|tx| {
            let (mut queued, mut completed) = (0, 0);
            for o in batch.iter() {
                // Participation is read only when there is something to match.
                let mut participated: HashSet<String> = if o.events.is_empty() {
                    HashSet::new()
                } else {
                    tx.prepare_cached(
                        "SELECT DISTINCT rule_id FROM watch_event_rules WHERE watch_id = ?1",
                    )
                    .and_then(|mut s| s.query_map([o.id], |r| r.get(0))?.collect::<Result<_, _>>())
                    .map_err(q("participation"))?
                };
                for ev in &o.events {
                    let matched: Vec<String> = o
                        .rules
                        .iter()
                        .filter(|r| matches(r, ev) && !(r.once && participated.contains(&r.id)))
                        .map(|r| r.id.clone())
                        .collect();
                    if matched.is_empty() {
                        continue;
                    }
                    // A granted action reads the state at its event: keep it with the event.
                    let granted =
                        o.rules.iter().any(|r| !r.grants.is_empty() && matched.contains(&r.id));
                    let with_state;
                    let ev = if granted && ev.current.is_none() {
                        with_state = DomainEvent { current: Some(o.current.clone()), ..ev.clone() };
                        &with_state
                    } else {
                        ev
                    };
                    if insert_event(tx, o.id, ev, &matched, now)? {
                        queued += 1;
                        participated.extend(matched);
                    }
                }
                // Events first, then the snapshot and (when terminal) the completion.
                let sql = if o.terminal {
                    "UPDATE watches SET snapshot = ?2, last_checked_at = ?3, last_error = NULL,
                        status = 'completed', ended_at = ?3 WHERE id = ?1 AND status = 'active'"
                } else {
                    "UPDATE watches SET snapshot = ?2, last_checked_at = ?3, last_error = NULL
                     WHERE id = ?1 AND status = 'active'"
                };
                tx.prepare_cached(sql)
                    .and_then(|mut s| s.execute(params![o.id, canonical_json(&o.current), now]))
                    .map_err(q("save snapshot"))?;
                completed += usize::from(o.terminal);
            }
            Ok::<_, WatchError>((queued, completed))
        })?;
        report.queued += queued;
        report.completed += completed;
        batch.clear();
        Ok(())
    }

    /// A page of events, oldest first.
    pub fn events(&self, query: &WatchEventQuery) -> Result<Vec<QueuedEvent>, WatchError> {
        let limit = page(query.limit)?;
        self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM watch_events
                 WHERE (?1 = 0 OR status = 'pending') AND (?2 IS NULL OR watch_id = ?2)
                 ORDER BY id LIMIT ?3 OFFSET ?4"
            ))
            .and_then(|mut s| {
                s.query_map(
                    params![query.pending, query.watch_id, limit, offset(query.offset)],
                    event_row,
                )?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(q("list events"))
        })
    }

    /// Events queued after id `after`, oldest first (the protocol feed; 1..=100).
    pub fn events_after(&self, after: i64, limit: usize) -> Result<Vec<QueuedEvent>, WatchError> {
        let limit = page(Some(limit))?;
        self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM watch_events WHERE id > ?1 ORDER BY id LIMIT ?2"
            ))
            .and_then(|mut s| {
                s.query_map(params![after, limit], event_row)?.collect::<Result<Vec<_>, _>>()
            })
            .map_err(q("event feed"))
        })
    }

    /// Counts for a status screen: active watches, those whose source failed at their last
    /// check, events still to deliver and events given up.
    pub fn health(&self) -> Result<WatchHealth, WatchError> {
        self.db.read(|c| {
            c.query_row(
                "SELECT (SELECT count(*) FROM watches WHERE status = 'active'),
                        (SELECT count(*) FROM watches WHERE status = 'active'
                           AND last_error IS NOT NULL),
                        (SELECT count(*) FROM watch_events WHERE status = 'pending'),
                        (SELECT count(*) FROM watch_events WHERE status = 'failed'),
                        (SELECT max(last_checked_at) FROM watches)",
                [],
                |r| {
                    Ok(WatchHealth {
                        active: r.get(0)?,
                        failing: r.get(1)?,
                        pending_events: r.get(2)?,
                        failed_events: r.get(3)?,
                        last_checked_at: r.get(4)?,
                    })
                },
            )
            .map_err(q("watch health"))
        })
    }

    /// The id of the newest queued event (0 when there is none).
    pub fn feed_position(&self) -> Result<i64, WatchError> {
        self.db.read(|c| {
            c.query_row("SELECT coalesce(max(id), 0) FROM watch_events", [], |r| r.get(0))
                .map_err(q("event feed position"))
        })
    }

    /// Delivers up to `limit` (≤ [`MAX_DELIVERY_BATCH`]) pending events, oldest first and in
    /// order: a busy channel or a failed attempt ends the pass, and the rest wait behind it
    /// (an event given up after [`MAX_DELIVERY_ATTEMPTS`] no longer blocks).
    pub fn deliver(
        &self,
        delivery: &dyn Delivery,
        limit: usize,
        now: i64,
    ) -> Result<DeliveryReport, WatchError> {
        let limit = limit.clamp(1, MAX_DELIVERY_BATCH);
        let pending = self.events(&WatchEventQuery {
            pending: true,
            limit: Some(limit),
            ..WatchEventQuery::default()
        })?;
        let mut report = DeliveryReport::default();
        // Texts first, for the whole batch, stored in one transaction before anything is
        // sent: a retry sends the same text and never composes again.
        let mut ready: Vec<(QueuedEvent, String)> = Vec::with_capacity(pending.len());
        let mut fresh: Vec<(i64, String)> = Vec::new();
        for ev in pending {
            let text = match &ev.notification {
                Some(t) => t.clone(),
                None if ev.attempts >= COMPOSE_ATTEMPTS => ev.event.fallback_text.clone(),
                None => match delivery.compose(&ev) {
                    Ok(t) => t,
                    Err(e) => {
                        report.failed += 1;
                        if self.fail(&ev, &e, now)? {
                            report.abandoned += 1;
                            continue;
                        }
                        break;
                    }
                },
            };
            if ev.notification.is_none() {
                fresh.push((ev.id, text.clone()));
            }
            ready.push((ev, text));
        }
        self.store_texts(&fresh)?;
        for (ev, text) in ready {
            match delivery.send(&ev, &text) {
                Ok(()) => {
                    self.db.write(|tx| {
                        let changed = tx
                            .execute(
                                "UPDATE watch_events SET status = 'delivered', delivered_at = ?2
                                 WHERE id = ?1 AND status = 'pending'",
                                params![ev.id, now],
                            )
                            .map_err(q("delivered"))?;
                        record_outcome(tx, changed, &ev, DeliveryResult::Delivered, now)
                    })?;
                    report.delivered += 1;
                }
                // Later events wait behind this one, so the person hears them in order.
                Err(DeliveryError::Busy) => {
                    report.busy += 1;
                    break;
                }
                Err(DeliveryError::Failed(e)) => {
                    report.failed += 1;
                    if self.fail(&ev, &e, now)? {
                        report.abandoned += 1;
                        continue;
                    }
                    break;
                }
            }
        }
        Ok(report)
    }

    fn store_texts(&self, texts: &[(i64, String)]) -> Result<(), WatchError> {
        if texts.is_empty() {
            return Ok(());
        }
        self.db.write(|tx| {
            for (id, text) in texts {
                tx.execute(
                    "UPDATE watch_events SET notification = ?2 WHERE id = ?1 AND notification IS NULL",
                    params![id, text],
                )
                .map_err(q("store notification"))?;
            }
            Ok(())
        })
    }

    /// Counts a failed attempt; true when the event is given up.
    fn fail(&self, ev: &QueuedEvent, error: &str, now: i64) -> Result<bool, WatchError> {
        let error: String = error.chars().take(500).collect();
        let give_up = ev.attempts + 1 >= MAX_DELIVERY_ATTEMPTS;
        self.db.write(|tx| {
            let changed = tx
                .execute(
                    "UPDATE watch_events SET attempts = attempts + 1, last_error = ?2,
                        last_error_at = ?3, status = CASE WHEN ?4 THEN 'failed' ELSE status END
                     WHERE id = ?1 AND status = 'pending'",
                    params![ev.id, error, now, give_up],
                )
                .map_err(q("delivery failure"))?;
            if give_up {
                record_outcome(tx, changed, ev, DeliveryResult::Failed, now)
            } else {
                Ok(())
            }
        })?;
        Ok(give_up)
    }

    /// The authority behind an event: the event, its watch, the rules it matched and the
    /// context grants read.
    fn event_authority(
        &self,
        event_id: i64,
    ) -> Result<(QueuedEvent, WatchSummary, GrantContext), WatchError> {
        let ev = self
            .db
            .read(|c| {
                c.prepare_cached(&format!("SELECT {EVENT_COLUMNS} FROM watch_events WHERE id = ?1"))
                    .and_then(|mut s| s.query_row([event_id], event_row).optional())
                    .map_err(q("get event"))
            })?
            .ok_or(WatchError::NotFound { what: "event", id: event_id })?;
        let watch = self.get(ev.watch_id)?;
        let stored: Option<GrantContext> = self
            .db
            .read(|c| {
                c.query_row("SELECT context FROM watches WHERE id = ?1", [ev.watch_id], |r| {
                    r.get::<_, Option<String>>(0)
                })
                .map_err(q("watch context"))
            })?
            .map(|t| serde_json::from_str(&t))
            .transpose()
            .map_err(|e| WatchError::Corrupt(format!("watch context: {e}")))?;
        let ctx = stored.unwrap_or_else(|| GrantContext {
            state: ev.event.current.clone().unwrap_or_else(|| watch.snapshot.clone()),
            event: ev.event.data.clone(),
        });
        Ok((ev, watch, ctx))
    }

    /// The granted actions an event makes available: the union of the grants of the rules it
    /// matched, nothing else.
    pub fn granted_actions(&self, event_id: i64) -> Result<Vec<GrantedAction>, WatchError> {
        let (ev, watch, ctx) = self.event_authority(event_id)?;
        if watch.approval_id.is_none() {
            return Ok(Vec::new());
        }
        let claimed: HashSet<String> =
            self.action_runs(event_id)?.into_iter().map(|r| r.action_key).collect();
        let mut out = Vec::new();
        for rule in watch.rules.iter().filter(|r| ev.matched_rules.contains(&r.id)) {
            for g in &rule.grants {
                let (arguments, open_fields, unavailable) = match determined_arguments(g, &ctx) {
                    Ok((args, open)) => (Value::Object(args), open, None),
                    Err(e) => (json!({}), Vec::new(), Some(e)),
                };
                out.push(GrantedAction {
                    event_id,
                    rule_id: rule.id.clone(),
                    tool: g.tool.clone(),
                    arguments,
                    open_fields,
                    unavailable,
                    claimed: claimed.contains(&format!("{event_id}:{}:{}", rule.id, g.tool)),
                });
            }
        }
        Ok(out)
    }

    /// The second guard and the claim: `tool` must be granted by a rule this event matched,
    /// every argument must meet its constraint (extra fields denied), the grant's invocations
    /// must not be used up, and no claim may exist for `<event>:<rule>:<tool>`. The claim is
    /// durable before this returns; run the action only after it.
    pub fn claim_action(
        &self,
        event_id: i64,
        rule_id: &str,
        tool: &str,
        arguments: &Value,
        now: i64,
    ) -> Result<ActionClaim, WatchError> {
        let (ev, watch, ctx) = self.event_authority(event_id)?;
        let deny = |m: String| Err(WatchError::GrantDenied(m));
        if watch.approval_id.is_none() {
            return deny(format!("watch {} has no approved grants", watch.id));
        }
        if !ev.matched_rules.iter().any(|r| r == rule_id) {
            return deny(format!("rule {rule_id} did not match event {event_id}"));
        }
        let Some(grant) = watch
            .rules
            .iter()
            .find(|r| r.id == rule_id)
            .and_then(|r| r.grants.iter().find(|g| g.tool == tool))
        else {
            return deny(format!("rule {rule_id} does not grant {tool}"));
        };
        let Some(cap) = self.caps.get(tool) else {
            return deny(format!("{tool} is not a registered capability"));
        };
        let checked =
            guard_arguments(grant, cap, arguments, &ctx).map_err(WatchError::GrantDenied)?;
        let limit = i64::from(
            grant.max_invocations.unwrap_or(cap.max_invocations).min(cap.max_invocations),
        );
        let key = format!("{event_id}:{rule_id}:{tool}");
        let args_json = canonical_json(&checked);
        let run_id = self.db.write(|tx| {
            let exists: bool = tx
                .query_row("SELECT 1 FROM watch_action_runs WHERE action_key = ?1", [&key], |_| Ok(()))
                .optional()
                .map_err(q("find claim"))?
                .is_some();
            if exists {
                return Err(WatchError::AlreadyClaimed(key.clone()));
            }
            let used: i64 = tx
                .query_row(
                    "SELECT count(*) FROM watch_action_runs WHERE watch_id = ?1 AND rule_id = ?2 AND tool = ?3",
                    params![watch.id, rule_id, tool],
                    |r| r.get(0),
                )
                .map_err(q("count invocations"))?;
            if used >= limit {
                return Err(WatchError::GrantDenied(format!(
                    "{tool} of rule {rule_id} was already used {used} of {limit} time(s)"
                )));
            }
            tx.execute(
                "INSERT INTO watch_action_runs (action_key, event_id, rule_id, tool, status,
                    started_at, watch_id, arguments)
                 VALUES (?1, ?2, ?3, ?4, 'claimed', ?5, ?6, ?7)",
                params![key, event_id, rule_id, tool, now, watch.id, args_json],
            )
            .map_err(q("claim action"))?;
            Ok(tx.last_insert_rowid())
        })?;
        Ok(ActionClaim { run_id, action_key: key, arguments: checked })
    }

    /// Records how a claimed action ended (once; a second report is `WATCH_ACTION_CLAIMED`).
    /// When the rule's continuation names this outcome and attempts remain, a child `time`
    /// watch is created in the same transaction, with exactly the parent's rule, grants and
    /// event context.
    pub fn finish_action(
        &self,
        run_id: i64,
        result: &ActionResult,
        now: i64,
    ) -> Result<ActionRun, WatchError> {
        let run = self.action_run(run_id)?;
        if run.status != ActionRunStatus::Claimed {
            return Err(WatchError::AlreadyClaimed(format!("{} (finished)", run.action_key)));
        }
        let clip = |s: &Option<String>, n: usize| {
            s.as_ref().map(|t| t.chars().take(n).collect::<String>())
        };
        let (outcome, error) = (clip(&result.outcome, 64), clip(&result.error, 500));
        // The outcome is recorded even when no follow-up can be scheduled (no `time` source).
        let child = match self.continuation_child(&run, outcome.as_deref(), now) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(run = run_id, error = %e, "the continuation could not be scheduled");
                None
            }
        };
        self.db.write(|tx| {
            let changed = tx
                .execute(
                    "UPDATE watch_action_runs SET status = ?2, finished_at = ?3, outcome = ?4, error = ?5
                     WHERE id = ?1 AND status = 'claimed'",
                    params![run_id, result.status.as_str(), now, outcome, error],
                )
                .map_err(q("finish action"))?;
            if changed == 0 {
                return Err(WatchError::AlreadyClaimed(format!("{} (finished)", run.action_key)));
            }
            if let Some((def, origin, snapshot, expires_at)) = &child {
                let id = insert_watch(tx, def, origin, snapshot, *expires_at, now)?;
                tx.execute(
                    "UPDATE watch_action_runs SET child_watch_id = ?2 WHERE id = ?1",
                    params![run_id, id],
                )
                .map_err(q("record child watch"))?;
            }
            Ok(())
        })?;
        self.action_run(run_id)
    }

    /// The child watch a continuation schedules for this outcome, if any.
    #[allow(clippy::type_complexity)]
    fn continuation_child(
        &self,
        run: &ActionRun,
        outcome: Option<&str>,
        now: i64,
    ) -> Result<Option<(WatchDefinition, Origin, Value, i64)>, WatchError> {
        let (_, watch, ctx) = self.event_authority(run.event_id)?;
        let Some(rule) = watch.rules.iter().find(|r| r.id == run.rule_id) else { return Ok(None) };
        let Some(c) = &rule.continuation else { return Ok(None) };
        let Some(outcome) = outcome else { return Ok(None) };
        if !c.outcomes.iter().any(|o| o == outcome) || watch.attempt >= i64::from(c.max_attempts) {
            return Ok(None);
        }
        let at = now + c.after_minutes * 60;
        let def = WatchDefinition {
            source: "time".to_owned(),
            resource_ref: rfc3339(at),
            rules: vec![WatchRule {
                id: rule.id.clone(),
                event: Some("time.reached".to_owned()),
                trigger: None,
                filter: BTreeMap::new(),
                once: true,
                grants: rule.grants.clone(),
                continuation: rule.continuation.clone(),
            }],
            instruction: watch.instruction.clone(),
            chat: watch.chat.clone(),
            expires_at: None,
        };
        let adapter = self.adapter("time")?;
        let snapshot = adapter.snapshot(&def.resource_ref, now).map_err(|e| {
            WatchError::SourceUnavailable { source_name: "time".to_owned(), reason: e.0 }
        })?;
        let expires_at = adapter.default_expiry(&snapshot, now).max(at + 60);
        let origin = Origin {
            approval_id: watch.approval_id,
            parent_id: Some(watch.id),
            attempt: Some(watch.attempt + 1),
            context: Some(ctx),
        };
        Ok(Some((def, origin, snapshot, expires_at)))
    }

    /// For each granted action of this event whose arguments its constraints fix entirely:
    /// claim, run through `executor`, record. Claimed ones are never run again; one whose
    /// guard refuses is skipped with the reason.
    pub fn run_granted(
        &self,
        event_id: i64,
        executor: &dyn ActionExecutor,
        now: i64,
    ) -> Result<GrantedRunReport, WatchError> {
        let mut report = GrantedRunReport::default();
        for a in self.granted_actions(event_id)? {
            let label = format!("{}:{}", a.rule_id, a.tool);
            if a.claimed {
                report.skipped.push(format!("{label}: already claimed"));
                continue;
            }
            if let Some(why) = &a.unavailable {
                report.skipped.push(format!("{label}: {why}"));
                continue;
            }
            if !a.open_fields.is_empty() {
                report.skipped.push(format!("{label}: {} to choose", a.open_fields.join(", ")));
                continue;
            }
            let claim = match self.claim_action(event_id, &a.rule_id, &a.tool, &a.arguments, now) {
                Ok(c) => c,
                Err(e @ (WatchError::GrantDenied(_) | WatchError::AlreadyClaimed(_))) => {
                    report.skipped.push(format!("{label}: {e}"));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let result = executor.execute_claimed(&claim.action_key, &a.tool, &claim.arguments);
            report.ran.push(self.finish_action(claim.run_id, &result, now)?);
        }
        Ok(report)
    }

    /// One action run.
    pub fn action_run(&self, run_id: i64) -> Result<ActionRun, WatchError> {
        self.db
            .read(|c| {
                c.prepare_cached(&format!(
                    "SELECT {RUN_COLUMNS} FROM watch_action_runs WHERE id = ?1"
                ))
                .and_then(|mut s| s.query_row([run_id], run_row).optional())
                .map_err(q("get action run"))
            })?
            .ok_or(WatchError::NotFound { what: "action run", id: run_id })
    }

    /// The action runs of an event, in order.
    pub fn action_runs(&self, event_id: i64) -> Result<Vec<ActionRun>, WatchError> {
        self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM watch_action_runs WHERE event_id = ?1 ORDER BY id LIMIT 100"
            ))
            .and_then(|mut s| s.query_map([event_id], run_row)?.collect::<Result<Vec<_>, _>>())
            .map_err(q("action runs"))
        })
    }

    /// Up to `limit` delivery outcomes after position `after`, in order.
    pub fn deliveries_after(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<DeliveryOutcome>, WatchError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.db.read(|c| {
            c.prepare_cached(
                "SELECT d.seq, d.event_id, d.watch_id, d.outcome, d.at, e.notification
                 FROM watch_deliveries d JOIN watch_events e ON e.id = d.event_id
                 WHERE d.seq > ?1 ORDER BY d.seq LIMIT ?2",
            )
            .and_then(|mut s| {
                s.query_map(params![after, limit], |r| {
                    Ok(DeliveryOutcome {
                        seq: r.get(0)?,
                        event_id: r.get(1)?,
                        watch_id: r.get(2)?,
                        outcome: r.get(3)?,
                        at: r.get(4)?,
                        text: r.get(5)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(q("delivery feed"))
        })
    }

    /// The position of the newest delivery outcome (0 when there is none).
    pub fn delivery_position(&self) -> Result<i64, WatchError> {
        self.db.read(|c| {
            c.query_row("SELECT coalesce(max(seq), 0) FROM watch_deliveries", [], |r| r.get(0))
                .map_err(q("delivery feed position"))
        })
    }
}

/// Appends an outcome to the delivery feed when the status update took (`changed` rows).
fn record_outcome(
    tx: &rusqlite::Transaction<'_>,
    changed: usize,
    ev: &QueuedEvent,
    outcome: DeliveryResult,
    now: i64,
) -> Result<(), WatchError> {
    if changed == 0 {
        return Ok(());
    }
    tx.execute(
        "INSERT INTO watch_deliveries (event_id, watch_id, outcome, at) VALUES (?1, ?2, ?3, ?4)",
        params![ev.id, ev.watch_id, outcome, now],
    )
    .map(drop)
    .map_err(q("record delivery outcome"))
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

/// Exact type and every `where` filter deep-equal on its dot path.
fn matches(rule: &WatchRule, ev: &DomainEvent) -> bool {
    let kind_ok = match (&rule.event, &rule.trigger) {
        (Some(e), _) => *e == ev.kind,
        (None, Some(_)) => ev.data.get("rule").and_then(Value::as_str) == Some(rule.id.as_str()),
        (None, None) => false,
    };
    kind_ok && rule.filter.iter().all(|(path, want)| at_path(&ev.data, path) == Some(want))
}

/// The events of the rules' temporal triggers at `now` against `current`.
fn temporal_events(rules: &[WatchRule], current: &Value, now: i64) -> Vec<DomainEvent> {
    let mut out = Vec::new();
    for r in rules {
        match &r.trigger {
            Some(Trigger::TimeReached { at: Some(at), .. }) => {
                if let Ok(when) = parse_date(at)
                    && now >= when
                {
                    out.push(DomainEvent {
                        key: format!("rule:{}:time.reached:{when}", r.id),
                        kind: "time.reached".to_owned(),
                        at: now,
                        data: json!({"rule": r.id, "at": at}),
                        previous: None,
                        current: None,
                        fallback_text: format!("It is {at}."),
                    });
                }
            }
            Some(Trigger::BeforeTime { field, minutes }) => {
                let Some(deadline) = at_path(current, field).and_then(timestamp) else { continue };
                let fire_at = deadline - minutes * 60;
                // The window: from fire_at, for RELATIVE_GRACE_SECS, and never after the
                // deadline itself. A window that passed while nobody polled is skipped.
                if now >= fire_at
                    && now < (fire_at + RELATIVE_GRACE_SECS).min(deadline.max(fire_at + 1))
                {
                    out.push(DomainEvent {
                        key: format!("rule:{}:before_time", r.id),
                        kind: "time.before".to_owned(),
                        at: now,
                        data: json!({"rule": r.id, "field": field, "minutes": minutes, "deadline": rfc3339(deadline)}),
                        previous: None,
                        current: Some(current.clone()),
                        fallback_text: format!("{minutes} minutes before {}.", rfc3339(deadline)),
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// Inserts an event unless its key exists; true when inserted.
fn insert_event(
    tx: &rusqlite::Transaction<'_>,
    watch_id: i64,
    ev: &DomainEvent,
    rules: &[String],
    now: i64,
) -> Result<bool, WatchError> {
    let key = format!("{watch_id}:{}", ev.key);
    let (rules_json, event_json) = (to_json(&rules), to_json(ev));
    let inserted = tx
        .execute(
            "INSERT OR IGNORE INTO watch_events (event_key, watch_id, event_type, matched_rules, event,
                status, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6)",
            params![key, watch_id, ev.kind, rules_json, event_json, now],
        )
        .map_err(q("queue event"))?;
    if inserted == 0 {
        return Ok(false);
    }
    let event_id = tx.last_insert_rowid();
    for rule in rules {
        tx.execute(
            "INSERT OR IGNORE INTO watch_event_rules (event_id, watch_id, rule_id) VALUES (?1, ?2, ?3)",
            params![event_id, watch_id, rule],
        )
        .map_err(q("participation"))?;
    }
    Ok(true)
}

/// Where a watch's authority comes from.
#[derive(Debug, Default)]
struct Origin {
    approval_id: Option<i64>,
    parent_id: Option<i64>,
    attempt: Option<i64>,
    context: Option<GrantContext>,
}

/// Stores a prepared watch (the active-watch limit checked in the same transaction).
fn insert_watch(
    tx: &rusqlite::Transaction<'_>,
    def: &WatchDefinition,
    origin: &Origin,
    snapshot: &Value,
    expires_at: i64,
    now: i64,
) -> Result<i64, WatchError> {
    let active: i64 = tx
        .query_row("SELECT count(*) FROM watches WHERE status = 'active'", [], |r| r.get(0))
        .map_err(q("count watches"))?;
    if active >= MAX_ACTIVE_WATCHES {
        return Err(WatchError::TooMany);
    }
    tx.execute(
        "INSERT INTO watches (source, resource_ref, rules, instruction, chat, status,
            snapshot, created_at, expires_at, last_checked_at, approval_id, parent_id, attempt,
            context)
         VALUES (?1, ?2, ?3, ?4, ?5, 'active', ?6, ?7, ?8, ?7, ?9, ?10, ?11, ?12)",
        params![
            def.source,
            def.resource_ref,
            to_json(&def.rules),
            def.instruction,
            def.chat,
            canonical_json(snapshot),
            now,
            expires_at,
            origin.approval_id,
            origin.parent_id,
            origin.attempt.unwrap_or(1),
            origin.context.as_ref().map(to_json),
        ],
    )
    .map_err(q("create watch"))?;
    Ok(tx.last_insert_rowid())
}

fn to_json<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned())
}

const WATCH_COLUMNS: &str = "id, source, resource_ref, rules, instruction, chat, status, snapshot,
    created_at, expires_at, last_checked_at, last_error, approval_id, parent_id, attempt";

fn watch_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<WatchSummary> {
    Ok(WatchSummary {
        id: r.get(0)?,
        source: r.get(1)?,
        resource_ref: r.get(2)?,
        rules: json_column(r, 3)?,
        instruction: r.get(4)?,
        chat: r.get(5)?,
        status: r.get(6)?,
        snapshot: json_column(r, 7)?,
        created_at: r.get(8)?,
        expires_at: r.get(9)?,
        last_checked_at: r.get(10)?,
        last_error: r.get(11)?,
        approval_id: r.get(12)?,
        parent_id: r.get(13)?,
        attempt: r.get(14)?,
    })
}

const RUN_COLUMNS: &str = "id, action_key, coalesce(watch_id, 0), event_id, rule_id, tool, status,
    coalesce(arguments, '{}'), outcome, error, started_at, finished_at, child_watch_id";

fn run_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ActionRun> {
    Ok(ActionRun {
        id: r.get(0)?,
        action_key: r.get(1)?,
        watch_id: r.get(2)?,
        event_id: r.get(3)?,
        rule_id: r.get(4)?,
        tool: r.get(5)?,
        status: r.get(6)?,
        arguments: json_column(r, 7)?,
        outcome: r.get(8)?,
        error: r.get(9)?,
        started_at: r.get(10)?,
        finished_at: r.get(11)?,
        child_watch_id: r.get(12)?,
    })
}

const EVENT_COLUMNS: &str = "id, watch_id, event_key, matched_rules, event, status, notification,
    attempts, created_at, delivered_at, last_error";

fn event_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<QueuedEvent> {
    Ok(QueuedEvent {
        id: r.get(0)?,
        watch_id: r.get(1)?,
        event_key: r.get(2)?,
        matched_rules: json_column(r, 3)?,
        event: json_column(r, 4)?,
        status: r.get(5)?,
        notification: r.get(6)?,
        attempts: r.get(7)?,
        created_at: r.get(8)?,
        delivered_at: r.get(9)?,
        last_error: r.get(10)?,
    })
}
