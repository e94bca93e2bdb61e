//! The audit trail (`audit.db`): every policy decision, approval request, resolution and
//! expiry (and, from later issues, journal, watch and ingest events), redacted before it is
//! written.
//!
//! Owns: the append-only `audit_events` table, redaction ([`redact`]), bounded queries. Never
//! does: block product work — a failed write is counted ([`AuditLog::failures`]) and logged,
//! and the caller carries on.

pub mod redact;

use std::{
    path::Path,
    sync::atomic::{AtomicU64, Ordering},
};

use rusqlite::params;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    Limits,
    error::{ErrorKind, StewardError},
    store::{Database, Migration, OpenOptions, Schema, StoreError},
};

/// Most rows one query returns.
/// Fixed (not a setting).
pub const MAX_AUDIT_PAGE: usize = 200;

const SCHEMA: Schema = Schema {
    name: "audit",
    migrations: &[Migration {
        version: 1,
        name: "events",
        sql: "CREATE TABLE audit_events (
                  id              INTEGER PRIMARY KEY,
                  at              INTEGER NOT NULL,
                  actor           TEXT NOT NULL,
                  event_type      TEXT NOT NULL,
                  risk            TEXT NOT NULL CHECK (risk IN ('low','medium','high')),
                  chat            TEXT,
                  tool            TEXT,
                  correlation_id  TEXT,
                  payload         TEXT NOT NULL      -- redacted JSON
              );
              CREATE INDEX audit_at ON audit_events (at);
              CREATE INDEX audit_type ON audit_events (event_type, at);",
    }],
};

/// How much an event matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Reads, expiries.
    Low,
    /// Gated requests, resolutions.
    Medium,
    /// Denials, refused agent attempts, destructive runs, policy changes.
    High,
}

impl Risk {
    fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

/// One event to record (the payload is redacted on the way in).
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent<'a> {
    /// Who: a person, `agent:<name>` or `system`.
    pub actor: &'a str,
    /// What happened (`policy.decision`, `approval.requested`, …).
    pub event_type: &'a str,
    /// How much it matters.
    pub risk: Risk,
    /// The chat or session.
    pub chat: Option<&'a str>,
    /// The tool.
    pub tool: Option<&'a str>,
    /// Ties events of one action together.
    pub correlation_id: Option<&'a str>,
    /// Details (redacted before insertion).
    pub payload: &'a Value,
    /// Unix seconds.
    pub at: i64,
}

/// A stored, redacted event.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct AuditRecord {
    /// Its id.
    pub id: i64,
    /// Unix seconds.
    pub at: i64,
    /// Who.
    pub actor: String,
    /// What.
    pub event_type: String,
    /// Risk.
    pub risk: String,
    /// Chat.
    pub chat: Option<String>,
    /// Tool.
    pub tool: Option<String>,
    /// Correlation id.
    pub correlation_id: Option<String>,
    /// The redacted payload.
    pub payload: Value,
}

/// Filters of [`AuditLog::query`]; all optional, combined with AND.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct AuditQuery {
    /// Actor.
    pub actor: Option<String>,
    /// Event type.
    pub event_type: Option<String>,
    /// Risk (`low`, `medium`, `high`).
    pub risk: Option<String>,
    /// Chat.
    pub chat: Option<String>,
    /// Tool.
    pub tool: Option<String>,
    /// At or after (Unix seconds).
    pub after: Option<i64>,
    /// Before (Unix seconds).
    pub before: Option<i64>,
    /// The redacted payload contains this (case-insensitive).
    pub text: Option<String>,
    /// Rows to skip.
    pub offset: usize,
    /// Rows to return (1..=[`MAX_AUDIT_PAGE`]; 0 means 50).
    #[schemars(range(max = 200))]
    pub limit: usize,
}

/// Errors of the audit trail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// A limit out of range.
    #[error("limit {0} is out of range (1..={MAX_AUDIT_PAGE})")]
    OutOfRange(usize),
    /// A risk filter other than low, medium, high.
    #[error("unknown risk {0:?}: expected low, medium or high")]
    BadRisk(String),
    /// A query that is not an [`AuditQuery`] (unknown field, wrong type).
    #[error("bad audit query: {0}")]
    BadQuery(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StewardError for AuditError {
    fn code(&self) -> &'static str {
        match self {
            Self::OutOfRange(_) => "LIMIT_OUT_OF_RANGE",
            Self::BadRisk(_) => "AUDIT_BAD_RISK",
            Self::BadQuery(_) => "AUDIT_BAD_QUERY",
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::OutOfRange(_) | Self::BadRisk(_) | Self::BadQuery(_) => ErrorKind::InvalidInput,
            Self::Store(e) => e.kind(),
        }
    }
}

impl AuditQuery {
    /// A query from its JSON form (what frontends receive).
    pub fn from_json(text: &str) -> Result<Self, AuditError> {
        serde_json::from_str(text).map_err(|e| AuditError::BadQuery(e.to_string()))
    }
}

/// The audit trail of one home.
#[derive(Debug)]
pub struct AuditLog {
    db: Database,
    failures: AtomicU64,
}

/// One row of a feed read from the trail: `(id, at, actor, event_type, payload)`.
pub(crate) type FeedRow = (i64, i64, String, String, Value);

