//! The jobs' last and next runs, kept in `steward.db` (`jobs`), so `steward jobs status` in
//! another process, the system status and the live feed see what the runner did.

use std::path::Path;

use rusqlite::{OptionalExtension as _, params};

use super::{JobName, JobOutcome, JobReport, RunnerError};
use crate::{
    Limits,
    store::{Database, StoreError},
};

/// One job's row.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct JobRecord {
    /// Running now (in the runner that wrote it).
    pub running: bool,
    /// Unix seconds.
    pub last_started_at: Option<i64>,
    /// Unix seconds.
    pub last_finished_at: Option<i64>,
    /// How the last run ended.
    pub last_outcome: Option<JobOutcome>,
    /// What the last run did, for a person.
    pub last_summary: Option<String>,
    /// Why the last run failed.
    pub last_error: Option<String>,
    /// How long the last run took.
    pub last_seconds: Option<f64>,
    /// Unix seconds of the next run, as scheduled when the last one ended.
    pub next_run_at: Option<i64>,
    /// Failed runs in a row.
    pub failures: u32,
    /// Runs recorded.
    pub runs: i64,
}

/// The `jobs` table.
#[derive(Debug)]
pub struct JobBoard {
    db: Database,
}

fn q(ctx: &'static str) -> impl Fn(rusqlite::Error) -> RunnerError {
    move |e| RunnerError::Store(StoreError::query(ctx, e))
}

impl JobBoard {
    /// Opens (creating, migrating) `<home>/steward.db`.
    pub fn open(home: &Path, limits: &Limits) -> Result<Self, RunnerError> {
        Ok(Self { db: crate::approval::open_steward_db(home, limits)? })
    }

    /// A runner starts: no run of a process that ended is still running.
    pub fn reset_running(&self) -> Result<(), RunnerError> {
        self.db.write(|tx| {
            tx.execute("UPDATE jobs SET running = 0 WHERE running = 1", []).map_err(q("reset"))
        })?;
        Ok(())
    }

    /// `job` started at `at`.
    pub fn started(&self, job: JobName, at: i64) -> Result<(), RunnerError> {
        self.db.write(|tx| {
            tx.prepare_cached(
                "INSERT INTO jobs (name, running, last_started_at) VALUES (?1, 1, ?2)
                 ON CONFLICT (name) DO UPDATE SET running = 1, last_started_at = ?2",
            )
            .and_then(|mut s| s.execute(params![job.as_str(), at]))
            .map_err(q("job started"))
        })?;
        Ok(())
    }

    /// `report` ended its job; `next` is the next run, `failures` the failures in a row.
    pub fn finished(
        &self,
        report: &JobReport,
        next: Option<i64>,
        failures: u32,
    ) -> Result<(), RunnerError> {
        self.db.write(|tx| {
            tx.prepare_cached(
                "INSERT INTO jobs (name, running, last_started_at, last_finished_at, last_outcome,
                    last_summary, last_error, last_seconds, next_run_at, failures, runs)
                 VALUES (?1, 0, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1)
                 ON CONFLICT (name) DO UPDATE SET running = 0, last_started_at = ?2,
                    last_finished_at = ?3, last_outcome = ?4, last_summary = ?5,
                    last_error = ?6, last_seconds = ?7, next_run_at = ?8, failures = ?9,
                    runs = runs + 1",
            )
            .and_then(|mut s| {
                s.execute(params![
                    report.job.as_str(),
                    report.started_at,
                    report.finished_at,
                    report.outcome.as_str(),
                    report.summary,
                    report.error,
                    report.seconds,
                    next,
                    failures,
                ])
            })
            .map_err(q("job finished"))
        })?;
        Ok(())
    }

    /// The row of `job`, when it ever ran.
    pub fn get(&self, job: JobName) -> Result<Option<JobRecord>, RunnerError> {
        self.db.read(|c| {
            c.prepare_cached(
                "SELECT running, last_started_at, last_finished_at, last_outcome, last_summary,
                    last_error, last_seconds, next_run_at, failures, runs
                 FROM jobs WHERE name = ?1",
            )
            .and_then(|mut s| {
                s.query_row([job.as_str()], |r| {
                    let outcome: Option<String> = r.get(3)?;
                    Ok(JobRecord {
                        running: r.get(0)?,
                        last_started_at: r.get(1)?,
                        last_finished_at: r.get(2)?,
                        last_outcome: outcome.as_deref().and_then(JobOutcome::parse),
                        last_summary: r.get(4)?,
                        last_error: r.get(5)?,
                        last_seconds: r.get(6)?,
                        next_run_at: r.get(7)?,
                        failures: r.get(8)?,
                        runs: r.get(9)?,
                    })
                })
                .optional()
            })
            .map_err(q("job"))
        })
    }
}
