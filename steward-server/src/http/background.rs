//! Work the server schedules while it runs: today the watch poll, at the interval the engine
//! asks for (45 s by default, sooner when a source is about to change). Stopped with the
//! server's other live work.

use std::time::Duration;

use super::AppState;

/// The wait after a poll that failed as a whole (a store error), seconds.
pub const RETRY_AFTER_ERROR_SECS: u64 = 30;

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
