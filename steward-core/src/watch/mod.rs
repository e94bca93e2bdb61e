//! Durable watches (`watches.db`, WAL): a person asks once; every transition of the watched
//! resource is noticed exactly once, across restarts and flaky sources.
//!
//! Owns: definitions (rules, the person's instruction, expiry), the last observed snapshot, the
//! queue of matched events and rule participation. Never does: talk to a source itself (an
//! [`WatchAdapter`] does), compose or send a notification (a [`Delivery`] does), or run an
//! action (an [`ActionExecutor`] does, after the engine's guard and claim).
//!
//! Grants ([`Grant`]): a rule's pre-approved capabilities from the [`CapabilityRegistry`], each
//! argument constrained. A definition with grants is created only from a person's approval
//! ([`Watches::create_approved`], reached through `Steward::request_agent_watch`). At an event,
//! [`Watches::granted_actions`] offers only the matched rules' grants; [`Watches::claim_action`]
//! is the second guard (every argument against its constraint, extra fields denied, invocation
//! limit) and writes the durable claim `<event id>:<rule id>:<tool>` before anything runs — a
//! claim is not proof of effect, [`Watches::finish_action`] records the outcome, and a matching
//! continuation outcome schedules a child `time` watch with exactly the parent's grants and
//! event context, up to its `max_attempts`.
//!
//! Lifecycle: `active → stopped | expired | completed`; nothing leaves a final state.
//!
//! Poll ([`Watches::poll`]): expire due watches (each expiry is a `watch.expired` event) → each
//! active watch in creation order: snapshot → the adapter's events plus the rules' temporal
//! triggers → match (exact type, `where` deep equality on dot paths, `once` against recorded
//! participation) → one transaction: `INSERT OR IGNORE` each matched event by
//! `<watch id>:<event key>` with its participation rows, then the new snapshot (and
//! `completed` when terminal — events first, so a final arrival is never lost). A source failure
//! records `last_error` and keeps the previous snapshot.
//!
//! Missed windows: an absolute `time_reached` fires at the first poll at or after its instant
//! (also after a restart) while the watch has not expired. A relative `before_time` fires only
//! inside `[deadline − minutes, deadline − minutes + RELATIVE_GRACE_SECS)` and before the
//! deadline itself: a window that passed while the host was down is skipped, never sent stale.

mod grants;
mod model;
mod store;

pub use grants::{
    Capability, CapabilityRegistry, Constraint, Constraints, Continuation, Grant, GrantContext,
    GrantFields, MAX_CONSTRAINED_FIELDS, MAX_CONTINUATION_ATTEMPTS, MAX_CONTINUATION_MINUTES,
    MAX_CONTINUATION_OUTCOMES, MAX_EXACT_BYTES, MAX_GRANTS_PER_RULE, MAX_ONE_OF,
    MAX_RELATIVE_MINUTES, MAX_TEMPLATE_CHARS, MAX_VALUE_ITEMS, describe_grants,
};
pub use model::{
    DomainEvent, SourceError, Trigger, WatchAdapter, WatchDefinition, WatchRule, at_path,
};
pub use store::{
    ActionClaim, ActionExecutor, ActionResult, ActionRun, ActionRunStatus, ActionStatus, Delivery,
    DeliveryError, DeliveryOutcome, DeliveryReport, DeliveryResult, EventStatus, GrantedAction,
    GrantedRunReport, PollBudget, PollReport, QueuedEvent, WatchEventQuery, WatchHealth,
    WatchQuery, WatchStatus, WatchSummary, Watches,
};

use crate::{ErrorKind, StewardError, store::StoreError};

