//! The usage ledger (`usage.db`): one terminal row per request with its attribution, tokens by
//! type, latency, outcome and cost; the provider attempts beside it, without tokens, so a
//! fallback never counts twice. Missing attribution is stored as `unknown` and surfaced.

use std::path::Path;

use rusqlite::params;
use serde::Serialize;

use crate::{
    Limits,
    error::{ErrorKind, StewardError},
    store::{Database, Migration, OpenOptions, Schema, StoreError},
};

/// What a missing service or action is recorded as.
pub const UNKNOWN: &str = "unknown";
/// Groups one report returns per dimension.
/// Fixed (not a setting).
pub const MAX_USAGE_GROUPS: usize = 200;

const SCHEMA: Schema = Schema {
    name: "usage",
    migrations: &[
        Migration {
            version: 1,
            name: "usage",
            sql: include_str!("../../migrations/usage/001_usage.sql"),
        },
        Migration {
            version: 2,
            name: "attempt diagnostics",
            sql: include_str!("../../migrations/usage/002_attempt_diagnostics.sql"),
        },
        Migration {
            version: 3,
            name: "client calls",
            sql: include_str!("../../migrations/usage/003_client_calls.sql"),
        },
    ],
};

/// A finished request, as the client records it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    /// Unix seconds, when it started.
    pub at: i64,
    /// Service (None → `unknown`).
    pub service: Option<String>,
    /// Action (None → `unknown`).
    pub action: Option<String>,
    /// The capability asked for.
    pub capability: String,
    /// The target that answered, or the last tried.
    pub target: Option<String>,
    /// Its model.
    pub model: Option<String>,
    /// `ok`, `failed`, `interrupted` or `deadline`.
    pub outcome: &'static str,
    /// Streamed or not.
    pub streamed: bool,
    /// Tokens.
    pub usage: super::TokenUsage,
    /// Millionths of a USD.
    pub cost_micros: i64,
    /// Whether the model had rates.
    pub priced: bool,
    /// Wall time, ms.
    pub latency_ms: i64,
    /// The last error.
    pub error: Option<String>,
}

/// One provider attempt of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    /// Target name.
    pub target: String,
    /// Its model.
    pub model: String,
    /// HTTP status, when one came back.
    pub status: Option<u16>,
    /// `ok` or `failed`.
    pub outcome: &'static str,
    /// Wall time, ms.
    pub latency_ms: i64,
    /// Why it failed.
    pub error: Option<String>,
    /// How the answer was asked for: [`STREAM_NONE`], [`STREAM_NATIVE`] or
    /// [`STREAM_SYNTHETIC`].
    pub stream_mode: &'static str,
    /// From sending the request to the response's headers, ms (absent without a response).
    pub headers_ms: Option<i64>,
}

/// An attempt that asked for a whole answer.
pub const STREAM_NONE: &str = "none";
/// An attempt that read a native SSE stream.
pub const STREAM_NATIVE: &str = "native";
/// An attempt that asked for a stream and re-emitted a whole answer to the caller as deltas
/// (the target answered with JSON, or refused to stream and was asked again without).
pub const STREAM_SYNTHETIC: &str = "synthetic";

/// One recorded attempt, as [`UsageLedger::attempts`] reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRow {
    /// Target name.
    pub target: String,
    /// HTTP status, when one came back.
    pub status: Option<u16>,
    /// `ok` or `failed`.
    pub outcome: String,
    /// `none`, `native` or `synthetic`.
    pub stream_mode: String,
    /// Time to the response's headers, ms.
    pub headers_ms: Option<i64>,
}

/// The start of a report window: `7d`, `24h`, `90m` before `now`, `all`, or an instant
/// (`YYYY-MM-DD` or RFC 3339). Unix seconds.
pub fn since(text: &str, now: i64) -> Result<i64, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("all") {
        return Ok(0);
    }
    let unit = |suffix: char, secs: i64| {
        t.strip_suffix(suffix)
            .and_then(|n| n.parse::<i64>().ok())
            .filter(|n| (1..=100_000).contains(n))
            .map(|n| now - n * secs)
    };
    unit('d', 86_400).or_else(|| unit('h', 3_600)).or_else(|| unit('m', 60)).map_or_else(
        || {
            crate::time::parse_date(t)
                .map_err(|_| format!("since {t:?}: use 7d, 24h, 90m, all, YYYY-MM-DD or RFC 3339"))
        },
        Ok,
    )
}

