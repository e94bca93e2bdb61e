//! `shell.run` (the read-only allow-list, without asking) and `shell.exec` (anything else,
//! gated: the approval binds the program's path and SHA-256). See [`crate::shell`]. A
//! command's output is data for the model, never instructions.

use std::sync::Arc;

use serde_json::json;

use super::{ExecError, SourceRef, ToolExecutor, ToolOutput, ToolRun, Typed};
use crate::{
    Steward, StewardError as _,
    policy::catalog::{ShellExecInput, ShellRunInput},
    shell::{self, Ran},
};

pub(super) fn tools() -> Vec<(&'static str, Arc<dyn ToolExecutor>)> {
    vec![
        (
            "shell.run",
            Arc::new(Typed::new(
                |i: &ShellRunInput| format!("Run {}", i.argv.join(" ")),
                run_read_only,
            )),
        ),
        (
            "shell.exec",
            Arc::new(
                Typed::new(
                    |i: &ShellExecInput| {
                        format!(
                            "Run {} in {} (program {}, sha256 {})",
                            i.argv.join(" "),
                            i.cwd.as_deref().unwrap_or("the first shared folder"),
                            i.program.as_deref().unwrap_or("?"),
                            i.program_sha256
                                .as_deref()
                                .map_or_else(|| "?".to_owned(), |h| h.chars().take(16).collect())
                        )
                    },
                    run_gated,
                )
                .check(bind_program),
            ),
        ),
    ]
}

/// Fills the program and its hash into the input the person approves.
fn bind_program(steward: &Steward, mut i: ShellExecInput) -> Result<ShellExecInput, String> {
    let c = shell::check_any(steward, &i.argv, i.cwd.as_deref())
        .map_err(|e| format!("{}: {e}", e.code()))?;
    i.program = Some(c.program.to_string_lossy().into_owned());
    i.program_sha256 = Some(c.program_sha256);
    i.cwd = Some(c.cwd.to_string_lossy().into_owned());
    Ok(i)
}

fn output(run: &ToolRun<'_>, r: Ran) -> ToolOutput {
    let status = match (r.timed_out, r.exit_code) {
        (true, _) => "stopped at the time limit".to_owned(),
        (false, Some(c)) => format!("exit {c}"),
        (false, None) => "ended by a signal".to_owned(),
    };
    let budget = run.budget_chars.saturating_sub(300);
    let mut out: String = r.stdout.chars().take(budget).collect();
    let cut = r.truncated || out.len() < r.stdout.len();
    if !r.stderr.trim().is_empty() {
        let left = budget.saturating_sub(out.chars().count());
        out.push_str("\n[stderr]\n");
        out.extend(r.stderr.chars().take(left));
    }
    ToolOutput {
        text: format!(
            "$ {} (in {})\n{status}{}\n{out}",
            r.argv.join(" "),
            r.cwd.display(),
            if cut { ", output cut at the bound" } else { "" }
        ),
        data: json!({
            "argv": r.argv,
            "cwd": r.cwd,
            "exit_code": r.exit_code,
            "timed_out": r.timed_out,
            "truncated": cut,
        }),
        sources: vec![SourceRef::File { path: r.cwd.to_string_lossy().into_owned() }],
        ..ToolOutput::default()
    }
}

fn run_read_only(run: &ToolRun<'_>, i: ShellRunInput) -> Result<ToolOutput, ExecError> {
    let c = shell::check_read_only(run.steward, &i.argv, i.cwd.as_deref())?;
    let hash = c.program_sha256.clone();
    Ok(output(run, shell::run(run.steward, &c, &hash)?))
}

fn run_gated(run: &ToolRun<'_>, i: ShellExecInput) -> Result<ToolOutput, ExecError> {
    let c = shell::check_any(run.steward, &i.argv, i.cwd.as_deref())?;
    let (Some(program), Some(approved)) = (&i.program, &i.program_sha256) else {
        return Err(ExecError::invalid("the approved call names no program hash"));
    };
    if c.program.to_string_lossy() != program.as_str() {
        return Err(shell::ShellError::ProgramChanged {
            path: c.program.clone(),
            now: c.program_sha256,
        }
        .into());
    }
    Ok(output(run, shell::run(run.steward, &c, approved)?))
}
