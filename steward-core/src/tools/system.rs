//! The tools over Steward's own state: watches, the write journal and model usage.

use std::sync::Arc;

use serde_json::json;

use super::{ExecError, SourceRef, ToolExecutor, ToolOutput, ToolRun, Typed, cursor, fitting};
use crate::{
    authority::WatchProposal,
    journal::{DEFAULT_OPS_PAGE, OpsQuery},
    policy::catalog::{OpsListInput, OpsShowInput, UsageSummaryInput, WatchesListInput},
    time::CivilTime,
    watch::{WatchDefinition, WatchQuery},
};

/// Watches one `watches.list` page holds.
/// Fixed (not a setting).
pub const WATCH_PAGE: usize = 20;
/// What `usage.summary` covers when the input does not say.
pub const USAGE_DEFAULT_SINCE: &str = "7d";

fn day(t: i64) -> String {
    CivilTime::from_unix(t).rfc3339()
}

pub(super) fn tools() -> Vec<(&'static str, Arc<dyn ToolExecutor>)> {
    vec![
        (
            "watches.list",
            Arc::new(Typed::new(|_: &WatchesListInput| "List watches".to_owned(), watches_list)),
        ),
        (
            "watches.propose",
            Arc::new(Typed::new(
                |d: &WatchDefinition| {
                    format!("Watch {} {} — \"{}\"", d.source, d.resource_ref, d.instruction)
                },
                watches_propose,
            )),
        ),
        (
            "ops.list",
            Arc::new(Typed::new(
                |_: &OpsListInput| "List journaled operations".to_owned(),
                ops_list,
            )),
        ),
        (
            "ops.show",
            Arc::new(Typed::new(|i: &OpsShowInput| format!("Show operation #{}", i.id), ops_show)),
        ),
        (
            "usage.summary",
            Arc::new(Typed::new(
                |i: &UsageSummaryInput| {
                    format!(
                        "Summarize usage since {}",
                        i.since.as_deref().unwrap_or(USAGE_DEFAULT_SINCE)
                    )
                },
                usage_summary,
            )),
        ),
    ]
}

fn page_text(
    header: &str,
    lines: &[String],
    offset: usize,
    full_page: bool,
    budget: usize,
) -> (String, usize, Option<usize>) {
    if lines.is_empty() {
        let none = if offset == 0 { "None." } else { "No more." };
        return (format!("{header}\n{none}"), 0, None);
    }
    let keep = fitting(lines, header.chars().count() + 40, budget);
    let next = if keep < lines.len() || full_page { Some(offset + keep) } else { None };
    let more = next.map_or_else(String::new, |n| format!("\n(more: cursor \"{n}\")"));
    (format!("{header}\n{}{more}", lines[..keep].join("\n")), keep, next)
}

fn watches_list(run: &ToolRun<'_>, i: WatchesListInput) -> Result<ToolOutput, ExecError> {
    let offset = cursor(i.cursor.as_deref())?;
    let q = WatchQuery { status: i.status, offset, limit: Some(WATCH_PAGE) };
    let watches = run.steward.watches()?.list(&q)?;
    let lines: Vec<String> = watches
        .iter()
        .map(|w| {
            let err =
                w.last_error.as_deref().map_or_else(String::new, |e| format!(" (last error: {e})"));
            format!(
                "#{} {} {} {} — \"{}\" until {}{err}",
                w.id,
                w.status,
                w.source,
                w.resource_ref,
                w.instruction,
                day(w.expires_at)
            )
        })
        .collect();
    let (text, keep, next) =
        page_text("Watches:", &lines, offset, watches.len() == WATCH_PAGE, run.budget_chars);
    let ids: Vec<i64> = watches[..keep].iter().map(|w| w.id).collect();
    Ok(ToolOutput {
        text,
        data: json!({ "ids": ids }),
        sources: ids.iter().map(|&id| SourceRef::Watch { id }).collect(),
        cursor: next.map(|n| n.to_string()),
        approval: None,
    })
}

