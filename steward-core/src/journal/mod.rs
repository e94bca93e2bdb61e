//! The write journal (`ops.db`): journal before execute. Approval answers "may this be
//! attempted?"; the journal records that it was, what the backend said, and later the evidence
//! that the effect is real — and makes sure nothing is ever attempted twice by accident.
//!
//! Owns: operations with their complete executable input (sensitive: the file is mode 0600;
//! the audit copy is the redacted one), idempotency keys, typed state transitions, the atomic
//! claim of due scheduled rows, confirmation attempts. Never does: call a backend, resend,
//! delete or rebuild `ops.db` (damage stops the journal with `JOURNAL_CORRUPT`).
//!
//! States (`steward-design.txt`, "Journal, Confirmation And Retry"):
//! `scheduled → started → backend_returned | unknown | failed`, then `confirmed`, or after
//! [`CONFIRMATION_LIMIT`] checks `needs_review` (mail) / `retry_exhausted` (calendar). A
//! `started` row whose caller crashed goes to confirmation too. Nothing ever goes back to
//! `scheduled` or `started`: there is no path that resends.

use std::path::{Path, PathBuf};

use rusqlite::{OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    Limits,
    approval::{canonical_json, input_sha256},
    audit::{AuditEvent, AuditLog, Risk},
    error::{ErrorKind, StewardError},
    store::{Database, Migration, OpenOptions, Schema, StoreError},
};

/// Confirmation checks before an unconfirmed operation goes to review.
/// Fixed (not a setting).
pub const CONFIRMATION_LIMIT: i64 = 12;
/// Most operations one page lists or one claim takes.
/// Fixed (not a setting).
pub const MAX_OPS_PAGE: usize = 100;
/// Longest idempotency key.
/// Fixed (not a setting).
pub const MAX_IDEMPOTENCY_KEY: usize = 200;

const SCHEMA: Schema = Schema {
    name: "ops",
    migrations: &[Migration {
        version: 1,
        name: "operations",
        sql: include_str!("../../migrations/ops/001_operations.sql"),
    }],
};

/// Where an operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OpState {
    /// Waiting for its time (scheduled send).
    Scheduled,
    /// Claimed; the backend is (about to be) called.
    Started,
    /// The backend returned; not yet observed.
    BackendReturned,
    /// The outcome is unknown (a timeout after DATA, a reset): only evidence can tell.
    Unknown,
    /// The backend refused before anything could have happened.
    Failed,
    /// Observed in the mirror or index.
    Confirmed,
    /// Mail not confirmed after the limit: a person looks; a new send needs a new request.
    NeedsReview,
    /// Calendar not confirmed after the limit.
    RetryExhausted,
}

const STATES: [OpState; 8] = [
    OpState::Scheduled,
    OpState::Started,
    OpState::BackendReturned,
    OpState::Unknown,
    OpState::Failed,
    OpState::Confirmed,
    OpState::NeedsReview,
    OpState::RetryExhausted,
];

impl std::str::FromStr for OpState {
    type Err = JournalError;

    /// Parses a stored name; anything else is `JOURNAL_INVALID`.
    fn from_str(s: &str) -> Result<Self, JournalError> {
        Self::parse(s).ok_or_else(|| JournalError::Invalid(format!("unknown state {s:?}")))
    }
}

impl OpState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::Started => "started",
            Self::BackendReturned => "backend_returned",
            Self::Unknown => "unknown",
            Self::Failed => "failed",
            Self::Confirmed => "confirmed",
            Self::NeedsReview => "needs_review",
            Self::RetryExhausted => "retry_exhausted",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        STATES.into_iter().find(|x| x.as_str() == s)
    }

    /// Whether `self → to` is a legal transition. The whole table: there is no edge back to
    /// `scheduled` or `started`, so no transition can cause a second attempt.
    pub fn can_become(self, to: Self) -> bool {
        use OpState::*;
        matches!(
            (self, to),
            (Scheduled, Started)
                | (Started, BackendReturned | Unknown | Failed)
                | (
                    Started | BackendReturned | Unknown | Failed,
                    Confirmed | NeedsReview | RetryExhausted
                )
        )
    }

    /// No further transition.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Confirmed | Self::NeedsReview | Self::RetryExhausted)
    }
}

/// The family of an operation kind: which state an unconfirmed one ends in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Domain {
    /// `mail.*`: ends in `needs_review`.
    Mail,
    /// `calendar.*`: ends in `retry_exhausted`.
    Calendar,
}

