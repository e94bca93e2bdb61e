//! The durable approval store (`steward.db`).

use std::path::Path;

use rusqlite::{OptionalExtension, Row, params};
use serde_json::Value;

use super::{
    AGENT_PREFIX, APPROVAL_TIMEOUT_SECS, Approval, ApprovalError, ApprovalStatus, HumanAuthority,
    MAX_APPROVAL_PAGE, MAX_BATCH_CALLS, MAX_INPUT_BYTES, Resolution, canonical_json, input_sha256,
};
use crate::{
    Limits,
    audit::{AuditEvent, AuditLog, Risk},
    policy::Level,
    store::{Database, Migration, OpenOptions, Schema, StoreError},
};

/// Wrong PINs tolerated per window before the PIN locks.
/// Fixed (not a setting).
pub const MAX_PIN_FAILURES: i64 = 5;
/// The PIN failure window, seconds.
/// Fixed (not a setting).
pub const PIN_WINDOW_SECS: i64 = 900;

/// The migrations of `steward.db` (approvals, PIN, policy versions, network access, jobs).
pub(crate) const SCHEMA: Schema = Schema {
    name: "steward",
    migrations: &[
        Migration {
            version: 1,
            name: "approvals",
            sql: include_str!("../../migrations/steward/001_approvals.sql"),
        },
        Migration {
            version: 2,
            name: "audit_cursor",
            sql: include_str!("../../migrations/steward/002_audit_cursor.sql"),
        },
        Migration {
            version: 3,
            name: "policy",
            sql: include_str!("../../migrations/steward/003_policy.sql"),
        },
        Migration {
            version: 4,
            name: "access",
            sql: include_str!("../../migrations/steward/004_access.sql"),
        },
        Migration {
            version: 5,
            name: "jobs",
            sql: include_str!("../../migrations/steward/005_jobs.sql"),
        },
        Migration {
            version: 6,
            name: "taint",
            sql: include_str!("../../migrations/steward/006_taint.sql"),
        },
        Migration {
            version: 7,
            name: "client calls",
            sql: include_str!("../../migrations/steward/007_client_calls.sql"),
        },
    ],
};

/// Opens (creating, migrating) `<home>/steward.db`: approvals, policy and network access share it.
pub(crate) fn open_steward_db(home: &Path, limits: &Limits) -> Result<Database, StoreError> {
    Database::open(&home.join("steward.db"), &SCHEMA, OpenOptions::small_writes(limits))
}

/// A tool's preflight: validates and normalizes an input, or says why not.
pub type Preflight<'a> = &'a dyn Fn(&Value) -> Result<Value, String>;

/// What an agent asks a person to approve.
#[derive(Debug, Clone, PartialEq)]
pub struct NewApproval {
    /// The chat or session.
    pub chat: Option<String>,
    /// The agent identity (`agent:<name>`).
    pub requested_by: String,
    /// The tool.
    pub tool: String,
    /// The proposed input.
    pub input: Value,
    /// A person-readable summary.
    pub summary: String,
    /// Confirm or Secure (what `decide` returned).
    pub level: Level,
    /// Seconds before it expires (default [`APPROVAL_TIMEOUT_SECS`]).
    pub timeout_secs: Option<i64>,
    /// The input's fields copied from untrusted content, for the card.
    pub taint: Option<super::Taint>,
}

/// An input a person approved, as the approval store handed it out after checking the
/// request's state and the input's hash ([`Approvals::authorize_execution`]). It cannot be
/// built anywhere else, so an executor that takes one runs only approved input.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovedInput {
    approval_id: i64,
    tool: String,
    chat: Option<String>,
    decided_by: String,
    input: Value,
}

impl ApprovedInput {
    /// The approval.
    pub fn approval_id(&self) -> i64 {
        self.approval_id
    }

    /// The tool it approves.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The chat the request came from.
    pub fn chat(&self) -> Option<&str> {
        self.chat.as_deref()
    }

    /// The person who decided.
    pub fn decided_by(&self) -> &str {
        &self.decided_by
    }

    /// The effective input: exactly what runs.
    pub fn input(&self) -> &Value {
        &self.input
    }

    /// The effective input, owned.
    pub fn into_input(self) -> Value {
        self.input
    }
}

