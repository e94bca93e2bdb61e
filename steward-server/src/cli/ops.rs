//! `steward ops …`: the write journal; confirmation passes and scheduled sends.

use std::path::PathBuf;

use clap::Subcommand;
use steward_connectors::mail::smtp::{SmtpConfig, SmtpSender};
use steward_core::{
    journal::{OperationSummary, OpsQuery},
    time::now_secs,
};

use super::{Failure, json_line, open};

#[derive(Debug, Subcommand)]
pub(super) enum OpsCmd {
    /// Journaled operations, newest first.
    List {
        /// Only this state: scheduled, started, backend_returned, unknown, failed, confirmed,
        /// needs_review, retry_exhausted.
        #[arg(long)]
        state: Option<String>,
        /// Skip this many.
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// At most this many (1..=100).
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One operation with its complete input and evidence.
    Show {
        /// The operation id.
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One confirmation pass: look for each unconfirmed send's copy in the mirrored Sent
    /// mailbox (mirror it first with `steward index mail`). Never sends.
    Confirm {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Send the scheduled mail that is due (each row claimed once).
    SendDue {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

fn line(op: &OperationSummary) {
    out!(
        "#{} {} {} attempts {} checks {} key {}{}",
        op.id,
        op.state.as_str(),
        op.kind,
        op.attempts,
        op.confirmation_attempts,
        op.idempotency_key,
        op.error.as_ref().map(|e| format!(" error: {e}")).unwrap_or_default()
    );
}

fn json_or<T: serde::Serialize>(v: &T, json: bool, text: impl FnOnce(&T) -> String) {
    if json {
        json_line(v);
    } else {
        out!("{}", text(v));
    }
}

pub(super) fn ops(home: Option<PathBuf>, cmd: OpsCmd) -> Result<(), Failure> {
    let steward = open(home)?;
    match cmd {
        OpsCmd::Confirm { json } => {
            let now = now_secs();
            let r = steward.confirm_pass(now)?;
            let targets = steward_connectors::home::calendar_targets(steward.home())?;
            let c = steward.confirm_calendar_writes(&targets, now)?;
            // The mail pass's fields, and the calendar pass beside them.
            let mut out = serde_json::to_value(&r).unwrap_or_default();
            if let Some(m) = out.as_object_mut() {
                m.insert("calendar".into(), serde_json::to_value(&c).unwrap_or_default());
            }
            json_or(&out, json, |_| {
                format!(
                    "mail: checked {}: confirmed {}, not yet seen {}, ambiguous {}, now needing review {}\n\
                     calendar: checked {}: confirmed {}, not yet seen {}, now retry_exhausted {}",
                    r.checked,
                    r.confirmed,
                    r.pending,
                    r.ambiguous,
                    r.needs_review,
                    c.checked,
                    c.confirmed,
                    c.pending,
                    c.exhausted
                )
            });
        }
        OpsCmd::SendDue { json } => {
            let smtp = SmtpSender::new(SmtpConfig::load(steward.home())?)?;
            let r = steward.send_due(&smtp, now_secs())?;
            json_or(&r, json, |r| {
                format!(
                    "claimed {}: accepted {}, failed {}, outcome unknown {}",
                    r.claimed, r.backend_returned, r.failed, r.unknown
                )
            });
        }
        OpsCmd::List { state, offset, limit, json } => {
            let q = OpsQuery { state, offset, limit: Some(limit) };
            let page = steward.query_write_operations(&q)?;
            if json {
                json_line(&page);
            } else if page.is_empty() {
                out!("no operations");
            } else {
                page.iter().for_each(line);
            }
        }
        OpsCmd::Show { id, json } => {
            let op = steward.read_write_operation(id)?;
            if json {
                json_line(&op);
            } else {
                line(&(&op).into());
                out!("  input: {}", steward_core::approval::canonical_json(&op.input));
                out!("  expected: {}", op.expected);
                if let Some(e) = &op.evidence {
                    out!("  evidence: {e}");
                }
            }
        }
    }
    Ok(())
}
