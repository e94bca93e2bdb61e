//! The core's background runner for the launcher: started while the app is open, stopped when
//! it quits; the jobs' status for its menu; one pass on demand.

use std::sync::{Arc, Mutex, PoisonError};

use steward_core::runner::{JobName, RunnerHandle};

use crate::{FfiError, Steward};

/// How a job's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum JobOutcome {
    /// It did its work.
    Ok,
    /// It failed (tried again after a backoff).
    Failed,
    /// It overran its time budget and stopped at a safe point.
    OverBudget,
}

impl From<steward_core::runner::JobOutcome> for JobOutcome {
    fn from(o: steward_core::runner::JobOutcome) -> Self {
        use steward_core::runner::JobOutcome as O;
        match o {
            O::Ok => Self::Ok,
            O::Failed => Self::Failed,
            O::OverBudget => Self::OverBudget,
        }
    }
}

/// One run of a job.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct JobRun {
    /// The job (`mail-reconcile`, `watch-poll`, …).
    pub job: String,
    /// How it ended.
    pub outcome: JobOutcome,
    /// What it did, for a person (empty when there was nothing to do).
    pub summary: String,
    /// The error's stable code, when it failed.
    pub error_code: Option<String>,
    /// The error, when it failed.
    pub error: Option<String>,
    /// Unix seconds.
    pub started_at: i64,
    /// Unix seconds.
    pub finished_at: i64,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl From<steward_core::runner::JobReport> for JobRun {
    fn from(r: steward_core::runner::JobReport) -> Self {
        Self {
            job: r.job.as_str().to_owned(),
            outcome: r.outcome.into(),
            summary: r.summary,
            error_code: r.error_code,
            error: r.error,
            started_at: r.started_at,
            finished_at: r.finished_at,
            seconds: r.seconds,
        }
    }
}

/// A job as the status menu shows it.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct JobState {
    /// The job.
    pub name: String,
    /// Scheduled at all.
    pub enabled: bool,
    /// Seconds between runs.
    pub interval_secs: i64,
    /// Seconds a run may take.
    pub budget_secs: i64,
    /// Why it cannot run here (nothing configured for it), when it cannot.
    pub unavailable: Option<String>,
    /// Running now.
    pub running: bool,
    /// Unix seconds.
    pub last_finished_at: Option<i64>,
    /// How the last run ended.
    pub last_outcome: Option<JobOutcome>,
    /// What the last run did.
    pub last_summary: Option<String>,
    /// Why the last run failed.
    pub last_error: Option<String>,
    /// Unix seconds of the next run.
    pub next_run_at: Option<i64>,
    /// Failed runs in a row.
    pub failures: u32,
    /// Runs recorded.
    pub runs: i64,
}

impl From<steward_core::runner::JobStatus> for JobState {
    fn from(s: steward_core::runner::JobStatus) -> Self {
        Self {
            name: s.name.as_str().to_owned(),
            enabled: s.config.enabled,
            interval_secs: s.config.interval_secs,
            budget_secs: s.config.budget_secs,
            unavailable: s.unavailable,
            running: s.record.running,
            last_finished_at: s.record.last_finished_at,
            last_outcome: s.record.last_outcome.map(Into::into),
            last_summary: s.record.last_summary,
            last_error: s.record.last_error,
            next_run_at: s.record.next_run_at,
            failures: s.record.failures,
            runs: s.record.runs,
        }
    }
}

/// The runner working in the background; `stop` (or releasing it) stops it.
#[derive(Debug, uniffi::Object)]
pub struct BackgroundRunner {
    handle: Mutex<Option<RunnerHandle>>,
}

#[uniffi::export]
impl BackgroundRunner {
    /// Runs `job` as soon as it is not running (the launcher knows there is work: the person
    /// pressed "Check mail").
    pub fn wake(&self, job: String) -> Result<(), FfiError> {
        let job = JobName::parse(&job).map_err(|e| FfiError::from_core(&e))?;
        if let Some(h) = self.handle.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            h.wake(job);
        }
        Ok(())
    }

    /// Stops it: runs in flight stop at their next safe point. Blocks for at most the
    /// configured grace (`[jobs] stop_grace_secs`); a second call does nothing.
    pub fn stop(&self) {
        let handle = self.handle.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(h) = handle {
            h.stop();
        }
    }
}

fn runner(s: &Steward) -> Result<steward_core::runner::Runner, FfiError> {
    steward_connectors::home::runner(s.handle()).map_err(|e| FfiError::from_core(&e))
}

#[uniffi::export]
impl Steward {
    /// Starts the home's background runner (its `[jobs]`, mail sources and SMTP from
    /// `config.toml`): every available job runs now and then on its schedule until the
    /// returned runner is stopped.
    pub fn start_background(&self) -> Result<Arc<BackgroundRunner>, FfiError> {
        let handle = Arc::new(runner(self)?).spawn().map_err(|e| FfiError::from_core(&e))?;
        Ok(Arc::new(BackgroundRunner { handle: Mutex::new(Some(handle)) }))
    }

    /// Runs every job that can run here once (or only `job`), in order, and returns the runs.
    pub fn run_jobs_once(&self, job: Option<String>) -> Result<Vec<JobRun>, FfiError> {
        let only =
            job.as_deref().map(JobName::parse).transpose().map_err(|e| FfiError::from_core(&e))?;
        let runs = runner(self)?.run_once(only).map_err(|e| FfiError::from_core(&e))?;
        Ok(runs.into_iter().map(Into::into).collect())
    }

    /// Each job: configured or not, its schedule, its last run and the next.
    pub fn jobs_status(&self) -> Result<Vec<JobState>, FfiError> {
        let status = runner(self)?.status().map_err(|e| FfiError::from_core(&e))?;
        Ok(status.into_iter().map(Into::into).collect())
    }
}
