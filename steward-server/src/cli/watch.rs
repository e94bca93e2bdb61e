//! `steward watch …`: durable watches over the registered sources (`time`, `train`).

use std::path::PathBuf;

use clap::Subcommand;
use steward_core::{
    WatchProposal,
    watch::{WatchDefinition, WatchEventQuery, WatchQuery, WatchSummary},
};

use super::{Failure, json_line, open, usage};

/// Who proposes a definition file's grants: the person approves them as a separate step.
const CLI_AGENT: &str = "agent:cli";

#[derive(Debug, Subcommand)]
pub(super) enum WatchCmd {
    /// Create a watch from a JSON definition (`-` reads stdin): source, resource_ref,
    /// instruction, rules, optional expires_at and chat.
    Create {
        /// The definition.
        file: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Watches, newest first.
    List {
        /// Only this state: active, stopped, expired, completed.
        #[arg(long)]
        status: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop a watch (idempotent; only an active watch changes).
    Stop {
        /// The watch id.
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run one poll cycle now.
    Poll {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The granted actions of an event and their recorded runs.
    Actions {
        /// The event id.
        event: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Queued events, oldest first.
    Events {
        /// Only events not delivered yet.
        #[arg(long)]
        pending: bool,
        /// Only this watch's.
        #[arg(long = "watch", value_name = "ID")]
        watch_id: Option<i64>,
        /// At most this many (1..=100).
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

fn line(w: &WatchSummary) {
    out!(
        "#{} {} {} {} ({} rules) \"{}\"{}",
        w.id,
        w.status,
        w.source,
        w.resource_ref,
        w.rules.len(),
        w.instruction,
        w.last_error.as_ref().map(|e| format!(" last error: {e}")).unwrap_or_default()
    );
}

pub(super) fn watch(home: Option<PathBuf>, cmd: WatchCmd) -> Result<(), Failure> {
    let steward = open(home)?;
    match cmd {
        WatchCmd::Create { file, json } => {
            let text = if file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())
            } else {
                std::fs::read_to_string(&file)
            }
            .map_err(|e| usage(format!("cannot read {}: {e}", file.display())))?;
            let def: WatchDefinition = serde_json::from_str(&text)
                .map_err(|e| usage(format!("{} is not a watch definition: {e}", file.display())))?;
            let proposal = steward.propose_watch(&def, CLI_AGENT)?;
            match &proposal {
                _ if json => json_line(&proposal),
                WatchProposal::Started(w) => line(w),
                WatchProposal::NeedsApproval(a) => {
                    out!("approval #{} requested: {}", a.id, a.summary);
                    out!(
                        "the watch starts once a person approves: steward approvals approve {}",
                        a.id
                    );
                }
            }
        }
        WatchCmd::List { status, json } => {
            let page = steward.list_watches(&WatchQuery {
                status: status
                    .map(|s| s.parse().map_err(steward_core::watch::WatchError::from))
                    .transpose()?,
                limit: Some(100),
                ..WatchQuery::default()
            })?;
            if json {
                json_line(&page);
            } else if page.is_empty() {
                out!("no watches");
            } else {
                page.iter().for_each(line);
            }
        }
        WatchCmd::Stop { id, json } => {
            let w = steward.stop_watch(id)?;
            if json { json_line(&w) } else { line(&w) }
        }
        WatchCmd::Poll { json } => {
            let r = steward.poll_watches(None)?;
            if json {
                json_line(&r);
            } else {
                out!(
                    "checked {}, failed {}, expired {}, queued {}, completed {}; next poll in {} s",
                    r.checked,
                    r.failed,
                    r.expired,
                    r.queued,
                    r.completed,
                    r.next_poll_secs
                );
            }
        }
        WatchCmd::Actions { event, json } => {
            let offered = steward.watch_granted_actions(event)?;
            let runs = steward.watch_action_runs(event)?;
            if json {
                json_line(&serde_json::json!({"granted": offered, "runs": runs}));
            } else if offered.is_empty() {
                out!("event {event} grants no action");
            } else {
                for a in &offered {
                    out!(
                        "{} {} {}{}{}",
                        a.rule_id,
                        a.tool,
                        a.arguments,
                        if a.open_fields.is_empty() {
                            String::new()
                        } else {
                            format!(" (to choose: {})", a.open_fields.join(", "))
                        },
                        if a.claimed { " [claimed]" } else { "" }
                    );
                }
                for r in &runs {
                    out!(
                        "run #{} {} {} {}",
                        r.id,
                        r.action_key,
                        r.status,
                        r.outcome.as_deref().unwrap_or("")
                    );
                }
            }
        }
        WatchCmd::Events { pending, watch_id, limit, json } => {
            let q = WatchEventQuery {
                pending,
                watch_id,
                limit: Some(limit),
                ..WatchEventQuery::default()
            };
            let events = steward.watch_events(&q)?;
            if json {
                json_line(&events);
            } else if events.is_empty() {
                out!("no events");
            } else {
                for e in &events {
                    out!(
                        "#{} watch {} {} {} [{}] {}",
                        e.id,
                        e.watch_id,
                        e.status,
                        e.event.kind,
                        e.matched_rules.join(","),
                        e.notification.as_deref().unwrap_or(&e.event.fallback_text)
                    );
                }
            }
        }
    }
    Ok(())
}