/// The approvals of one home.
#[derive(Debug)]
pub struct Approvals {
    db: Database,
    audit: Option<std::sync::Arc<AuditLog>>,
    /// Bumped after every transition in this process, to wake waiting subscribers at once;
    /// other processes' transitions are seen by polling every `poll`.
    changed: (std::sync::Mutex<u64>, std::sync::Condvar),
    /// `Limits::approval_poll_ms` (default [`SUBSCRIPTION_POLL_MS`]).
    poll: std::time::Duration,
}

/// How often a waiting subscriber re-reads `steward.db` for other processes' transitions
/// (the default of `Limits::approval_poll_ms`).
pub const SUBSCRIPTION_POLL_MS: u64 = 200;
/// Most events one read of the feed returns.
/// Fixed (not a setting).
pub const MAX_EVENT_PAGE: usize = 500;
/// Longest a subscriber may wait in one call.
/// Fixed (not a setting).
pub const MAX_WAIT_SECS: u64 = 60;

/// One transition or refused attempt, in order (the subscription feed).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct ApprovalEvent {
    /// Position in the feed (strictly increasing).
    pub seq: i64,
    /// The request.
    pub approval_id: i64,
    /// `requested`, `approved`, `edited`, `denied`, `revision_requested`, `expired`,
    /// `cancelled`, `self_resolve_denied`, `pin_failed`, `pin_locked`.
    pub event: String,
    /// Who.
    pub actor: String,
    /// Unix seconds.
    pub at: i64,
}

/// What a new subscriber starts from: the pending requests now and the feed position they
/// reflect. Events after `cursor` are the updates.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct ApprovalSnapshot {
    /// Pending requests, newest first (one page).
    pub pending: Vec<Approval>,
    /// Feed position read before the pending list (so no update is lost; one may repeat).
    pub cursor: i64,
}

fn q(ctx: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::query(ctx, e)
}

const COLUMNS: &str = "id, batch_id, chat, requested_by, tool, proposed_input, normalized_input,
    summary, level, status, decided_by, note, effective_input, effective_sha256, created_at,
    decided_at, expires_at, taint";

/// For reads that map approval rows: a stored value that no longer parses is damage
/// (`APPROVAL_CORRUPT`, naming the row and column), never a failed query.
fn rows(ctx: &'static str) -> impl Fn(rusqlite::Error) -> ApprovalError {
    move |e| match crate::store::damaged(&e) {
        Some(detail) => ApprovalError::Corrupt(format!("{ctx}: {detail}")),
        None => ApprovalError::Store(StoreError::query(ctx, e)),
    }
}

fn approval(row: &Row<'_>) -> rusqlite::Result<Approval> {
    approval_at(row, 0)
}

/// The approval in the 18 [`COLUMNS`] starting at `o`.
fn approval_at(row: &Row<'_>, o: usize) -> rusqlite::Result<Approval> {
    let id: i64 = row.get(o)?;
    let damaged = |i: usize, column: &'static str, detail: String| {
        crate::store::DamagedValue { table: "approvals", row: id, column, detail }.into_sql(o + i)
    };
    let json = |i: usize, column: &'static str| -> rusqlite::Result<Value> {
        crate::store::json_text(&row.get::<_, String>(o + i)?, o + i, "approvals", id, column)
    };
    let level: String = row.get(o + 8)?;
    let status: String = row.get(o + 9)?;
    Ok(Approval {
        id,
        batch_id: row.get(o + 1)?,
        chat: row.get(o + 2)?,
        requested_by: row.get(o + 3)?,
        tool: row.get(o + 4)?,
        proposed_input: json(5, "proposed_input")?,
        normalized_input: json(6, "normalized_input")?,
        summary: row.get(o + 7)?,
        level: Level::parse(&level)
            .map_err(|_| damaged(8, "level", format!("unknown value {level:?}")))?,
        status: ApprovalStatus::parse(&status)
            .ok_or_else(|| damaged(9, "status", format!("unknown value {status:?}")))?,
        decided_by: row.get(o + 10)?,
        note: row.get(o + 11)?,
        effective_input: row
            .get::<_, Option<String>>(o + 12)?
            .map(|s| crate::store::json_text(&s, o + 12, "approvals", id, "effective_input"))
            .transpose()?,
        effective_sha256: row.get(o + 13)?,
        created_at: row.get(o + 14)?,
        decided_at: row.get(o + 15)?,
        expires_at: row.get(o + 16)?,
        taint: row
            .get::<_, Option<String>>(o + 17)?
            .map(|s| {
                crate::store::json_text(&s, o + 17, "approvals", id, "taint").and_then(|v| {
                    serde_json::from_value(v)
                        .map_err(|e| damaged(17, "taint", format!("not a taint: {e}")))
                })
            })
            .transpose()?,
    })
}

