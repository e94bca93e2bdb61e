//! Reports on the home itself: its status item by item (`steward_core::status`) and what the
//! models cost (the usage ledger's report, `steward_core::llm::UsageReport`).

use crate::{FfiError, Steward};

/// One aggregated group of model requests.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct UsageGroup {
    /// The service, action, model or day (`YYYY-MM-DD`, UTC).
    pub key: String,
    /// Requests.
    pub requests: i64,
    /// Requests that did not end `ok`.
    pub failed: i64,
    /// Provider attempts (more than requests when fallbacks happened).
    pub attempts: i64,
    /// Input tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// Cache-read tokens.
    pub cache_read_tokens: i64,
    /// Cache-write tokens.
    pub cache_write_tokens: i64,
    /// USD, from the configured rates.
    pub cost_usd: f64,
    /// Mean latency, ms.
    pub mean_latency_ms: f64,
}

impl From<steward_core::llm::UsageGroup> for UsageGroup {
    fn from(g: steward_core::llm::UsageGroup) -> Self {
        Self {
            key: g.key,
            requests: g.requests,
            failed: g.failed,
            attempts: g.attempts,
            input_tokens: g.input_tokens,
            output_tokens: g.output_tokens,
            cache_read_tokens: g.cache_read_tokens,
            cache_write_tokens: g.cache_write_tokens,
            cost_usd: g.cost_usd,
            mean_latency_ms: g.mean_latency_ms,
        }
    }
}

/// Usage since an instant, by service, action, model and day.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct UsageReport {
    /// The window's start, Unix seconds.
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
    /// The tool calls of outside agents (MCP clients), by agent.
    pub by_agent: Vec<AgentUsage>,
}

/// The tool calls of one outside agent (an MCP client) in a window.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct AgentUsage {
    /// Its identity (`agent:mcp:<name>`).
    pub agent: String,
    /// Calls.
    pub calls: i64,
    /// Calls that ran.
    pub ran: i64,
    /// Calls answered "pending approval".
    pub pending: i64,
    /// Calls a person had declined.
    pub declined: i64,
    /// Calls the policy denied.
    pub denied: i64,
    /// Calls that failed.
    pub failed: i64,
    /// Mean latency, ms.
    pub mean_latency_ms: f64,
}

impl From<steward_core::llm::AgentUsage> for AgentUsage {
    fn from(a: steward_core::llm::AgentUsage) -> Self {
        Self {
            agent: a.agent,
            calls: a.calls,
            ran: a.ran,
            pending: a.pending,
            declined: a.declined,
            denied: a.denied,
            failed: a.failed,
            mean_latency_ms: a.mean_latency_ms,
        }
    }
}

impl From<steward_core::llm::UsageReport> for UsageReport {
    fn from(r: steward_core::llm::UsageReport) -> Self {
        let groups =
            |v: Vec<steward_core::llm::UsageGroup>| v.into_iter().map(Into::into).collect();
        Self {
            since: r.since,
            total: r.total.into(),
            unattributed: r.unattributed,
            unpriced: r.unpriced,
            by_service: groups(r.by_service),
            by_action: groups(r.by_action),
            by_model: groups(r.by_model),
            by_day: groups(r.by_day),
            by_agent: r.by_agent.into_iter().map(Into::into).collect(),
        }
    }
}

/// One item of the system status.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct StatusItem {
    /// `store.mirror`, `disk`, `index.lexical`, `embedder`, `ingest`, `watches`, `audit`,
    /// `journal`, …
    pub name: String,
    /// `unknown`, `ok`, `warning` or `error`.
    pub status: String,
    /// For a person.
    pub detail: String,
}

/// The status of a home: the worst state among its items, and the items in a fixed order.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct SystemStatus {
    /// `unknown`, `ok`, `warning` or `error`.
    pub status: String,
    /// Unix seconds.
    pub checked_at: i64,
    /// The items.
    pub items: Vec<StatusItem>,
}

impl From<steward_core::status::SystemStatus> for SystemStatus {
    fn from(s: steward_core::status::SystemStatus) -> Self {
        Self {
            status: s.status.as_str().to_owned(),
            checked_at: s.checked_at,
            items: s
                .items
                .into_iter()
                .map(|i| StatusItem {
                    name: i.name,
                    status: i.status.as_str().to_owned(),
                    detail: i.detail,
                })
                .collect(),
        }
    }
}

#[uniffi::export]
impl Steward {
    /// The status of this home, item by item (stores, disk, index, embedder, ingest, watches,
    /// audit, journal): what the launcher's status menu shows.
    pub fn status(&self) -> SystemStatus {
        self.handle().system_status().into()
    }

    /// What the models cost over a window: `since` is `7d`, `24h`, `90m`, `all`, a date or an
    /// RFC 3339 instant (anything else is `USAGE_BAD_SINCE`).
    pub fn usage(&self, since: String) -> Result<UsageReport, FfiError> {
        self.handle()
            .usage_report(&since, steward_core::time::now_secs())
            .map(Into::into)
            .map_err(|e| FfiError::from_core(&e))
    }
}
