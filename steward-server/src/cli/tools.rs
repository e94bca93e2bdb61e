//! `steward tools`: the tool inventory, and one call through the same permission order an
//! agent's call takes (preflight, policy, run or approval request).

use std::{path::PathBuf, sync::Arc};

use clap::Subcommand;
use steward_core::{ToolCall, policy::DecisionContext, tools::ToolOutcome};

use super::{Failure, json_line, open, usage};

/// Who a call from this command is, in the policy and the audit trail.
const CLI_AGENT: &str = "agent:cli";

#[derive(Debug, Subcommand)]
pub(super) enum ToolsCmd {
    /// Every tool: those that run here (effect, level, result budget) and those that cannot,
    /// with why.
    List {
        /// Print one JSON object (`available`, `unavailable`), schemas included.
        #[arg(long)]
        json: bool,
    },
    /// Call a tool as an agent would (`agent:cli`): a gated tool leaves an approval request
    /// (`steward approvals`), a denied one runs nothing.
    Call {
        /// The tool, `namespace.verb`.
        name: String,
        /// Its input, a JSON object.
        #[arg(default_value = "{}")]
        input: String,
        /// Print the outcome as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Run an approved request's tool with exactly the approved input.
    RunApproved {
        /// The approval id.
        id: i64,
        /// Print the result as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn tools(home: Option<PathBuf>, cmd: ToolsCmd) -> Result<(), Failure> {
    let toolbox = || -> Result<_, Failure> {
        Ok(steward_connectors::home::toolbox(Arc::new(open(home.clone())?))?)
    };
    match cmd {
        ToolsCmd::List { json } => {
            let inv = toolbox()?.inventory();
            if json {
                json_line(&inv);
                return Ok(());
            }
            for t in &inv.available {
                out!(
                    "{:<22} {:<12} {:<8} {:>6} chars  {}",
                    t.name,
                    t.effect.as_str(),
                    t.default_level.as_str(),
                    t.result_chars,
                    t.description
                );
            }
            for u in &inv.unavailable {
                out!("{:<22} unavailable: {}", u.name, u.reason);
            }
        }
        ToolsCmd::Call { name, input, json } => {
            let input: serde_json::Value = serde_json::from_str(&input)
                .map_err(|e| usage(format!("the input is not JSON: {e}")))?;
            let tb = toolbox()?;
            let call = ToolCall { actor: CLI_AGENT, chat: None, tool: &name, input: &input };
            let outcome = tb.call(&call, &DecisionContext::default())?;
            if json {
                json_line(&outcome);
                return Ok(());
            }
            match outcome {
                ToolOutcome::Ran { result, .. } => out!("{}", result.text),
                ToolOutcome::AwaitingApproval { approval } => out!(
                    "approval {} requested ({}): {} — decide with `steward approvals`, then \
                     `steward tools run-approved {}`",
                    approval.id,
                    approval.level.as_str(),
                    approval.summary,
                    approval.id
                ),
                ToolOutcome::Denied { reason } => {
                    out!("denied: {}", serde_json::to_string(&reason).unwrap_or_default());
                }
            }
        }
        ToolsCmd::RunApproved { id, json } => {
            let result = toolbox()?.run_approved(id, CLI_AGENT)?;
            if json {
                json_line(&result);
            } else {
                out!("{}", result.text);
            }
        }
    }
    Ok(())
}