/// Errors of a usage report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// The window is not one [`since`] reads.
    #[error("{0}")]
    BadSince(String),
    /// The ledger could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StewardError for UsageError {
    fn code(&self) -> &'static str {
        match self {
            Self::BadSince(_) => "USAGE_BAD_SINCE",
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::BadSince(_) => ErrorKind::InvalidInput,
            Self::Store(e) => e.kind(),
        }
    }
}

/// One aggregated group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct UsageGroup {
    /// The service, action, model or day (`YYYY-MM-DD`, UTC).
    pub key: String,
    /// Requests (terminal rows).
    pub requests: i64,
    /// Requests that did not end `ok`.
    pub failed: i64,
    /// Provider attempts (≥ requests when fallbacks happened).
    pub attempts: i64,
    /// Tokens.
    pub input_tokens: i64,
    /// Tokens.
    pub output_tokens: i64,
    /// Tokens.
    pub cache_read_tokens: i64,
    /// Tokens.
    pub cache_write_tokens: i64,
    /// USD.
    pub cost_usd: f64,
    /// Mean latency, ms.
    pub mean_latency_ms: f64,
}

/// The tool calls of one outside agent (an MCP client) in a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct AgentUsage {
    /// Its identity (`agent:mcp:<name>`, with `@device-N` over HTTP with a device's token).
    pub agent: String,
    /// Calls.
    pub calls: i64,
    /// Calls that ran (allowed, or approved and run).
    pub ran: i64,
    /// Calls answered "pending approval".
    pub pending: i64,
    /// Calls a person had declined.
    pub declined: i64,
    /// Calls the policy denied.
    pub denied: i64,
    /// Calls that failed (the tool, or a store).
    pub failed: i64,
    /// Mean latency, ms.
    pub mean_latency_ms: f64,
}

/// A finished call of an outside agent, as the toolbox records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCallRecord<'a> {
    /// Unix seconds.
    pub at: i64,
    /// The agent's identity.
    pub agent: &'a str,
    /// The tool.
    pub tool: &'a str,
    /// `ran`, `pending`, `declined`, `denied` or `failed`.
    pub outcome: &'static str,
    /// Wall time, ms.
    pub latency_ms: i64,
}

/// Usage since an instant, by service, action, model and day.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct UsageReport {
    /// Unix seconds.
    pub since: i64,
    /// Everything.
    pub total: UsageGroup,
    /// Requests that came without a service or action (recorded as `unknown`).
    pub unattributed: i64,
    /// Requests whose model has no configured rates (their cost counts as 0).
    pub unpriced: i64,
    /// By service.
    pub by_service: Vec<UsageGroup>,
    /// By action.
    pub by_action: Vec<UsageGroup>,
    /// By model.
    pub by_model: Vec<UsageGroup>,
    /// By UTC day.
    pub by_day: Vec<UsageGroup>,
    /// The tool calls of outside agents (MCP clients), by agent, most calls first.
    pub by_agent: Vec<AgentUsage>,
}

/// The ledger of a home, opened on its first record or read — not when the home is opened —
/// and shared by everything that records into it (the chat client, the embedder, the facade).
#[derive(Debug)]
pub struct SharedLedger {
    home: std::path::PathBuf,
    limits: Limits,
    cell: std::sync::OnceLock<std::sync::Arc<UsageLedger>>,
    opening: std::sync::Mutex<()>,
}

impl SharedLedger {
    /// The ledger of `home`, not yet opened.
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn new(home: &Path, limits: &Limits) -> Self {
        Self {
            home: home.to_owned(),
            limits: limits.clone(),
            cell: std::sync::OnceLock::new(),
            opening: std::sync::Mutex::new(()),
        }
    }

    /// The ledger, opened now if this is the first use (one opener at a time).
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn get(&self) -> Result<&std::sync::Arc<UsageLedger>, StoreError> {
        if let Some(l) = self.cell.get() {
            return Ok(l);
        }
        let _opening = self.opening.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(l) = self.cell.get() {
            return Ok(l);
        }
        let opened = std::sync::Arc::new(UsageLedger::open(&self.home, &self.limits)?);
        Ok(self.cell.get_or_init(|| opened))
    }
}

/// The ledger of one home.
#[derive(Debug)]
pub struct UsageLedger {
    db: Database,
}

fn q(ctx: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::query(ctx, e)
}

fn clip(s: &Option<String>, n: usize) -> Option<String> {
    s.as_ref().map(|t| t.chars().take(n).collect())
}

impl UsageLedger {
    /// Opens (creating) `<home>/usage.db`.
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn open(home: &Path, limits: &Limits) -> Result<Self, StoreError> {
        let db =
            Database::open(&home.join("usage.db"), &SCHEMA, OpenOptions::small_writes(limits))?;
        Ok(Self { db })
    }

