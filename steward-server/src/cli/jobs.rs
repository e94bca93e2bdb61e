//! `steward jobs …`: the core's background runner from the command line.

use std::{path::PathBuf, sync::Arc};

use clap::Subcommand;
use steward_core::runner::{JobName, JobOutcome, JobReport, JobStatus};

use super::{Failure, json_line, open};

#[derive(Debug, Subcommand)]
pub(super) enum JobsCmd {
    /// Run the jobs: with --once every job that can run here once, in order (for cron), and
    /// exit non-zero when one failed; without it, on their schedule until Ctrl-C (what
    /// `steward serve` does while it serves).
    Run {
        /// One pass, then exit.
        #[arg(long)]
        once: bool,
        /// Only this job (with --once): mail-reconcile, mail-embed, watch-poll,
        /// watch-deliver, send-due, confirm-writes, approval-expiry, pim-sync, files-index.
        #[arg(long, value_name = "NAME", requires = "once")]
        job: Option<String>,
        /// Print one JSON object per run.
        #[arg(long)]
        json: bool,
    },
    /// Each job: configured or not, its interval and budget, its last run and the next.
    Status {
        /// Print one JSON array.
        #[arg(long)]
        json: bool,
    },
}

fn when(secs: Option<i64>) -> String {
    secs.map_or_else(|| "-".to_owned(), |s| steward_core::time::CivilTime::from_unix(s).rfc3339())
}

fn print_report(r: &JobReport, json: bool) {
    if json {
        json_line(r);
        return;
    }
    let what = match (&r.error, r.summary.is_empty()) {
        (Some(e), _) => format!("{}: {e}", r.error_code.as_deref().unwrap_or("FAILED")),
        (None, true) => "nothing to do".to_owned(),
        (None, false) => r.summary.clone(),
    };
    out!("{:<16} {:<11} {:>7.2}s  {what}", r.job.as_str(), r.outcome.as_str(), r.seconds);
}

fn print_status(s: &JobStatus) {
    let state = match (&s.unavailable, s.config.enabled, s.record.running) {
        (Some(why), _, _) => format!("not configured: {why}"),
        (None, false, _) => "disabled".to_owned(),
        (None, true, true) => format!("running since {}", when(s.record.last_started_at)),
        (None, true, false) => match s.record.last_outcome {
            None => "never ran".to_owned(),
            Some(o) => format!(
                "last {} {}{}; next {}",
                when(s.record.last_finished_at),
                o.as_str(),
                s.record.last_error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default(),
                when(s.record.next_run_at)
            ),
        },
    };
    out!(
        "{:<16} every {:>5}s budget {:>5}s  {state}",
        s.name.as_str(),
        s.config.interval_secs,
        s.config.budget_secs
    );
}

pub(super) fn jobs(home: Option<PathBuf>, cmd: JobsCmd) -> Result<(), Failure> {
    let steward = Arc::new(open(home)?);
    let runner = steward_connectors::home::runner(Arc::clone(&steward))?;
    match cmd {
        JobsCmd::Status { json } => {
            let status = runner.status()?;
            if json {
                json_line(&status);
            } else {
                status.iter().for_each(print_status);
            }
            Ok(())
        }
        JobsCmd::Run { once: true, job, json } => {
            let only = job.as_deref().map(JobName::parse).transpose()?;
            let reports = runner.run_once(only)?;
            reports.iter().for_each(|r| print_report(r, json));
            match reports.iter().find(|r| r.outcome == JobOutcome::Failed) {
                Some(r) => Err(Failure {
                    code: r.error_code.clone().unwrap_or_else(|| "JOBS_RUN_FAILED".to_owned()),
                    kind: steward_core::ErrorKind::Unavailable,
                    message: format!(
                        "{} failed: {}",
                        r.job,
                        r.error.as_deref().unwrap_or("no detail")
                    ),
                }),
                None => Ok(()),
            }
        }
        JobsCmd::Run { once: false, json: _, job: _ } => {
            let handle = Arc::new(runner).spawn()?;
            out!("running the background jobs (Ctrl-C stops; steward jobs status shows them)");
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| super::usage(format!("cannot start the runtime: {e}")))?;
            runtime.block_on(steward_server::http::shutdown_signal());
            handle.stop();
            out!("stopped");
            Ok(())
        }
    }
}
