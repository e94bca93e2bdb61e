//! File-system watching: an optimization that makes reconciles sooner, never the source of
//! truth. Every burst of events (debounced) and every `interval` triggers a full reconcile, so a
//! missed event only delays convergence.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    time::{Duration, Instant},
};

use notify::{RecursiveMode, Watcher};
use steward_core::{
    Steward, SyncError,
    mirror::{MailSource, SyncOptions, SyncSummary},
};

/// Why watching a mail source stopped.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch the mail source: {0}")]
pub struct MailWatchError(#[from] notify::Error);

impl steward_core::StewardError for MailWatchError {
    fn code(&self) -> &'static str {
        "MAIL_WATCH_FAILED"
    }

    fn kind(&self) -> steward_core::ErrorKind {
        steward_core::ErrorKind::Unavailable
    }
}

/// How the watcher behaves.
#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    /// Quiet time after the last event before reconciling.
    pub debounce: Duration,
    /// A reconcile runs at least this often even without events.
    pub interval: Duration,
}

/// Watches `source`'s root and reconciles it into `steward`'s mirror (and indexes) until `stop` is set,
/// calling `on_sync` after each run. The first reconcile runs immediately.
pub fn watch_and_sync(
    steward: &Steward,
    source: &dyn MailSource,
    account: Option<String>,
    opts: WatchOptions,
    stop: &AtomicBool,
    on_sync: &mut dyn FnMut(Result<SyncSummary, SyncError>),
) -> Result<(), MailWatchError> {
    // One pending signal is all a reconcile needs: a burst of events while one is queued is
    // dropped, so the channel never grows.
    let (tx, rx) = mpsc::sync_channel(1);
    let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        let _ = tx.try_send(ev.is_ok());
    })?;
    watcher.watch(source.root(), RecursiveMode::Recursive)?;
    let sync_opts = SyncOptions { account, cancel: Some(stop) };
    let mut run = || on_sync(steward.sync_mail(source, &sync_opts, &mut |_| {}));
    run();
    let mut last_run = Instant::now();
    let mut pending_since: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(_) => {
                pending_since = Some(Instant::now());
                continue;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let due_events = pending_since.is_some_and(|t| t.elapsed() >= opts.debounce);
        if due_events || last_run.elapsed() >= opts.interval {
            pending_since = None;
            run();
            last_run = Instant::now();
        }
    }
    Ok(())
}
