//! When each job runs next: pure bookkeeping over wall-clock seconds, so it can be tested
//! with any clock.
//!
//! The rules (`steward-design.txt`, "Scheduler Semantics"):
//! - every available job runs once when the runner starts, then at its interval;
//! - the next run is counted from the end of the last one, so a run that was missed (the
//!   machine slept, the process was stopped, a run took longer than the interval) happens once
//!   on wake and never as a burst;
//! - a job never overlaps itself (single flight), and a job still running is not due;
//! - a failed run backs off: the interval doubled per consecutive failure, at most
//!   [`super::MAX_BACKOFF_SECS`], never longer than that and never shorter than the interval;
//! - a job may ask to run sooner than its interval (`next_in`: an embedding backlog, a watch
//!   about to change) and another job may wake it (a poll that queued events wakes delivery);
//! - a wall clock set back does not postpone a job by more than its interval.

use std::collections::BTreeMap;

use super::{JobConfig, JobName, JobOutcome, MAX_BACKOFF_SECS};

/// One job's timing state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Unix seconds of the next run (`None`: due now).
    pub next_run: Option<i64>,
    /// Running now.
    pub running: bool,
    /// Failed runs in a row.
    pub failures: u32,
}

/// The schedule of every configured job.
#[derive(Debug, Clone)]
pub struct Schedule {
    slots: BTreeMap<JobName, (JobConfig, Slot)>,
}

impl Schedule {
    /// A schedule where every enabled job is due at once.
    pub fn new(jobs: &BTreeMap<JobName, JobConfig>) -> Self {
        let slots = jobs
            .iter()
            .filter(|(_, c)| c.enabled)
            .map(|(n, c)| (*n, (*c, Slot { next_run: None, running: false, failures: 0 })))
            .collect();
        Self { slots }
    }

    /// The jobs due at `now` that are not running, in their fixed order.
    pub fn due(&mut self, now: i64) -> Vec<JobName> {
        let mut out = Vec::new();
        for (name, (config, slot)) in &mut self.slots {
            if slot.running {
                continue;
            }
            // A clock set back leaves a next run far ahead: never more than one interval.
            if let Some(next) = slot.next_run
                && next > now + config.interval_secs
            {
                slot.next_run = Some(now + config.interval_secs);
            }
            if slot.next_run.is_none_or(|n| n <= now) {
                out.push(*name);
            }
        }
        out
    }

    /// Seconds until the next job is due (0 when one is due now), `None` without jobs.
    pub fn until_next(&self, now: i64) -> Option<i64> {
        self.slots
            .values()
            .filter(|(_, s)| !s.running)
            .map(|(_, s)| s.next_run.map_or(0, |n| (n - now).max(0)))
            .min()
    }

    /// Marks `job` running.
    pub fn started(&mut self, job: JobName) {
        if let Some((_, s)) = self.slots.get_mut(&job) {
            s.running = true;
        }
    }

    /// Records how `job` ended at `now`; `next_in` is the job's own wish (a backlog, an
    /// urgent watch), honoured when it is sooner than the interval. Returns the next run.
    pub fn finished(
        &mut self,
        job: JobName,
        now: i64,
        outcome: JobOutcome,
        next_in: Option<u64>,
    ) -> Option<i64> {
        let (config, slot) = self.slots.get_mut(&job)?;
        slot.running = false;
        let interval = config.interval_secs;
        let delay = match outcome {
            JobOutcome::Failed => {
                slot.failures = slot.failures.saturating_add(1);
                let factor = 1_i64 << slot.failures.min(20);
                interval.saturating_mul(factor).min(MAX_BACKOFF_SECS.max(interval))
            }
            JobOutcome::Ok | JobOutcome::OverBudget => {
                slot.failures = 0;
                match next_in {
                    Some(n) => i64::try_from(n).unwrap_or(i64::MAX).clamp(1, interval),
                    None => interval,
                }
            }
        };
        slot.next_run = Some(now.saturating_add(delay));
        slot.next_run
    }

    /// Makes `job` due now (another job found work for it); nothing when it is running,
    /// disabled or failing (its backoff stands).
    pub fn wake(&mut self, job: JobName, now: i64) {
        if let Some((_, s)) = self.slots.get_mut(&job)
            && !s.running
            && s.failures == 0
        {
            s.next_run = Some(s.next_run.map_or(now, |n| n.min(now)));
        }
    }

    /// The state of `job`, when it is scheduled.
    pub fn slot(&self, job: JobName) -> Option<Slot> {
        self.slots.get(&job).map(|(_, s)| *s)
    }

    /// The scheduled jobs.
    pub fn jobs(&self) -> impl Iterator<Item = JobName> + '_ {
        self.slots.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(interval: i64) -> JobConfig {
        JobConfig { enabled: true, interval_secs: interval, budget_secs: 10 }
    }

    fn schedule(jobs: &[(JobName, i64)]) -> Schedule {
        Schedule::new(&jobs.iter().map(|(n, i)| (*n, config(*i))).collect())
    }