impl Domain {
    /// The domain of `kind` (`mail.send` → Mail), if the journal knows it.
    pub fn of(kind: &str) -> Option<Self> {
        match kind.split('.').next() {
            Some("mail") => Some(Self::Mail),
            Some("calendar") => Some(Self::Calendar),
            _ => None,
        }
    }

    /// Where an operation goes when the confirmation limit is reached.
    pub fn exhausted(self) -> OpState {
        match self {
            Self::Mail => OpState::NeedsReview,
            Self::Calendar => OpState::RetryExhausted,
        }
    }
}

/// An operation to journal before its backend is called.
#[derive(Debug, Clone, PartialEq)]
pub struct NewOperation {
    /// `mail.send`, `mail.reply`, `mail.send_later`, `calendar.*`.
    pub kind: String,
    /// Same key + same input returns the existing operation; same key + other input is refused.
    pub idempotency_key: String,
    /// The complete executable input.
    pub input: Value,
    /// What confirmation will look for (Message-ID, recipients, subject…).
    pub expected: Value,
    /// The approval that allowed it, when one did.
    pub approval_id: Option<i64>,
    /// For a scheduled send: when (Unix seconds). Absent: the operation starts now.
    pub scheduled_for: Option<i64>,
}

/// One recorded transition of an operation (the journal's feed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct OperationEvent {
    /// Position in the feed (strictly increasing).
    pub seq: i64,
    /// The operation.
    pub operation_id: i64,
    /// The state it left (absent when it was recorded).
    pub from: Option<String>,
    /// The state it entered.
    pub to: String,
    /// Unix seconds.
    pub at: i64,
}

/// Which operations to list, in a query string's shape.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct OpsQuery {
    /// Only this state (`scheduled`, `started`, `backend_returned`, `confirmed`, …).
    pub state: Option<String>,
    /// Operations to skip.
    pub offset: usize,
    /// Operations to return (1..=100; absent: 20).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<usize>,
}

/// Operations per page when a query does not say.
/// Default of a list's `limit`.
pub const DEFAULT_OPS_PAGE: usize = 20;

/// A journaled operation.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Operation {
    /// Its id.
    pub id: i64,
    /// The kind.
    pub kind: String,
    /// The idempotency key.
    pub idempotency_key: String,
    /// The complete input.
    pub input: Value,
    /// SHA-256 of the canonical input.
    pub input_sha256: String,
    /// The expected outcome.
    pub expected: Value,
    /// The approval.
    pub approval_id: Option<i64>,
    /// The state.
    pub state: OpState,
    /// Backend attempts (0 or 1: nothing retries a send).
    pub attempts: i64,
    /// Confirmation checks so far.
    pub confirmation_attempts: i64,
    /// When a scheduled send is due.
    pub scheduled_for: Option<i64>,
    /// When the backend was (about to be) called.
    pub attempted_at: Option<i64>,
    /// What the backend returned.
    pub backend_result: Option<Value>,
    /// The backend's error.
    pub error: Option<String>,
    /// Confirmation evidence.
    pub evidence: Option<Value>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub updated_at: i64,
}

/// An operation without its input, expected outcome, backend result or evidence: what a list
/// shows (read the operation for the rest).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct OperationSummary {
    /// Its id.
    pub id: i64,
    /// The kind.
    pub kind: String,
    /// The idempotency key.
    pub idempotency_key: String,
    /// The state.
    pub state: OpState,
    /// The approval.
    pub approval_id: Option<i64>,
    /// Backend attempts (0 or 1).
    pub attempts: i64,
    /// Confirmation checks so far.
    pub confirmation_attempts: i64,
    /// When a scheduled send is due.
    pub scheduled_for: Option<i64>,
    /// When the backend was (about to be) called.
    pub attempted_at: Option<i64>,
    /// The backend's error.
    pub error: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub updated_at: i64,
}

impl From<&Operation> for OperationSummary {
    fn from(o: &Operation) -> Self {
        Self {
            id: o.id,
            kind: o.kind.clone(),
            idempotency_key: o.idempotency_key.clone(),
            state: o.state,
            approval_id: o.approval_id,
            attempts: o.attempts,
            confirmation_attempts: o.confirmation_attempts,
            scheduled_for: o.scheduled_for,
            attempted_at: o.attempted_at,
            error: o.error.clone(),
            created_at: o.created_at,
            updated_at: o.updated_at,
        }
    }
}