    /// Records a finished request and its attempts in one transaction; returns its id.
    pub fn record(&self, r: &RequestRecord, attempts: &[AttemptRecord]) -> Result<i64, StoreError> {
        let name = |v: &Option<String>| {
            v.as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| s.chars().take(100).collect::<String>())
        };
        let (service, action) = (name(&r.service), name(&r.action));
        let attributed = service.is_some() && action.is_some();
        let to_i = |x: u64| i64::try_from(x).unwrap_or(i64::MAX);
        self.db.write(|tx| {
            tx.execute(
                "INSERT INTO requests (at, service, action, attributed, capability, target, model,
                    outcome, streamed, input_tokens, output_tokens, cache_read_tokens,
                    cache_write_tokens, cost_micros, priced, latency_ms, attempts, error)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
                params![
                    r.at,
                    service.as_deref().unwrap_or(UNKNOWN),
                    action.as_deref().unwrap_or(UNKNOWN),
                    attributed,
                    r.capability,
                    r.target,
                    r.model,
                    r.outcome,
                    r.streamed,
                    to_i(r.usage.input),
                    to_i(r.usage.output),
                    to_i(r.usage.cache_read),
                    to_i(r.usage.cache_write),
                    r.cost_micros,
                    r.priced,
                    r.latency_ms,
                    i64::try_from(attempts.len()).unwrap_or(i64::MAX),
                    clip(&r.error, 500),
                ],
            )
            .map_err(q("record request"))?;
            let id = tx.last_insert_rowid();
            for (n, a) in attempts.iter().enumerate() {
                tx.execute(
                    "INSERT INTO attempts (request_id, n, target, model, status, outcome, latency_ms, error,
                        stream_mode, headers_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                    params![
                        id,
                        i64::try_from(n + 1).unwrap_or(i64::MAX),
                        a.target,
                        a.model,
                        a.status,
                        a.outcome,
                        a.latency_ms,
                        clip(&a.error, 500),
                        a.stream_mode,
                        a.headers_ms
                    ],
                )
                .map_err(q("record attempt"))?;
            }
            Ok(id)
        })
    }

    /// Records an outside agent's tool call (names cut to 100 characters).
    pub fn record_client_call(&self, r: &ClientCallRecord<'_>) -> Result<(), StoreError> {
        let cut = |s: &str| s.chars().take(100).collect::<String>();
        self.db.write(|tx| {
            tx.execute(
                "INSERT INTO client_calls (at, agent, tool, outcome, latency_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![r.at, cut(r.agent), cut(r.tool), r.outcome, r.latency_ms],
            )
            .map_err(q("record client call"))?;
            Ok(())
        })
    }

    fn by_agent(&self, since: i64) -> Result<Vec<AgentUsage>, StoreError> {
        let sql = format!(
            "SELECT agent, count(*), sum(outcome = 'ran'), sum(outcome = 'pending'),
                sum(outcome = 'declined'), sum(outcome = 'denied'), sum(outcome = 'failed'),
                avg(latency_ms)
             FROM client_calls WHERE at >= ?1 GROUP BY agent ORDER BY count(*) DESC, agent
             LIMIT {MAX_USAGE_GROUPS}"
        );
        self.db.read(|c| {
            c.prepare(&sql)
                .and_then(|mut s| {
                    s.query_map([since], |r| {
                        Ok(AgentUsage {
                            agent: r.get(0)?,
                            calls: r.get(1)?,
                            ran: r.get(2)?,
                            pending: r.get(3)?,
                            declined: r.get(4)?,
                            denied: r.get(5)?,
                            failed: r.get(6)?,
                            mean_latency_ms: r.get::<_, Option<f64>>(7)?.unwrap_or(0.0),
                        })
                    })?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(q("usage by agent"))
        })
    }

    /// The attempts of request `id`, in order.
    pub fn attempts(&self, id: i64) -> Result<Vec<AttemptRow>, StoreError> {
        self.db.read(|c| {
            c.prepare_cached(
                "SELECT target, status, outcome, stream_mode, headers_ms FROM attempts
                 WHERE request_id = ?1 ORDER BY n",
            )
            .and_then(|mut s| {
                s.query_map([id], |r| {
                    Ok(AttemptRow {
                        target: r.get(0)?,
                        status: r.get(1)?,
                        outcome: r.get(2)?,
                        stream_mode: r.get(3)?,
                        headers_ms: r.get(4)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(q("attempts"))
        })
    }

    /// Usage since `since` (Unix seconds), by service, action, model and day.
    pub fn report(&self, since: i64) -> Result<UsageReport, StoreError> {
        let group = |key: &str| -> Result<Vec<UsageGroup>, StoreError> {
            let sql = format!(
                "SELECT {key} AS k, count(*), sum(outcome != 'ok'), sum(attempts), sum(input_tokens),
                    sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens),
                    sum(cost_micros), avg(latency_ms)
                 FROM requests WHERE at >= ?1 GROUP BY k ORDER BY sum(cost_micros) DESC, count(*) DESC, k
                 LIMIT {MAX_USAGE_GROUPS}"
            );
            self.db.read(|c| {
                c.prepare(&sql)
                    .and_then(|mut s| s.query_map([since], row)?.collect::<Result<Vec<_>, _>>())
                    .map_err(q("usage report"))
            })
        };
        let total = group("'all'")?
            .pop()
            .unwrap_or_else(|| UsageGroup { key: "all".into(), ..UsageGroup::default() });
        let (unattributed, unpriced) = self.db.read(|c| {
            c.query_row(
                "SELECT coalesce(sum(attributed = 0), 0), coalesce(sum(priced = 0), 0) FROM requests WHERE at >= ?1",
                [since],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(q("usage attribution"))
        })?;
        Ok(UsageReport {
            since,
            total,
            unattributed,
            unpriced,
            by_service: group("service")?,
            by_action: group("action")?,
            by_model: group("coalesce(model, 'none')")?,
            by_day: group("date(at, 'unixepoch')")?,
            by_agent: self.by_agent(since)?,
        })
    }
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<UsageGroup> {
    #[allow(clippy::cast_precision_loss)]
    let cost = r.get::<_, Option<i64>>(8)?.unwrap_or(0) as f64 / 1_000_000.0;
    Ok(UsageGroup {
        key: r.get(0)?,
        requests: r.get(1)?,
        failed: r.get::<_, Option<i64>>(2)?.unwrap_or(0),
        attempts: r.get::<_, Option<i64>>(3)?.unwrap_or(0),
        input_tokens: r.get::<_, Option<i64>>(4)?.unwrap_or(0),
        output_tokens: r.get::<_, Option<i64>>(5)?.unwrap_or(0),
        cache_read_tokens: r.get::<_, Option<i64>>(6)?.unwrap_or(0),
        cache_write_tokens: r.get::<_, Option<i64>>(7)?.unwrap_or(0),
        cost_usd: cost,
        mean_latency_ms: r.get::<_, Option<f64>>(9)?.unwrap_or(0.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_ledger_is_upgraded_and_keeps_its_attempts() {
        let dir = tempfile::tempdir().unwrap();
        {
            let c = rusqlite::Connection::open(dir.path().join("usage.db")).unwrap();
            c.execute_batch(include_str!("../../migrations/usage/001_usage.sql")).unwrap();
            c.execute_batch(
                "INSERT INTO requests (at, service, action, attributed, capability, outcome,
                     streamed, latency_ms, attempts) VALUES (1, 's', 'a', 1, 'tier-1', 'ok', 0, 5, 1);
                 INSERT INTO attempts (request_id, n, target, model, status, outcome, latency_ms)
                     VALUES (1, 1, 'cloud', 'big', 200, 'ok', 5);
                 PRAGMA user_version = 1;",
            )
            .unwrap();
        }
        let ledger = UsageLedger::open(dir.path(), &Limits::default()).unwrap();
        let old = ledger.attempts(1).unwrap();
        assert_eq!(
            old,
            [AttemptRow {
                target: "cloud".into(),
                status: Some(200),
                outcome: "ok".into(),
                stream_mode: "none".into(),
                headers_ms: None,
            }]
        );
        let attempt = AttemptRecord {
            target: "local".into(),
            model: "small".into(),
            status: Some(200),
            outcome: "ok",
            latency_ms: 9,
            error: None,
            stream_mode: STREAM_SYNTHETIC,
            headers_ms: Some(4),
        };
        let record = RequestRecord {
            at: 2,
            service: None,
            action: None,
            capability: "tier-4".into(),
            target: Some("local".into()),
            model: Some("small".into()),
            outcome: "ok",
            streamed: true,
            usage: crate::llm::TokenUsage::default(),
            cost_micros: 0,
            priced: false,
            latency_ms: 9,
            error: None,
        };
        let id = ledger.record(&record, &[attempt]).unwrap();
        let new = ledger.attempts(id).unwrap();
        assert_eq!((new[0].stream_mode.as_str(), new[0].headers_ms), ("synthetic", Some(4)));
        assert_eq!(ledger.report(0).unwrap().total.requests, 2);
    }
}