    #[test]
    fn every_job_runs_at_start_then_at_its_interval_counted_from_the_end() {
        let mut s = schedule(&[(JobName::SendDue, 120), (JobName::WatchPoll, 45)]);
        assert_eq!(s.due(1_000), vec![JobName::WatchPoll, JobName::SendDue]);
        s.started(JobName::SendDue);
        // Running: not due again, however late it gets (single flight).
        assert_eq!(s.due(5_000), vec![JobName::WatchPoll]);
        assert_eq!(s.finished(JobName::SendDue, 1_030, JobOutcome::Ok, None), Some(1_150));
        assert!(!s.due(1_149).contains(&JobName::SendDue));
        assert!(s.due(1_150).contains(&JobName::SendDue));
    }

    #[test]
    fn a_missed_run_happens_once_on_wake_never_as_a_burst() {
        let mut s = schedule(&[(JobName::ApprovalExpiry, 60)]);
        s.started(JobName::ApprovalExpiry);
        s.finished(JobName::ApprovalExpiry, 0, JobOutcome::Ok, None);
        // Ten hours asleep: 600 intervals missed, one run.
        let wake = 36_000;
        assert_eq!(s.due(wake), vec![JobName::ApprovalExpiry]);
        s.started(JobName::ApprovalExpiry);
        assert!(s.due(wake).is_empty());
        s.finished(JobName::ApprovalExpiry, wake + 1, JobOutcome::Ok, None);
        assert!(s.due(wake + 2).is_empty(), "no catch-up burst");
        assert_eq!(s.until_next(wake + 2), Some(59));
    }

    #[test]
    fn failures_back_off_doubling_up_to_the_cap_and_success_resets() {
        let mut s = schedule(&[(JobName::MailReconcile, 600)]);
        let mut now = 0;
        let mut delays = Vec::new();
        for _ in 0..6 {
            s.started(JobName::MailReconcile);
            let next = s.finished(JobName::MailReconcile, now, JobOutcome::Failed, None).unwrap();
            delays.push(next - now);
            now = next;
        }
        assert_eq!(delays, vec![1_200, 2_400, 3_600, 3_600, 3_600, 3_600]);
        // A failing job is not woken early by another job (its next run is at `now`).
        s.wake(JobName::MailReconcile, now - 100);
        assert!(s.due(now - 100).is_empty());
        s.started(JobName::MailReconcile);
        assert_eq!(s.finished(JobName::MailReconcile, now, JobOutcome::Ok, None), Some(now + 600));
        assert_eq!(s.slot(JobName::MailReconcile).unwrap().failures, 0);
    }

    #[test]
    fn a_job_may_ask_to_run_sooner_but_never_later_than_its_interval() {
        let mut s = schedule(&[(JobName::WatchPoll, 45)]);
        s.started(JobName::WatchPoll);
        assert_eq!(s.finished(JobName::WatchPoll, 100, JobOutcome::Ok, Some(5)), Some(105));
        s.started(JobName::WatchPoll);
        assert_eq!(s.finished(JobName::WatchPoll, 100, JobOutcome::Ok, Some(900)), Some(145));
        s.started(JobName::WatchPoll);
        assert_eq!(s.finished(JobName::WatchPoll, 100, JobOutcome::Ok, Some(0)), Some(101));
    }

    #[test]
    fn wake_makes_a_job_due_now_unless_it_is_running() {
        let mut s = schedule(&[(JobName::WatchDeliver, 30), (JobName::WatchPoll, 45)]);
        for j in [JobName::WatchDeliver, JobName::WatchPoll] {
            s.started(j);
            s.finished(j, 0, JobOutcome::Ok, None);
        }
        s.wake(JobName::WatchDeliver, 10);
        assert_eq!(s.due(10), vec![JobName::WatchDeliver]);
        s.started(JobName::WatchPoll);
        s.wake(JobName::WatchPoll, 11);
        assert!(!s.due(11).contains(&JobName::WatchPoll));
    }

    #[test]
    fn a_clock_set_back_postpones_by_at_most_one_interval() {
        let mut s = schedule(&[(JobName::SendDue, 120)]);
        s.started(JobName::SendDue);
        s.finished(JobName::SendDue, 1_000_000, JobOutcome::Ok, None);
        // The clock jumps back a day.
        let now = 1_000_000 - 86_400;
        assert!(s.due(now).is_empty());
        assert_eq!(s.until_next(now), Some(120));
        assert_eq!(s.due(now + 120), vec![JobName::SendDue]);
    }

    #[test]
    fn disabled_jobs_are_never_scheduled() {
        let mut jobs = BTreeMap::new();
        jobs.insert(JobName::SendDue, JobConfig { enabled: false, ..config(1) });
        let mut s = Schedule::new(&jobs);
        assert!(s.due(0).is_empty());
        assert_eq!(s.until_next(0), None);
    }
}