/// What a transition records besides the state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpUpdate {
    /// The backend's result.
    pub backend_result: Option<Value>,
    /// The backend's error.
    pub error: Option<String>,
    /// Confirmation evidence.
    pub evidence: Option<Value>,
}

/// What confirms an operation: what a confirmation check observed in the mirror (the sent
/// copy it matched). Only such a check builds one, so no caller can call an operation
/// confirmed without having looked — `Started → Confirmed` needs it in the type
/// ([`Journal::confirm`]; [`Journal::transition`] refuses `confirmed`).
#[derive(Debug, Clone, PartialEq)]
pub struct Confirmation {
    evidence: Value,
}

impl Confirmation {
    /// What a confirmation check found and matched.
    pub(crate) fn observed(evidence: Value) -> Self {
        Self { evidence }
    }

    /// The evidence, as stored with the operation.
    pub fn evidence(&self) -> &Value {
        &self.evidence
    }
}

/// Errors of the journal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// The idempotency key was used for a different input.
    #[error("idempotency key {0:?} was already used for a different input")]
    KeyReused(String),
    /// A transition the state machine does not have.
    #[error("operation {id}: {from:?} cannot become {to:?}")]
    IllegalTransition {
        /// The operation.
        id: i64,
        /// Its state.
        from: OpState,
        /// The state asked for.
        to: OpState,
    },
    /// No operation has this id.
    #[error("operation {0} not found")]
    NotFound(i64),
    /// Bad input (kind, key, sizes, page).
    #[error("invalid operation: {0}")]
    Invalid(String),
    /// `ops.db` is damaged: the journal stops; it is never rebuilt.
    #[error(
        "the write journal {path} is damaged ({detail}); it is never rebuilt — stop, keep the file, and restore it from your backup of the Steward home"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What SQLite said.
        detail: String,
    },
    /// The audit trail (`audit.db`) cannot be opened: nothing is journaled unaudited. Nothing
    /// is cached either, so a later call opens both once the trail can be opened.
    #[error("the audit trail cannot be opened ({0}); the journal refuses to run unaudited")]
    AuditUnavailable(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StewardError for JournalError {
    fn code(&self) -> &'static str {
        match self {
            Self::KeyReused(_) => "JOURNAL_KEY_REUSED",
            Self::IllegalTransition { .. } => "JOURNAL_ILLEGAL_TRANSITION",
            Self::NotFound(_) => "JOURNAL_NOT_FOUND",
            Self::Invalid(_) => "JOURNAL_INVALID",
            Self::Corrupt { .. } => "JOURNAL_CORRUPT",
            Self::AuditUnavailable(_) => "AUDIT_UNAVAILABLE",
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::KeyReused(_) | Self::IllegalTransition { .. } => ErrorKind::Conflict,
            Self::NotFound(_) => ErrorKind::NotFound,
            Self::Invalid(_) => ErrorKind::InvalidInput,
            Self::Corrupt { .. } => ErrorKind::Corrupt,
            Self::AuditUnavailable(_) => ErrorKind::Unavailable,
            Self::Store(e) => e.kind(),
        }
    }
}

const COLUMNS: &str =
    "id, kind, idempotency_key, input, input_sha256, expected, approval_id, state,
    attempts, confirmation_attempts, scheduled_for, attempted_at, backend_result, error, evidence,
    created_at, updated_at";

/// A page size must be 1..=[`MAX_OPS_PAGE`].
fn check_page(limit: usize) -> Result<(), JournalError> {
    if limit == 0 || limit > MAX_OPS_PAGE {
        return Err(JournalError::Invalid(format!("limit must be 1..={MAX_OPS_PAGE}")));
    }
    Ok(())
}

fn q(ctx: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::query(ctx, e)
}

/// The stored names of [`COLUMNS`], by position (damage reports name the column).
const COLUMN_NAMES: [&str; 17] = [
    "id",
    "kind",
    "idempotency_key",
    "input",
    "input_sha256",
    "expected",
    "approval_id",
    "state",
    "attempts",
    "confirmation_attempts",
    "scheduled_for",
    "attempted_at",
    "backend_result",
    "error",
    "evidence",
    "created_at",
    "updated_at",
];

