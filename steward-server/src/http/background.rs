//! The background work of a serving process: the core's runner ([`steward_core::runner`]),
//! when one is attached to the state (`steward serve` attaches the home's configured one),
//! started when the server listens and stopped when it stops. The server adds nothing to it.

use std::sync::Arc;

use steward_core::runner::{RunnerError, RunnerHandle};

use super::AppState;

/// Starts the attached runner, if any.
pub(super) fn start(state: &AppState) -> Result<Option<RunnerHandle>, RunnerError> {
    state.runner().map(|r| Arc::clone(r).spawn()).transpose()
}

/// Stops a started runner: runs in flight stop at their next safe point (it blocks for at most
/// the runner's grace, so it waits on a blocking thread).
pub(super) async fn stop(runner: Option<RunnerHandle>) {
    if let Some(handle) = runner {
        let _ = tokio::task::spawn_blocking(move || handle.stop()).await;
    }
}
