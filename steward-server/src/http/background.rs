//! Work the server schedules while it runs: the watch poll, at the interval the engine asks
//! for (45 s by default, sooner when a source is about to change), and — when an embedder is
//! configured — the mail embedding queue, at the intervals [`EmbedSchedule`] gives (a backlog
//! drains with short delays, an idle or unavailable endpoint waits longer). Stopped with the
//! server's other live work.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use steward_core::{
    StewardError as _,
    embed::{EmbedOptions, EmbedSchedule},
};

use super::AppState;

/// The wait after a poll that failed as a whole (a store error), seconds.
pub const RETRY_AFTER_ERROR_SECS: u64 = 30;

/// Messages one background drain sends at most, so a pass ends and reports regularly.
pub const EMBED_PASS_ITEMS: usize = 512;

/// Drains the mail embedding queue until the server stops (nothing when no embedder is
/// configured). The drain runs on a blocking thread outside the request pool and is cancelled
/// after its batch in flight when the server stops.
pub(super) async fn embed_loop(state: AppState) {
    let steward = Arc::clone(&state.steward);
    if !steward.has_embedder() {
        return;
    }
    let mut stop = state.live_stop();
    let mut schedule = EmbedSchedule::default();
    loop {
        if *stop.borrow() {
            return;
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let watcher = {
            let (mut stop, cancel) = (state.live_stop(), Arc::clone(&cancel));
            tokio::spawn(async move {
                let _ = stop.changed().await;
                cancel.store(true, Ordering::SeqCst);
            })
        };
        let (s, c) = (Arc::clone(&steward), Arc::clone(&cancel));
        let drained = tokio::task::spawn_blocking(move || {
            let opts =
                EmbedOptions { max_items: EMBED_PASS_ITEMS, batch_size: None, cancel: Some(&c) };
            s.embed_mail(&opts, &mut |_| {})
        })
        .await;
        watcher.abort();
        let wait = match drained {
            Ok(Ok(report)) => {
                if report.embedded > 0 || report.failed > 0 || report.unavailable.is_some() {
                    tracing::info!(
                        embedded = report.embedded,
                        failed = report.failed,
                        remaining = report.remaining,
                        unavailable = report.unavailable.as_deref().unwrap_or(""),
                        "embedding pass"
                    );
                }
                schedule.next_delay(&report)
            }
            Ok(Err(e)) => {
                tracing::warn!(code = e.code(), error = %e, "embedding pass failed");
                Duration::from_secs(RETRY_AFTER_ERROR_SECS)
            }
            Err(e) => {
                tracing::error!(error = %e, "the embedding pass panicked");
                Duration::from_secs(RETRY_AFTER_ERROR_SECS)
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Polls the watches until the server stops.
pub(super) async fn watch_poller(state: AppState) {
    let mut stop = state.live_stop();
    loop {
        if *stop.borrow() {
            return;
        }
        let now = steward_core::time::now_secs();
        let wait = match state.call(move |s| s.watches()?.poll(now)).await {
            Ok(report) => {
                if report.queued > 0 || report.failed > 0 {
                    tracing::info!(
                        queued = report.queued,
                        failed = report.failed,
                        expired = report.expired,
                        "watch poll"
                    );
                }
                report.next_poll_secs
            }
            Err(e) => {
                tracing::warn!(code = e.code(), "watch poll failed");
                RETRY_AFTER_ERROR_SECS
            }
        };
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(wait)) => {}
            _ = stop.changed() => return,
        }
    }
}