impl AuditLog {
    /// Opens (creating) `<home>/audit.db`.
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn open(home: &Path, limits: &Limits) -> Result<Self, AuditError> {
        let db =
            Database::open(&home.join("audit.db"), &SCHEMA, OpenOptions::small_writes(limits))?;
        Ok(Self { db, failures: AtomicU64::new(0) })
    }

    /// Records `e` with its payload redacted. Never fails the caller: a write that fails is
    /// counted and logged, and `false` is returned.
    pub fn record(&self, e: &AuditEvent<'_>) -> bool {
        let r = redact::redactor();
        let payload = r.redact(e.payload).to_string();
        let mask = |s: Option<&str>| s.map(|s| r.mask_text(s));
        let result = self.db.write_autocommit(|conn| {
            conn.prepare_cached(
                "INSERT INTO audit_events (at, actor, event_type, risk, chat, tool, correlation_id, payload)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .and_then(|mut st| st.execute(params![
                    e.at,
                    r.mask_text(e.actor),
                    e.event_type,
                    e.risk.as_str(),
                    mask(e.chat),
                    mask(e.tool),
                    mask(e.correlation_id),
                    payload
                ]))
            .map_err(|err| StoreError::query("audit insert", err))?;
            Ok::<_, StoreError>(())
        });
        match result {
            Ok(()) => true,
            Err(err) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %err, "audit write failed; counted, work continues");
                false
            }
        }
    }

    /// Writes that failed since this handle opened.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The memory events (`memory.*`) after row `after`, oldest first, at most `limit`:
    /// `(id, at, actor, event_type, payload)`. A range of `event_type` (`memory.` up to
    /// `memory/`, the next character), so the type index is used and the rest of the trail is
    /// not scanned.
    pub(crate) fn memory_after(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<FeedRow>, AuditError> {
        Ok(self.db.read(|c| {
            c.prepare_cached(
                "SELECT id, at, actor, event_type, payload FROM audit_events
                 WHERE event_type >= 'memory.' AND event_type < 'memory/' AND id > ?1
                 ORDER BY id LIMIT ?2",
            )
            .and_then(|mut s| {
                s.query_map(params![after, i64::try_from(limit).unwrap_or(100)], |r| {
                    let payload: String = r.get(4)?;
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        serde_json::from_str(&payload).unwrap_or(Value::Null),
                    ))
                })?
                .collect()
            })
            .map_err(|e| StoreError::query("memory events", e))
        })?)
    }

    /// The newest row's id (0 when empty): where the memory feed stands.
    pub(crate) fn position(&self) -> Result<i64, AuditError> {
        Ok(self.db.read(|c| {
            c.query_row("SELECT coalesce(max(id), 0) FROM audit_events", [], |r| r.get(0))
                .map_err(|e| StoreError::query("audit position", e))
        })?)
    }

    /// A page of events, newest first.
    pub fn query(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>, AuditError> {
        let limit = if q.limit == 0 { 50 } else { q.limit };
        if limit > MAX_AUDIT_PAGE {
            return Err(AuditError::OutOfRange(limit));
        }
        if let Some(r) = q.risk.as_deref().filter(|r| !matches!(*r, "low" | "medium" | "high")) {
            return Err(AuditError::BadRisk(r.to_owned()));
        }
        let text = q.text.as_ref().map(|t| {
            let mut p = String::from("%");
            for c in t.to_lowercase().chars() {
                if matches!(c, '%' | '_' | '\\') {
                    p.push('\\');
                }
                p.push(c);
            }
            p.push('%');
            p
        });
        Ok(self.db.read(|c| {
            c.prepare_cached(
                "SELECT id, at, actor, event_type, risk, chat, tool, correlation_id, payload
                 FROM audit_events
                 WHERE (?1 IS NULL OR actor = ?1) AND (?2 IS NULL OR event_type = ?2)
                   AND (?3 IS NULL OR risk = ?3) AND (?4 IS NULL OR chat = ?4)
                   AND (?5 IS NULL OR tool = ?5) AND (?6 IS NULL OR at >= ?6)
                   AND (?7 IS NULL OR at < ?7)
                   AND (?8 IS NULL OR lower(payload) LIKE ?8 ESCAPE '\\')
                 ORDER BY id DESC LIMIT ?9 OFFSET ?10",
            )
            .and_then(|mut s| {
                s.query_map(
                    params![
                        q.actor,
                        q.event_type,
                        q.risk,
                        q.chat,
                        q.tool,
                        q.after,
                        q.before,
                        text,
                        i64::try_from(limit).unwrap_or(50),
                        i64::try_from(q.offset).unwrap_or(0)
                    ],
                    |r| {
                        let payload: String = r.get(8)?;
                        Ok(AuditRecord {
                            id: r.get(0)?,
                            at: r.get(1)?,
                            actor: r.get(2)?,
                            event_type: r.get(3)?,
                            risk: r.get(4)?,
                            chat: r.get(5)?,
                            tool: r.get(6)?,
                            correlation_id: r.get(7)?,
                            payload: serde_json::from_str(&payload)
                                .unwrap_or(Value::String(payload)),
                        })
                    },
                )?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|e| StoreError::query("audit query", e))
        })?)
    }
}