fn watches_propose(run: &ToolRun<'_>, mut def: WatchDefinition) -> Result<ToolOutput, ExecError> {
    // The chat a watch reports to is the host's, never the model's.
    def.chat = run.chat.map(str::to_owned);
    match run.steward.propose_watch(&def, run.actor)? {
        WatchProposal::Started(w) => Ok(ToolOutput {
            text: format!(
                "Watch #{} started: {} {} until {}.",
                w.id,
                w.source,
                w.resource_ref,
                day(w.expires_at)
            ),
            data: json!({ "outcome": "started", "watch_id": w.id }),
            sources: vec![SourceRef::Watch { id: w.id }],
            ..ToolOutput::default()
        }),
        WatchProposal::NeedsApproval(a) => Ok(ToolOutput {
            text: format!(
                "Approval #{} requested: {} The watch starts only if the person approves.",
                a.id, a.summary
            ),
            data: json!({ "outcome": "needs_approval", "approval_id": a.id }),
            sources: vec![SourceRef::Approval { id: a.id }],
            approval: Some(a),
            ..ToolOutput::default()
        }),
    }
}

fn ops_list(run: &ToolRun<'_>, i: OpsListInput) -> Result<ToolOutput, ExecError> {
    let offset = cursor(i.cursor.as_deref())?;
    let q = OpsQuery { state: i.state, offset, limit: Some(DEFAULT_OPS_PAGE) };
    let ops = run.steward.query_write_operations(&q)?;
    let lines: Vec<String> = ops
        .iter()
        .map(|o| {
            let when = o.scheduled_for.map_or_else(String::new, |t| format!(" for {}", day(t)));
            let err = o.error.as_deref().map_or_else(String::new, |e| format!(" (error: {e})"));
            format!(
                "#{} {} {}{when}, created {}{err}",
                o.id,
                o.kind,
                o.state.as_str(),
                day(o.created_at)
            )
        })
        .collect();
    let (text, keep, next) = page_text(
        "Operations, newest first:",
        &lines,
        offset,
        ops.len() == DEFAULT_OPS_PAGE,
        run.budget_chars,
    );
    let ids: Vec<i64> = ops[..keep].iter().map(|o| o.id).collect();
    Ok(ToolOutput {
        text,
        data: json!({ "ids": ids }),
        sources: ids.iter().map(|&id| SourceRef::Operation { id }).collect(),
        cursor: next.map(|n| n.to_string()),
        approval: None,
    })
}

fn ops_show(run: &ToolRun<'_>, i: OpsShowInput) -> Result<ToolOutput, ExecError> {
    let op = run.steward.read_write_operation(i.id)?;
    let mut text = format!(
        "Operation #{} ({}) is {} after {} attempt(s); created {}, updated {}.",
        op.id,
        op.kind,
        op.state.as_str(),
        op.attempts,
        day(op.created_at),
        day(op.updated_at)
    );
    if let Some(t) = op.scheduled_for {
        text.push_str(&format!("\nScheduled for {}.", day(t)));
    }
    if let Some(a) = op.approval_id {
        text.push_str(&format!("\nApproved as request #{a}."));
    }
    if let Some(e) = &op.error {
        text.push_str(&format!("\nError: {e}"));
    }
    text.push_str(&format!("\nExpected: {}", op.expected));
    if let Some(ev) = &op.evidence {
        text.push_str(&format!("\nEvidence: {ev}"));
    }
    Ok(ToolOutput {
        text,
        data: json!({ "id": op.id, "kind": op.kind, "state": op.state, "approval_id": op.approval_id }),
        sources: vec![SourceRef::Operation { id: op.id }],
        ..ToolOutput::default()
    })
}

fn usage_summary(run: &ToolRun<'_>, i: UsageSummaryInput) -> Result<ToolOutput, ExecError> {
    let since = i.since.as_deref().unwrap_or(USAGE_DEFAULT_SINCE);
    let r = run.steward.usage_report(since, run.now)?;
    let t = &r.total;
    let mut text = format!(
        "Since {}: {} request(s), {} failed; {} input and {} output tokens; ${:.4}.",
        day(r.since),
        t.requests,
        t.failed,
        t.input_tokens,
        t.output_tokens,
        t.cost_usd
    );
    for (title, groups) in [("By service", &r.by_service), ("By model", &r.by_model)] {
        if groups.is_empty() {
            continue;
        }
        text.push_str(&format!("\n{title}:"));
        for g in groups.iter().take(10) {
            text.push_str(&format!("\n- {}: {} request(s), ${:.4}", g.key, g.requests, g.cost_usd));
        }
    }
    if r.unpriced > 0 {
        text.push_str(&format!(
            "\n{} request(s) had no configured rates (counted as $0).",
            r.unpriced
        ));
    }
    Ok(ToolOutput {
        text,
        data: json!({ "since": r.since, "requests": t.requests, "cost_usd": t.cost_usd }),
        sources: vec![SourceRef::Usage],
        ..ToolOutput::default()
    })
}
