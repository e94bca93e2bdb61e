//! The background runner over a home with nothing configured but the core's own jobs.

use std::sync::Arc;

use steward_core::{
    Steward, StewardError,
    runner::{JobName, JobOutcome, Runner, RunnerConfig, Services},
};

fn home() -> (tempfile::TempDir, Arc<Steward>) {
    let dir = tempfile::tempdir().unwrap();
    let s = Steward::builder().home(dir.path().join("home")).open().unwrap();
    (dir, Arc::new(s))
}

#[test]
fn one_pass_runs_every_job_that_can_run_and_records_it() {
    let (_dir, steward) = home();
    let runner = Runner::new(Arc::clone(&steward), RunnerConfig::default(), Services::default());
    let runs = runner.run_once(None).unwrap();
    let names: Vec<_> = runs.iter().map(|r| r.job).collect();
    assert_eq!(
        names,
        vec![
            JobName::WatchPoll,
            JobName::WatchDeliver,
            JobName::ConfirmWrites,
            JobName::ApprovalExpiry,
            JobName::MemoryReconcile
        ]
    );
    assert!(runs.iter().all(|r| r.outcome == JobOutcome::Ok), "{runs:?}");
    let status = runner.status().unwrap();
    for s in &status {
        let ran = names.contains(&s.name);
        assert_eq!(s.record.runs, i64::from(ran), "{s:?}");
        assert_eq!(s.unavailable.is_none(), ran, "{s:?}");
        if ran {
            assert_eq!(s.record.last_outcome, Some(JobOutcome::Ok));
            assert!(!s.record.running);
        }
    }
    let why = |j| status.iter().find(|s| s.name == j).unwrap().unavailable.clone().unwrap();
    assert!(why(JobName::MailReconcile).contains("[[mail.sources]]"));
    assert!(why(JobName::SendDue).contains("SMTP"));
    assert!(why(JobName::MemoryPromote).contains("chat model"));
    // A job that cannot run here, asked for by name: typed, nothing recorded.
    let e = runner.run_once(Some(JobName::SendDue)).unwrap_err();
    assert_eq!(e.code(), "JOBS_UNAVAILABLE");
    assert_eq!(
        runner.status().unwrap().iter().find(|s| s.name == JobName::SendDue).unwrap().record.runs,
        0
    );
    // The system status shows each job that ran.
    let items = steward.system_status().items;
    let job = items.iter().find(|i| i.name == "job.approval-expiry").unwrap();
    assert_eq!(job.status, steward_core::status::Health::Ok, "{job:?}");
}

#[test]
fn a_spawned_runner_runs_each_job_once_at_start_and_stops_when_asked() {
    let (_dir, steward) = home();
    let runner =
        Arc::new(Runner::new(Arc::clone(&steward), RunnerConfig::default(), Services::default()));
    let handle = Arc::clone(&runner).spawn().unwrap();
    // Every available job is due at start; wait (bounded) until each has one recorded run.
    let mut checks = 0;
    loop {
        let status = runner.status().unwrap();
        let done = status.iter().filter(|s| s.unavailable.is_none()).all(|s| s.record.runs >= 1);
        if done || checks == 1_000 {
            break;
        }
        checks += 1;
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    handle.stop();
    let status = runner.status().unwrap();
    for s in status.iter().filter(|s| s.unavailable.is_none()) {
        // Intervals are 30 s and more: exactly one run each, none running after the stop.
        assert_eq!(s.record.runs, 1, "{s:?}");
        assert!(!s.record.running, "{s:?}");
        assert!(s.record.next_run_at.is_some(), "{s:?}");
    }
}