/// Default seconds between polls.
/// Default of `[jobs.watch-poll] interval_secs`.
pub const DEFAULT_POLL_SECS: u64 = 45;
/// The shortest interval without an adapter's urgency hint.
/// Fixed (not a setting).
pub const MIN_POLL_SECS: u64 = 15;
/// The shortest interval an adapter's urgency hint can ask for.
/// Fixed (not a setting).
pub const MIN_URGENT_POLL_SECS: u64 = 5;
/// Rules per watch.
/// Fixed (not a setting).
pub const MAX_RULES: usize = 16;
/// `where` filters per rule.
/// Fixed (not a setting).
pub const MAX_FILTERS: usize = 8;
/// Active watches at once.
/// Fixed (not a setting).
pub const MAX_ACTIVE_WATCHES: i64 = 10_000;
/// Events delivered per batch.
/// Fixed (not a setting).
pub const MAX_DELIVERY_BATCH: usize = 20;
/// Failed composition attempts after which the event's `fallback_text` is used.
/// Fixed (not a setting).
pub const COMPOSE_ATTEMPTS: i64 = 2;
/// Failed attempts after which an event is marked failed instead of retried.
/// Fixed (not a setting).
pub const MAX_DELIVERY_ATTEMPTS: i64 = 10;
/// How late a relative (`before_time`) window may still fire, seconds.
/// Fixed (not a setting).
pub const RELATIVE_GRACE_SECS: i64 = 300;
/// Longest instruction kept.
/// Fixed (not a setting).
pub const MAX_INSTRUCTION_CHARS: usize = 2_000;
/// Longest resource reference.
/// Fixed (not a setting).
pub const MAX_REF_CHARS: usize = 1_024;
/// A page of watches or events.
/// Fixed (not a setting).
pub const MAX_WATCH_PAGE: usize = 100;

/// Errors of watches.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError {
    /// A definition that cannot be a watch.
    #[error("invalid watch: {0}")]
    Invalid(String),
    /// No adapter for the source.
    #[error("no watch source named {0:?}")]
    UnknownSource(String),
    /// The adapter refused the resource.
    #[error("the {source_name} source refused the resource: {reason}")]
    BadResource {
        /// The source.
        source_name: String,
        /// Why.
        reason: String,
    },
    /// The source failed while the watch was being created (nothing was stored).
    #[error("the {source_name} source is unavailable: {reason}")]
    SourceUnavailable {
        /// The source.
        source_name: String,
        /// Why.
        reason: String,
    },
    /// A definition with grants, which only a person's approval can create.
    #[error("rule {0} grants future actions: the watch needs a person's approval first")]
    NeedsApproval(String),
    /// The second guard refused a granted action (nothing ran).
    #[error("not granted: {0}")]
    GrantDenied(String),
    /// The action was already claimed for this event, rule and tool (it never runs twice).
    #[error("action {0} was already claimed")]
    AlreadyClaimed(String),
    /// The approval behind a watch with grants.
    #[error(transparent)]
    Approval(Box<crate::approval::ApprovalError>),
    /// Too many active watches.
    #[error("at most {MAX_ACTIVE_WATCHES} active watches")]
    TooMany,
    /// No watch or event has this id.
    #[error("{what} {id} not found")]
    NotFound {
        /// `watch`, `event` or `action run`.
        what: &'static str,
        /// The id.
        id: i64,
    },
    /// A stored row that no longer parses.
    #[error("watches.db is damaged: {0}")]
    Corrupt(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::state::UnknownState> for WatchError {
    fn from(e: crate::state::UnknownState) -> Self {
        Self::Invalid(e.to_string())
    }
}

impl StewardError for WatchError {
    fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "WATCH_INVALID",
            Self::UnknownSource(_) => "WATCH_UNKNOWN_SOURCE",
            Self::BadResource { .. } => "WATCH_BAD_RESOURCE",
            Self::SourceUnavailable { .. } => "WATCH_SOURCE_UNAVAILABLE",
            Self::NeedsApproval(_) => "WATCH_NEEDS_APPROVAL",
            Self::GrantDenied(_) => "WATCH_GRANT_DENIED",
            Self::AlreadyClaimed(_) => "WATCH_ACTION_CLAIMED",
            Self::Approval(e) => e.code(),
            Self::TooMany => "WATCH_LIMIT",
            Self::NotFound { .. } => "WATCH_NOT_FOUND",
            Self::Corrupt(_) => "WATCH_CORRUPT",
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Invalid(_)
            | Self::UnknownSource(_)
            | Self::BadResource { .. }
            | Self::NeedsApproval(_) => ErrorKind::InvalidInput,
            Self::GrantDenied(_) => ErrorKind::Denied,
            Self::AlreadyClaimed(_) => ErrorKind::Conflict,
            Self::Approval(e) => e.kind(),
            Self::SourceUnavailable { .. } => ErrorKind::Unavailable,
            Self::TooMany => ErrorKind::Conflict,
            Self::NotFound { .. } => ErrorKind::NotFound,
            Self::Corrupt(_) => ErrorKind::Corrupt,
            Self::Store(e) => e.kind(),
        }
    }
}

#[cfg(test)]
mod tests;