impl Approvals {
    /// Opens (creating and migrating) `<home>/steward.db`.
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn open(home: &Path, limits: &Limits) -> Result<Self, ApprovalError> {
        Ok(Self {
            db: open_steward_db(home, limits)?,
            audit: None,
            changed: Default::default(),
            poll: std::time::Duration::from_millis(limits.approval_poll_ms),
        })
    }

    /// Forwards every transition and refused attempt to `audit` from now on.
    #[must_use]
    pub fn with_audit(mut self, audit: std::sync::Arc<AuditLog>) -> Self {
        self.audit = Some(audit);
        self
    }

    /// Copies events not yet audited into the audit log. The range is claimed first (one
    /// update of the cursor in a write transaction), so two handles never audit an event
    /// twice; audit is best effort and never fails the caller.
    fn flush_audit(&self) {
        self.notify();
        let Some(audit) = &self.audit else { return };
        let claimed = self.db.write(|tx| {
            let from: i64 = tx
                .query_row("SELECT seq FROM audit_cursor WHERE id = 1", [], |r| r.get(0))
                .map_err(q("audit cursor"))?;
            let to: i64 = tx
                .query_row("SELECT coalesce(max(seq), 0) FROM approval_events", [], |r| r.get(0))
                .map_err(q("audit cursor"))?;
            if to > from {
                tx.execute("UPDATE audit_cursor SET seq = ?1 WHERE id = 1", [to])
                    .map_err(q("audit cursor"))?;
            }
            Ok::<_, ApprovalError>((from, to))
        });
        let (from, to) = match claimed {
            Ok(range) => range,
            Err(e) => {
                tracing::warn!(error = %e, "approval audit cursor unavailable");
                return;
            }
        };
        if to <= from {
            return;
        }
        let columns =
            COLUMNS.split(',').map(|c| format!("a.{}", c.trim())).collect::<Vec<_>>().join(", ");
        let rows: Result<Vec<(String, String, i64, Approval)>, StoreError> = self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT e.event, e.actor, e.at, {columns} FROM approval_events e
                 JOIN approvals a ON a.id = e.approval_id
                 WHERE e.seq > ?1 AND e.seq <= ?2 ORDER BY e.seq"
            ))
            .and_then(|mut st| {
                st.query_map([from, to], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, approval_at(r, 3)?))
                })?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|e| StoreError::query("events to audit", e))
        });
        let rows = match rows {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "approval events could not be read for the audit");
                return;
            }
        };
        for (event, actor, at, a) in rows {
            let risk = match event.as_str() {
                "self_resolve_denied" | "denied" | "pin_failed" | "pin_locked" => Risk::High,
                "expired" | "cancelled" => Risk::Low,
                _ => Risk::Medium,
            };
            let payload = serde_json::json!({
                "approval_id": a.id,
                "batch_id": a.batch_id,
                "summary": a.summary,
                "level": a.level,
                "status": a.status,
                "requested_by": a.requested_by,
                "input": a.normalized_input,
                "effective_sha256": a.effective_sha256,
                "note": a.note,
            });
            audit.record(&AuditEvent {
                actor: &actor,
                event_type: &format!("approval.{event}"),
                risk,
                chat: a.chat.as_deref(),
                tool: Some(&a.tool),
                correlation_id: Some(&format!("approval:{}", a.id)),
                payload: &payload,
                at,
            });
        }
    }

    fn validate(n: &NewApproval) -> Result<(), ApprovalError> {
        if !n.requested_by.starts_with(AGENT_PREFIX) {
            return Err(ApprovalError::Invalid(format!(
                "requested_by must be an agent identity ({AGENT_PREFIX}…), got {:?}",
                n.requested_by
            )));
        }
        if n.level < Level::Confirm {
            return Err(ApprovalError::Invalid(
                "only Confirm and Secure calls need approval".into(),
            ));
        }
        crate::policy::check_tool_name(&n.tool)
            .map_err(|e| ApprovalError::Invalid(e.to_string()))?;
        if !n.input.is_object() || canonical_json(&n.input).len() > MAX_INPUT_BYTES {
            return Err(ApprovalError::Invalid(format!(
                "input must be a JSON object of at most {MAX_INPUT_BYTES} bytes"
            )));
        }
        if n.timeout_secs.is_some_and(|t| !(1..=86_400).contains(&t)) {
            return Err(ApprovalError::Invalid("timeout must be 1..=86400 seconds".into()));
        }
        Ok(())
    }

    /// Records a request (after the tool's preflight, when it has one) and returns the card.
    pub fn request(
        &self,
        n: &NewApproval,
        preflight: Option<Preflight<'_>>,
        now: i64,
    ) -> Result<Approval, ApprovalError> {
        let ids = self.insert(std::slice::from_ref(n), preflight, now, false)?;
        self.get(ids[0])
    }

    /// Records N calls to be approved or denied as one set (each still runs, is journaled and
    /// audited on its own). Returns the batch id and the cards.
    pub fn request_batch(
        &self,
        calls: &[NewApproval],
        preflight: Option<Preflight<'_>>,
        now: i64,
    ) -> Result<(i64, Vec<Approval>), ApprovalError> {
        if calls.is_empty() || calls.len() > MAX_BATCH_CALLS {
            return Err(ApprovalError::Invalid(format!("a batch has 1..={MAX_BATCH_CALLS} calls")));
        }
        let ids = self.insert(calls, preflight, now, true)?;
        let cards = ids.iter().map(|id| self.get(*id)).collect::<Result<Vec<_>, _>>()?;
        Ok((cards[0].batch_id.unwrap_or(ids[0]), cards))
    }

    fn insert(
        &self,
        calls: &[NewApproval],
        preflight: Option<Preflight<'_>>,
        now: i64,
        batch: bool,
    ) -> Result<Vec<i64>, ApprovalError> {
        let mut rows = Vec::with_capacity(calls.len());
        for n in calls {
            Self::validate(n)?;
            let normalized = match preflight {
                Some(p) => p(&n.input).map_err(ApprovalError::Preflight)?,
                None => n.input.clone(),
            };
            rows.push((n, normalized));
        }
        let ids = self.db.write(|tx| {
            let mut ids = Vec::with_capacity(rows.len());
            let mut batch_id: Option<i64> = None;
            for (n, normalized) in &rows {
                tx.execute(
                    "INSERT INTO approvals (batch_id, chat, requested_by, tool, proposed_input,
                         normalized_input, summary, level, status, created_at, expires_at, taint)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'requested', ?9, ?10, ?11)",
                    params![
                        batch_id,
                        n.chat,
                        n.requested_by,
                        n.tool,
                        canonical_json(&n.input),
                        canonical_json(normalized),
                        n.summary,
                        n.level.as_str(),
                        now,
                        now + n.timeout_secs.unwrap_or(APPROVAL_TIMEOUT_SECS),
                        n.taint
                            .as_ref()
                            .filter(|t| !t.fields.is_empty())
                            .and_then(|t| serde_json::to_string(t).ok()),
                    ],
                )
                .map_err(q("insert approval"))?;
                let id = tx.last_insert_rowid();
                if batch && batch_id.is_none() {
                    batch_id = Some(id);
                    tx.execute("UPDATE approvals SET batch_id = ?1 WHERE id = ?1", [id])
                        .map_err(q("batch id"))?;
                }
                event(tx, id, "requested", &n.requested_by, now)?;
                ids.push(id);
            }
            Ok::<_, ApprovalError>(ids)
        });
        self.flush_audit();
        ids
    }

    /// The newest request `requested_by` made for `tool` with this normalized input
    /// (canonical JSON), and whether a matching call already ran it ([`Approvals::consume`]).
    pub(crate) fn latest_for(
        &self,
        requested_by: &str,
        tool: &str,
        normalized: &str,
    ) -> Result<Option<(Approval, bool)>, ApprovalError> {
        let found: Option<(i64, bool)> = self.db.read(|c| {
            c.prepare_cached(
                "SELECT id, consumed_at IS NOT NULL FROM approvals WHERE requested_by = ?1 \
                 AND tool = ?2 AND normalized_input = ?3 ORDER BY id DESC LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row(params![requested_by, tool, normalized], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .map_err(rows("latest approval for a call"))
        })?;
        found.map(|(id, consumed)| Ok((self.get(id)?, consumed))).transpose()
    }

    /// Marks approved request `id` as run by the matching call of the agent that asked for
    /// it; `false` when a call already did (or it is not approved): it runs once.
    pub(crate) fn consume(&self, id: i64, now: i64) -> Result<bool, ApprovalError> {
        let n = self.db.write(|tx| {
            tx.execute(
                "UPDATE approvals SET consumed_at = ?2 WHERE id = ?1 AND consumed_at IS NULL \
                 AND status IN ('approved', 'edited')",
                params![id, now],
            )
            .map_err(rows("consume an approval"))
        })?;
        Ok(n == 1)
    }

    /// One request.
    pub fn get(&self, id: i64) -> Result<Approval, ApprovalError> {
        self.db
            .read(|c| {
                c.prepare_cached(&format!("SELECT {COLUMNS} FROM approvals WHERE id = ?1"))
                    .and_then(|mut s| s.query_row([id], approval).optional())
                    .map_err(rows("get approval"))
            })?
            .ok_or(ApprovalError::NotFound(id))
    }

    /// A page of requests, newest first: pending only or all, one chat or every chat.
    pub fn list(
        &self,
        pending_only: bool,
        chat: Option<&str>,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<Approval>, ApprovalError> {
        self.list_in(pending_only.then_some(ApprovalStatus::Requested), chat, offset, limit)
    }

    /// A page of requests in one state (or every state), newest first.
    pub fn list_in(
        &self,
        status: Option<ApprovalStatus>,
        chat: Option<&str>,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<Approval>, ApprovalError> {
        if limit == 0 || limit > MAX_APPROVAL_PAGE {
            return Err(ApprovalError::Invalid(format!("limit must be 1..={MAX_APPROVAL_PAGE}")));
        }
        let sql = format!(
            "SELECT {COLUMNS} FROM approvals
             WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR chat = ?2)
             ORDER BY id DESC LIMIT ?3 OFFSET ?4"
        );
        self.db.read(|c| {
            c.prepare_cached(&sql)
                .and_then(|mut s| {
                    s.query_map(
                        params![
                            status.map(ApprovalStatus::as_str),
                            chat,
                            i64::try_from(limit).unwrap_or(i64::MAX),
                            i64::try_from(offset).unwrap_or(i64::MAX)
                        ],
                        approval,
                    )?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(rows("list approvals"))
        })
    }

    /// A person resolves a request. At most once: a second resolver, or one after the expiry,
    /// gets `APPROVAL_ALREADY_RESOLVED`. An edit runs the tool's preflight again; a Secure
    /// request needs the person's PIN.
    #[allow(clippy::too_many_arguments)]
    pub fn resolve(
        &self,
        id: i64,
        resolution: &Resolution,
        note: Option<&str>,
        who: &HumanAuthority,
        pin: Option<&str>,
        preflight: Option<Preflight<'_>>,
        now: i64,
    ) -> Result<Approval, ApprovalError> {
        let current = self.get(id)?;
        if current.status != ApprovalStatus::Requested {
            return Err(ApprovalError::AlreadyResolved { id, status: current.status });
        }
        if who.person().starts_with(AGENT_PREFIX) || who.person() == current.requested_by {
            return Err(self.refuse_agent_resolution(id, who.person(), now));
        }
        if current.level == Level::Secure && !matches!(resolution, Resolution::Deny) {
            let verified = self.verify_pin(id, who, pin, now);
            if verified.is_err() {
                self.flush_audit();
            }
            verified?;
        }
        let (status, effective) = match resolution {
            Resolution::Approve => (ApprovalStatus::Approved, Some(current.normalized_input)),
            Resolution::Edit(input) => {
                if !input.is_object() {
                    return Err(ApprovalError::Invalid("an edit must be a JSON object".into()));
                }
                let v = match preflight {
                    Some(p) => p(input).map_err(ApprovalError::Preflight)?,
                    None => input.clone(),
                };
                (ApprovalStatus::Edited, Some(v))
            }
            Resolution::Deny => (ApprovalStatus::Denied, None),
            Resolution::Revise => (ApprovalStatus::RevisionRequested, None),
        };
        let hash = effective.as_ref().map(input_sha256);
        let effective_json = effective.as_ref().map(canonical_json);
        let person = who.person().to_owned();
        let changed = self.db.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE approvals SET status = ?2, decided_by = ?3, note = ?4,
                         effective_input = ?5, effective_sha256 = ?6, decided_at = ?7
                     WHERE id = ?1 AND status = 'requested' AND expires_at > ?7",
                    params![id, status.as_str(), person, note, effective_json, hash, now],
                )
                .map_err(q("resolve approval"))?;
            if n == 1 {
                event(tx, id, status.as_str(), &person, now)?;
            } else {
                expire_in(tx, now)?;
            }
            Ok::<_, ApprovalError>(n == 1)
        });
        self.flush_audit();
        let changed = changed?;
        let after = self.get(id)?;
        if changed {
            Ok(after)
        } else {
            Err(ApprovalError::AlreadyResolved { id, status: after.status })
        }
    }

    /// Approves or denies every pending call of a batch as one set.
    pub fn resolve_batch(
        &self,
        batch_id: i64,
        approve: bool,
        who: &HumanAuthority,
        pin: Option<&str>,
        now: i64,
    ) -> Result<Vec<Approval>, ApprovalError> {
        let cards: Vec<Approval> = self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM approvals WHERE batch_id = ?1 ORDER BY id"
            ))
            .and_then(|mut s| s.query_map([batch_id], approval)?.collect::<Result<Vec<_>, _>>())
            .map_err(rows("batch"))
        })?;
        if cards.is_empty() {
            return Err(ApprovalError::NotFound(batch_id));
        }
        if let Some(done) = cards.iter().find(|c| c.status != ApprovalStatus::Requested) {
            return Err(ApprovalError::AlreadyResolved { id: done.id, status: done.status });
        }
        if approve && cards.iter().any(|c| c.level == Level::Secure) {
            let verified = self.verify_pin(cards[0].id, who, pin, now);
            if verified.is_err() {
                self.flush_audit();
            }
            verified?;
        }
        let person = who.person().to_owned();
        let status = if approve { ApprovalStatus::Approved } else { ApprovalStatus::Denied };
        let all = self.db.write(|tx| {
            let mut n = 0;
            for c in &cards {
                let (eff, hash) = if approve {
                    (
                        Some(canonical_json(&c.normalized_input)),
                        Some(input_sha256(&c.normalized_input)),
                    )
                } else {
                    (None, None)
                };
                n += tx
                    .execute(
                        "UPDATE approvals SET status = ?2, decided_by = ?3, effective_input = ?4,
                             effective_sha256 = ?5, decided_at = ?6
                         WHERE id = ?1 AND status = 'requested' AND expires_at > ?6",
                        params![c.id, status.as_str(), person, eff, hash, now],
                    )
                    .map_err(q("resolve batch"))?;
                event(tx, c.id, status.as_str(), &person, now)?;
            }
            if n != cards.len() {
                // Part of the set expired or was resolved meanwhile: nothing of it changes.
                return Err(ApprovalError::Invalid("the batch changed while resolving".into()));
            }
            Ok::<_, ApprovalError>(())
        });
        self.flush_audit();
        match all {
            Ok(()) => cards.iter().map(|c| self.get(c.id)).collect(),
            Err(ApprovalError::Invalid(_)) => {
                let now_cards: Vec<Approval> =
                    cards.iter().map(|c| self.get(c.id)).collect::<Result<_, _>>()?;
                let first = now_cards.iter().find(|c| c.status != ApprovalStatus::Requested);
                Err(first.map_or(ApprovalError::NotFound(batch_id), |c| {
                    ApprovalError::AlreadyResolved { id: c.id, status: c.status }
                }))
            }
            Err(e) => Err(e),
        }
    }

    /// An agent (or tool code) tried to resolve a request: refused, and recorded.
    pub fn refuse_agent_resolution(&self, id: i64, agent: &str, now: i64) -> ApprovalError {
        let recorded = self.db.write(|tx| event(tx, id, "self_resolve_denied", agent, now));
        if let Err(e) = recorded {
            tracing::warn!(error = %e, "could not record a refused agent resolution");
        }
        self.flush_audit();
        ApprovalError::SelfResolveDenied(agent.to_owned())
    }

    /// The agent withdraws its own pending request.
    pub fn cancel(&self, id: i64, agent: &str, now: i64) -> Result<Approval, ApprovalError> {
        let current = self.get(id)?;
        if current.requested_by != agent {
            return Err(ApprovalError::Invalid("only the requesting agent may cancel".into()));
        }
        let n = self.db.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE approvals SET status = 'cancelled', decided_at = ?2
                     WHERE id = ?1 AND status = 'requested'",
                    params![id, now],
                )
                .map_err(q("cancel"))?;
            if n == 1 {
                event(tx, id, "cancelled", agent, now)?;
            }
            Ok::<_, ApprovalError>(n)
        });
        self.flush_audit();
        let n = n?;
        let after = self.get(id)?;
        if n == 1 {
            Ok(after)
        } else {
            Err(ApprovalError::AlreadyResolved { id, status: after.status })
        }
    }

    /// Expires every request whose time is up (a denial). Returns how many.
    pub fn expire_due(&self, now: i64) -> Result<usize, ApprovalError> {
        let n = self.db.write(|tx| expire_in(tx, now));
        self.flush_audit();
        n
    }

    /// The executor's check: `input` is exactly what was approved (by hash of its canonical
    /// form) and the request allows execution. Returns the token an executor runs: the
    /// effective input, which only this check can produce.
    pub fn authorize_execution(
        &self,
        id: i64,
        input: &Value,
    ) -> Result<ApprovedInput, ApprovalError> {
        let a = self.get(id)?;
        if !a.status.allows_execution() {
            return Err(ApprovalError::NotApproved { id, status: a.status });
        }
        match (&a.effective_input, &a.effective_sha256) {
            (Some(eff), Some(hash))
                if *hash == input_sha256(input) && input_sha256(eff) == *hash =>
            {
                Ok(ApprovedInput {
                    approval_id: id,
                    tool: a.tool,
                    chat: a.chat,
                    decided_by: a.decided_by.unwrap_or_default(),
                    input: eff.clone(),
                })
            }
            _ => Err(ApprovalError::InputMismatch(id)),
        }
    }

    /// [`Approvals::authorize_execution`] of whatever the request holds as its effective
    /// input: what an executor that was handed only the approval's id runs.
    pub fn authorize_approved(&self, id: i64) -> Result<ApprovedInput, ApprovalError> {
        let a = self.get(id)?;
        let input = a.effective_input.unwrap_or(Value::Null);
        self.authorize_execution(id, &input)
    }

    /// Sets (or replaces) the person's PIN, stored as a salted Argon2id hash.
    pub fn set_pin(&self, who: &HumanAuthority, pin: &str, now: i64) -> Result<(), ApprovalError> {
        use argon2::{
            Argon2, PasswordHasher,
            password_hash::{SaltString, rand_core::OsRng},
        };
        if !(4..=32).contains(&pin.chars().count()) {
            return Err(ApprovalError::BadPin);
        }
        let salt = SaltString::generate(&mut OsRng);
        let hash = Argon2::default()
            .hash_password(pin.as_bytes(), &salt)
            .map_err(|e| ApprovalError::Invalid(format!("hashing the PIN failed: {e}")))?
            .to_string();
        self.db.write(|tx| {
            tx.execute(
                "INSERT INTO pin (id, hash, set_by, set_at) VALUES (1, ?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET hash = ?1, set_by = ?2, set_at = ?3",
                params![hash, who.person(), now],
            )
            .map_err(q("set pin"))?;
            Ok::<_, ApprovalError>(())
        })
    }

    /// Checks the PIN for request `id`. Every wrong PIN and every attempt while locked is an
    /// event of the request (so it reaches the audit trail).
    fn verify_pin(
        &self,
        id: i64,
        who: &HumanAuthority,
        pin: Option<&str>,
        now: i64,
    ) -> Result<(), ApprovalError> {
        use argon2::{Argon2, PasswordHash, PasswordVerifier};
        let (hash, failures, last): (Option<String>, i64, Option<i64>) = self.db.read(|c| {
            let hash = c
                .query_row("SELECT hash FROM pin WHERE id = 1", [], |r| r.get(0))
                .optional()
                .map_err(q("pin"))?;
            let (n, last) = c
                .query_row(
                    "SELECT count(*), max(at) FROM pin_failures WHERE at > ?1",
                    [now - PIN_WINDOW_SECS],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(q("pin failures"))?;
            Ok::<_, StoreError>((hash, n, last))
        })?;
        let hash = hash.ok_or(ApprovalError::NoPin)?;
        if failures >= MAX_PIN_FAILURES {
            self.db.write(|tx| event(tx, id, "pin_locked", who.person(), now))?;
            return Err(ApprovalError::PinLocked(last.unwrap_or(now) + PIN_WINDOW_SECS - now));
        }
        let ok = pin.is_some_and(|p| {
            PasswordHash::new(&hash)
                .is_ok_and(|h| Argon2::default().verify_password(p.as_bytes(), &h).is_ok())
        });
        if ok {
            return Ok(());
        }
        self.db.write(|tx| {
            tx.execute(
                "INSERT INTO pin_failures (at, person) VALUES (?1, ?2)",
                params![now, who.person()],
            )
            .map_err(q("pin failure"))?;
            event(tx, id, "pin_failed", who.person(), now)
        })?;
        Err(ApprovalError::PinRequired)
    }

    fn notify(&self) {
        let (lock, cv) = &self.changed;
        let mut n = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *n = n.wrapping_add(1);
        drop(n);
        cv.notify_all();
    }

    /// The position of the newest event in the feed (0 when there is none).
    pub fn feed_position(&self) -> Result<i64, ApprovalError> {
        Ok(self.db.read(|c| {
            c.query_row("SELECT coalesce(max(seq), 0) FROM approval_events", [], |r| r.get(0))
                .map_err(q("feed position"))
        })?)
    }

    /// Starts a subscription: the pending requests (of `chat`, or all) and the feed position.
    pub fn subscribe(&self, chat: Option<&str>) -> Result<ApprovalSnapshot, ApprovalError> {
        let cursor = self.feed_position()?;
        let pending = self.list(true, chat, 0, MAX_APPROVAL_PAGE)?;
        Ok(ApprovalSnapshot { pending, cursor })
    }

    /// Events after `after`, oldest first (1..=[`MAX_EVENT_PAGE`]).
    pub fn events_after(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<ApprovalEvent>, ApprovalError> {
        if limit == 0 || limit > MAX_EVENT_PAGE {
            return Err(ApprovalError::Invalid(format!("limit must be 1..={MAX_EVENT_PAGE}")));
        }
        Ok(self.db.read(|c| {
            c.prepare_cached(
                "SELECT seq, approval_id, event, actor, at FROM approval_events
                 WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            )
            .and_then(|mut s| {
                s.query_map(params![after, i64::try_from(limit).unwrap_or(1)], |r| {
                    Ok(ApprovalEvent {
                        seq: r.get(0)?,
                        approval_id: r.get(1)?,
                        event: r.get(2)?,
                        actor: r.get(3)?,
                        at: r.get(4)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(q("approval feed"))
        })?)
    }

    /// Waits up to `timeout` (at most [`MAX_WAIT_SECS`]) for events after `after` and returns
    /// them (empty on timeout). Wakes at once for this process's transitions, within
    /// `Limits::approval_poll_ms` ([`SUBSCRIPTION_POLL_MS`]) for another process's.
    pub fn wait_events(
        &self,
        after: i64,
        limit: usize,
        timeout: std::time::Duration,
    ) -> Result<Vec<ApprovalEvent>, ApprovalError> {
        let timeout = timeout.min(std::time::Duration::from_secs(MAX_WAIT_SECS));
        let deadline = std::time::Instant::now() + timeout;
        let poll = self.poll;
        let (lock, cv) = &self.changed;
        loop {
            let seen = *lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let events = self.events_after(after, limit)?;
            let now = std::time::Instant::now();
            if !events.is_empty() || now >= deadline {
                return Ok(events);
            }
            let wait = (deadline - now).min(poll);
            // Sleep unless a transition happened since `seen` was read (a poisoned lock still
            // holds a valid counter, so it is used as is and the wait stays bounded).
            let guard = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            drop(cv.wait_timeout_while(guard, wait, |n| *n == seen));
        }
    }

    /// The recorded transitions of a request: (event, actor, at), oldest first.
    pub fn events(&self, id: i64) -> Result<Vec<(String, String, i64)>, ApprovalError> {
        Ok(self.db.read(|c| {
            c.prepare_cached(
                "SELECT event, actor, at FROM approval_events WHERE approval_id = ?1 ORDER BY seq",
            )
            .and_then(|mut s| {
                s.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(q("approval events"))
        })?)
    }
}

fn event(
    tx: &rusqlite::Transaction<'_>,
    id: i64,
    what: &str,
    actor: &str,
    now: i64,
) -> Result<(), ApprovalError> {
    tx.execute(
        "INSERT INTO approval_events (approval_id, event, actor, at) VALUES (?1, ?2, ?3, ?4)",
        params![id, what, actor, now],
    )
    .map_err(q("approval event"))?;
    Ok(())
}

fn expire_in(tx: &rusqlite::Transaction<'_>, now: i64) -> Result<usize, ApprovalError> {
    let ids: Vec<i64> = tx
        .prepare_cached("SELECT id FROM approvals WHERE status = 'requested' AND expires_at <= ?1")
        .and_then(|mut s| s.query_map([now], |r| r.get(0))?.collect::<Result<Vec<_>, _>>())
        .map_err(q("due approvals"))?;
    for id in &ids {
        tx.execute(
            "UPDATE approvals SET status = 'expired', decided_at = ?2 WHERE id = ?1 AND status = 'requested'",
            params![id, now],
        )
        .map_err(q("expire approval"))?;
        event(tx, *id, "expired", "system", now)?;
    }
    Ok(ids.len())
}