/// A JSON column of operation `id`; text that no longer parses names the row and column.
fn json_col(row: &Row<'_>, i: usize, id: i64) -> rusqlite::Result<Option<Value>> {
    row.get::<_, Option<String>>(i)?
        .map(|s| crate::store::json_text(&s, i, "operations", id, COLUMN_NAMES[i]))
        .transpose()
}

fn operation(row: &Row<'_>) -> rusqlite::Result<Operation> {
    let id: i64 = row.get(0)?;
    let state: String = row.get(7)?;
    Ok(Operation {
        id,
        kind: row.get(1)?,
        idempotency_key: row.get(2)?,
        input: json_col(row, 3, id)?.unwrap_or(Value::Null),
        input_sha256: row.get(4)?,
        expected: json_col(row, 5, id)?.unwrap_or(Value::Null),
        approval_id: row.get(6)?,
        state: OpState::parse(&state).ok_or_else(|| {
            crate::store::DamagedValue {
                table: "operations",
                row: id,
                column: "state",
                detail: format!("unknown state {state:?}"),
            }
            .into_sql(7)
        })?,
        attempts: row.get(8)?,
        confirmation_attempts: row.get(9)?,
        scheduled_for: row.get(10)?,
        attempted_at: row.get(11)?,
        backend_result: json_col(row, 12, id)?,
        error: row.get(13)?,
        evidence: json_col(row, 14, id)?,
        created_at: row.get(15)?,
        updated_at: row.get(16)?,
    })
}

/// The write journal of one home.
#[derive(Debug)]
pub struct Journal {
    db: Database,
    audit: Option<std::sync::Arc<AuditLog>>,
}

fn corrupt(path: &Path, e: StoreError) -> JournalError {
    match e {
        StoreError::Corrupt { detail, .. } => {
            JournalError::Corrupt { path: path.to_path_buf(), detail }
        }
        other => JournalError::Store(other),
    }
}

