//! `steward usage`: what the models cost, from the usage ledger (`usage.db`).

use std::path::PathBuf;

use clap::Args as ClapArgs;
use steward_core::{llm::UsageGroup, time::now_secs};

use super::{Failure, json_line, open, usage};

/// `steward usage [--since 7d] [--json]`.
#[derive(Debug, ClapArgs)]
pub(super) struct UsageArgs {
    /// The window: 7d, 24h, 90m, all, YYYY-MM-DD or an RFC 3339 instant.
    #[arg(long, default_value = "7d")]
    since: String,
    /// Print JSON: totals and groups by service, action, model and day, and outside agents' calls.
    #[arg(long)]
    json: bool,
}

fn table(title: &str, groups: &[UsageGroup]) {
    out!("{title}:");
    for g in groups {
        out!(
            "  {:<24} {:>6} req {:>4} failed {:>6} att  in {:>9} out {:>8} cache r/w {}/{}  ${:.4}  {:.0} ms",
            g.key,
            g.requests,
            g.failed,
            g.attempts,
            g.input_tokens,
            g.output_tokens,
            g.cache_read_tokens,
            g.cache_write_tokens,
            g.cost_usd,
            g.mean_latency_ms
        );
    }
}

pub(super) fn run(home: Option<PathBuf>, a: UsageArgs) -> Result<(), Failure> {
    // Checked before the home is opened (and perhaps created).
    let now = now_secs();
    steward_core::llm::since(&a.since, now).map_err(usage)?;
    let report = open(home)?.usage_report(&a.since, now)?;
    if a.json {
        json_line(&report);
        return Ok(());
    }
    table("total", std::slice::from_ref(&report.total));
    if report.unattributed > 0 {
        out!(
            "{} requests came without a service or action (counted as unknown)",
            report.unattributed
        );
    }
    if report.unpriced > 0 {
        out!("{} requests used models without configured rates (cost 0)", report.unpriced);
    }
    table("by service", &report.by_service);
    table("by action", &report.by_action);
    table("by model", &report.by_model);
    table("by day", &report.by_day);
    if !report.by_agent.is_empty() {
        out!("tool calls of outside agents (MCP clients):");
        for a in &report.by_agent {
            out!(
                "  {:<32} {:>6} calls {:>6} ran {:>4} pending {:>4} declined {:>4} denied {:>4} failed  {:.0} ms",
                a.agent,
                a.calls,
                a.ran,
                a.pending,
                a.declined,
                a.denied,
                a.failed,
                a.mean_latency_ms
            );
        }
    }
    Ok(())
}