impl Journal {
    /// Opens (creating, mode 0600) `<home>/ops.db` and checks its integrity. A damaged file
    /// stops the journal with [`JournalError::Corrupt`] and is left exactly as it was.
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn open(home: &Path, limits: &Limits) -> Result<Self, JournalError> {
        let path = home.join("ops.db");
        if path.exists() {
            // Check before any migration or WAL replay could write to a damaged file.
            let probe = rusqlite::Connection::open_with_flags(
                &path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .and_then(|c| c.query_row("PRAGMA quick_check", [], |r| r.get::<_, String>(0)));
            match probe {
                Ok(ok) if ok == "ok" => {}
                Ok(detail) => return Err(JournalError::Corrupt { path, detail }),
                Err(e) => {
                    // Damage is corruption; anything else (busy, permissions) is a store error,
                    // never a reason to call the journal damaged.
                    let damaged = matches!(
                        e.sqlite_error_code(),
                        Some(
                            rusqlite::ErrorCode::DatabaseCorrupt
                                | rusqlite::ErrorCode::NotADatabase
                        )
                    );
                    return Err(if damaged {
                        JournalError::Corrupt { path, detail: e.to_string() }
                    } else {
                        JournalError::Store(StoreError::query("journal check", e))
                    });
                }
            }
        }
        let db = Database::open(&path, &SCHEMA, OpenOptions::small_writes(limits))
            .map_err(|e| corrupt(&path, e))?;
        // ops.db holds complete mail bodies.
        crate::store::restrict_file(&path);
        Ok(Self { db, audit: None })
    }

    /// For reads that map operation rows: a stored value that no longer parses is damage
    /// (`JOURNAL_CORRUPT`, naming the row and column: the journal stops), never a failed query.
    fn rows(&self, ctx: &'static str) -> impl Fn(rusqlite::Error) -> JournalError + '_ {
        move |e| match crate::store::damaged(&e) {
            Some(detail) => JournalError::Corrupt {
                path: self.db.path().to_path_buf(),
                detail: format!("{ctx}: {detail}"),
            },
            None => JournalError::Store(StoreError::query(ctx, e)),
        }
    }

    /// Copies every new operation and transition, redacted, to `audit` from now on.
    #[must_use]
    pub fn with_audit(mut self, audit: std::sync::Arc<AuditLog>) -> Self {
        self.audit = Some(audit);
        self
    }

    /// The audit copy (redacted on insert; the journal keeps the complete input).
    fn audit(&self, op: &Operation, from: Option<OpState>, now: i64) {
        let Some(audit) = &self.audit else { return };
        let risk = match op.state {
            OpState::Failed | OpState::Unknown | OpState::NeedsReview | OpState::RetryExhausted => {
                Risk::High
            }
            _ => Risk::Medium,
        };
        let payload = serde_json::json!({
            "operation": op.id, "from": from, "to": op.state, "input": op.input,
            "attempts": op.attempts, "confirmation_attempts": op.confirmation_attempts,
            "error": op.error, "approval_id": op.approval_id,
        });
        audit.record(&AuditEvent {
            actor: "system",
            event_type: &format!("journal.{}", op.state.as_str()),
            risk,
            chat: None,
            tool: Some(&op.kind),
            correlation_id: Some(&format!("operation:{}", op.id)),
            payload: &payload,
            at: now,
        });
    }

    /// Journals `op` before its backend is called. The same idempotency key with the same
    /// input returns the existing operation (one effect); with another input it is refused.
    pub fn record(&self, op: &NewOperation, now: i64) -> Result<Operation, JournalError> {
        self.record_new(op, now).map(|(op, _)| op)
    }

    /// [`Journal::record`], also saying whether this call inserted the operation (`false`: the
    /// key was already journaled with the same input, and the caller must not execute it).
    pub fn record_new(
        &self,
        op: &NewOperation,
        now: i64,
    ) -> Result<(Operation, bool), JournalError> {
        if Domain::of(&op.kind).is_none() {
            return Err(JournalError::Invalid(format!("unknown operation kind {:?}", op.kind)));
        }
        let key = op.idempotency_key.trim();
        if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY {
            return Err(JournalError::Invalid(format!(
                "an idempotency key must be 1..={MAX_IDEMPOTENCY_KEY} bytes"
            )));
        }
        if !op.input.is_object() {
            return Err(JournalError::Invalid("the input must be a JSON object".into()));
        }
        let hash = input_sha256(&op.input);
        let state = if op.scheduled_for.is_some() { OpState::Scheduled } else { OpState::Started };
        let (id, inserted) = self.db.write(|tx| {
            let existing: Option<(i64, String)> = tx
                .query_row(
                    "SELECT id, input_sha256 FROM operations WHERE idempotency_key = ?1",
                    [key],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(q("idempotency lookup"))?;
            if let Some((id, existing_hash)) = existing {
                return if existing_hash == hash {
                    Ok((id, false))
                } else {
                    Err(JournalError::KeyReused(key.to_owned()))
                };
            }
            let started = state == OpState::Started;
            tx.execute(
                "INSERT INTO operations (kind, idempotency_key, input, input_sha256, expected,
                     approval_id, state, attempts, scheduled_for, attempted_at, created_at,
                     updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)",
                params![
                    op.kind,
                    key,
                    canonical_json(&op.input),
                    hash,
                    canonical_json(&op.expected),
                    op.approval_id,
                    state.as_str(),
                    i64::from(started),
                    op.scheduled_for,
                    started.then_some(now),
                    now
                ],
            )
            .map_err(q("journal insert"))?;
            let id = tx.last_insert_rowid();
            event(tx, id, None, state, now)?;
            Ok((id, true))
        })?;
        let op = self.get(id)?;
        if inserted {
            self.audit(&op, None, now);
        }
        Ok((op, inserted))
    }

    /// The operation journaled under `key`, if any.
    pub fn find_by_key(&self, key: &str) -> Result<Option<Operation>, JournalError> {
        self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM operations WHERE idempotency_key = ?1"
            ))
            .and_then(|mut s| s.query_row([key.trim()], operation).optional())
            .map_err(self.rows("operation by key"))
        })
    }

    /// Operations of kinds starting with `kind_prefix` that confirmation should examine: the
    /// backend returned, the outcome is unknown, or the row was left `started` (unchanged since
    /// `stale_before`, a crashed caller). Least recently examined first, at most `limit`.
    pub fn confirmable(
        &self,
        kind_prefix: &str,
        stale_before: i64,
        limit: usize,
    ) -> Result<Vec<Operation>, JournalError> {
        check_page(limit)?;
        self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM operations
                 WHERE (state IN ('backend_returned', 'unknown')
                        OR (state = 'started' AND updated_at <= ?2))
                   AND substr(kind, 1, length(?1)) = ?1
                 ORDER BY updated_at, id LIMIT ?3"
            ))
            .and_then(|mut s| {
                s.query_map(
                    params![kind_prefix, stale_before, i64::try_from(limit).unwrap_or(1)],
                    operation,
                )?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(self.rows("confirmable operations"))
        })
    }

    /// One operation, with its full input and evidence.
    pub fn get(&self, id: i64) -> Result<Operation, JournalError> {
        self.db
            .read(|c| {
                c.prepare_cached(&format!("SELECT {COLUMNS} FROM operations WHERE id = ?1"))
                    .and_then(|mut s| s.query_row([id], operation).optional())
                    .map_err(self.rows("get operation"))
            })?
            .ok_or(JournalError::NotFound(id))
    }

    /// A page of operations, newest first, optionally in one state.
    pub fn list(
        &self,
        state: Option<OpState>,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<Operation>, JournalError> {
        check_page(limit)?;
        self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM operations WHERE (?1 IS NULL OR state = ?1)
                 ORDER BY id DESC LIMIT ?2 OFFSET ?3"
            ))
            .and_then(|mut s| {
                s.query_map(
                    params![
                        state.map(OpState::as_str),
                        i64::try_from(limit).unwrap_or(1),
                        i64::try_from(offset).unwrap_or(i64::MAX)
                    ],
                    operation,
                )?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(self.rows("list operations"))
        })
    }

    /// How many operations are in `state`.
    pub fn count_in(&self, state: OpState) -> Result<i64, JournalError> {
        Ok(self.db.read(|c| {
            c.query_row("SELECT count(*) FROM operations WHERE state = ?1", [state.as_str()], |r| {
                r.get(0)
            })
            .map_err(q("count operations"))
        })?)
    }

    /// The journal's transition feed after `after`, oldest first (1..=[`MAX_OPS_PAGE`] rows).
    pub fn events_after(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<OperationEvent>, JournalError> {
        check_page(limit)?;
        Ok(self.db.read(|c| {
            c.prepare_cached(
                "SELECT seq, operation_id, from_state, to_state, at FROM operation_events
                 WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            )
            .and_then(|mut s| {
                s.query_map(params![after, i64::try_from(limit).unwrap_or(1)], |r| {
                    Ok(OperationEvent {
                        seq: r.get(0)?,
                        operation_id: r.get(1)?,
                        from: r.get(2)?,
                        to: r.get(3)?,
                        at: r.get(4)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(q("operation feed"))
        })?)
    }

    /// The position of the newest transition (0 when there is none).
    pub fn feed_position(&self) -> Result<i64, JournalError> {
        Ok(self.db.read(|c| {
            c.query_row("SELECT coalesce(max(seq), 0) FROM operation_events", [], |r| r.get(0))
                .map_err(q("operation feed position"))
        })?)
    }

    /// Moves `id` from the state it is in to `to`, recording `update`. An illegal transition
    /// is an error and writes nothing; a concurrent move makes this one fail the same way.
    pub fn transition(
        &self,
        id: i64,
        to: OpState,
        update: &OpUpdate,
        now: i64,
    ) -> Result<Operation, JournalError> {
        if to == OpState::Confirmed {
            return Err(JournalError::Invalid(format!(
                "operation {id}: only a confirmation with evidence confirms (Journal::confirm)"
            )));
        }
        self.move_to(id, to, update, now)
    }

    /// Confirms `id` with what a confirmation check observed (from any state that may become
    /// `confirmed`); the evidence is stored with it.
    pub fn confirm(
        &self,
        id: i64,
        confirmation: Confirmation,
        now: i64,
    ) -> Result<Operation, JournalError> {
        let update = OpUpdate { evidence: Some(confirmation.evidence), ..OpUpdate::default() };
        self.move_to(id, OpState::Confirmed, &update, now)
    }

    fn move_to(
        &self,
        id: i64,
        to: OpState,
        update: &OpUpdate,
        now: i64,
    ) -> Result<Operation, JournalError> {
        self.db
            .write(|tx| {
                let from: String = tx
                    .query_row("SELECT state FROM operations WHERE id = ?1", [id], |r| r.get(0))
                    .optional()
                    .map_err(q("operation state"))?
                    .ok_or(JournalError::NotFound(id))?;
                let from = OpState::parse(&from).ok_or_else(|| {
                    JournalError::Invalid(format!("operation {id} has unknown state {from:?}"))
                })?;
                if !from.can_become(to) {
                    return Err(JournalError::IllegalTransition { id, from, to });
                }
                let json = |v: &Option<Value>| v.as_ref().map(canonical_json);
                tx.execute(
                    "UPDATE operations SET state = ?2, updated_at = ?3,
                     backend_result = coalesce(?4, backend_result),
                     error = coalesce(?5, error),
                     evidence = coalesce(?6, evidence)
                 WHERE id = ?1 AND state = ?7",
                    params![
                        id,
                        to.as_str(),
                        now,
                        json(&update.backend_result),
                        update.error,
                        json(&update.evidence),
                        from.as_str()
                    ],
                )
                .map_err(q("transition"))?;
                event(tx, id, Some(from), to, now)?;
                Ok(from)
            })
            .and_then(|from| {
                let op = self.get(id)?;
                self.audit(&op, Some(from), now);
                Ok(op)
            })
    }

    /// Claims the scheduled operations due at `now` (at most `limit`): one atomic update per
    /// row, so only a still-due `scheduled` row becomes `started` (attempt + 1) and two
    /// schedulers never claim the same one. The caller then calls the backend for each.
    pub fn claim_due(&self, now: i64, limit: usize) -> Result<Vec<Operation>, JournalError> {
        check_page(limit)?;
        let ids: Vec<i64> = self.db.write(|tx| {
            let ids: Vec<i64> = tx
                .prepare_cached(
                    "UPDATE operations SET state = 'started', attempts = attempts + 1,
                         attempted_at = ?1, updated_at = ?1
                     WHERE id IN (SELECT id FROM operations
                                  WHERE state = 'scheduled' AND scheduled_for <= ?1
                                  ORDER BY scheduled_for, id LIMIT ?2)
                       AND state = 'scheduled'
                     RETURNING id",
                )
                .and_then(|mut s| {
                    s.query_map(params![now, i64::try_from(limit).unwrap_or(1)], |r| r.get(0))?
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(q("claim due"))?;
            for id in &ids {
                event(tx, *id, Some(OpState::Scheduled), OpState::Started, now)?;
            }
            Ok::<_, JournalError>(ids)
        })?;
        let ops: Vec<Operation> =
            ids.into_iter().map(|id| self.get(id)).collect::<Result<_, _>>()?;
        for op in &ops {
            self.audit(op, Some(OpState::Scheduled), now);
        }
        Ok(ops)
    }

    /// Records one confirmation check that found no evidence. At [`CONFIRMATION_LIMIT`] the
    /// operation goes to its domain's final state (`needs_review` for mail); never back to a
    /// state that would send again.
    /// `evidence` (what the check found: nothing, or several candidates) is stored with the
    /// check, so a person reviewing the operation sees why it was not confirmed.
    pub fn confirmation_missed(
        &self,
        id: i64,
        now: i64,
        evidence: Option<Value>,
    ) -> Result<Operation, JournalError> {
        let op = self.get(id)?;
        if op.state.is_final() || op.state == OpState::Scheduled {
            return Err(JournalError::IllegalTransition {
                id,
                from: op.state,
                to: OpState::Confirmed,
            });
        }
        let n = self.db.write(|tx| {
            tx.query_row(
                "UPDATE operations SET confirmation_attempts = confirmation_attempts + 1,
                     updated_at = ?2, evidence = coalesce(?4, evidence)
                 WHERE id = ?1 AND state = ?3 RETURNING confirmation_attempts",
                params![id, now, op.state.as_str(), evidence.as_ref().map(canonical_json)],
                |r| r.get::<_, i64>(0),
            )
            .optional()
            .map_err(q("confirmation attempt"))
        })?;
        match n {
            Some(n) if n >= CONFIRMATION_LIMIT => {
                let to = Domain::of(&op.kind).map_or(OpState::NeedsReview, Domain::exhausted);
                self.transition(id, to, &OpUpdate::default(), now)
            }
            Some(_) => self.get(id),
            None => Err(JournalError::IllegalTransition { id, from: op.state, to: op.state }),
        }
    }
}

fn event(
    tx: &rusqlite::Transaction<'_>,
    id: i64,
    from: Option<OpState>,
    to: OpState,
    now: i64,
) -> Result<(), JournalError> {
    tx.execute(
        "INSERT INTO operation_events (operation_id, from_state, to_state, at)
         VALUES (?1, ?2, ?3, ?4)",
        params![id, from.map(OpState::as_str), to.as_str(), now],
    )
    .map_err(q("operation event"))?;
    Ok(())
}

#[cfg(test)]
mod tests;
