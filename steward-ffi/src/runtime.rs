//! The library's one runtime. The core's calls block (SQLite, tantivy, HTTP to a model), so an
//! `async` export hands its call to this runtime's blocking pool and awaits it: the caller's
//! executor (Swift's, or asyncio through the Python bindings) is never blocked. The runtime
//! is built on first use and lives for the process.
//!
//! What is dropped where. The runtime runs nothing but `spawn_blocking` calls, and every future
//! an async export returns is polled by the foreign executor, never by a runtime worker. No
//! FFI object holds a tokio resource (a timer, a channel, an abortable task) that would need
//! the runtime's context when dropped; the live stream is a thread of its own behind
//! [`crate::TaskHandle`]. The core's resources are blocking ones — SQLite connections, the text
//! index's writer, reqwest's blocking client with a runtime thread of its own — and are
//! released synchronously by their last holder: the caller's thread when it lets go, or, when
//! a call in flight holds the last reference because the caller cancelled it and let go, the
//! blocking-pool thread that ran the call to its end, where blocking is allowed. A cancelled
//! call is never cut short (tested through the generated Python bindings).

use std::sync::OnceLock;

use crate::FfiError;

/// Core calls from async exports running at once, at most (more wait their turn).
pub const MAX_BLOCKING_CALLS: usize = 16;

static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

fn runtime() -> Result<&'static tokio::runtime::Runtime, FfiError> {
    if let Some(r) = RUNTIME.get() {
        return Ok(r);
    }
    let built = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(MAX_BLOCKING_CALLS)
        .thread_name("steward-ffi")
        .enable_all()
        .build()
        .map_err(|e| FfiError::Steward {
            kind: "unavailable".into(),
            code: "FFI_RUNTIME".into(),
            message: format!("cannot start the runtime: {e}"),
        })?;
    Ok(RUNTIME.get_or_init(|| built))
}

/// Runs the blocking `call` on the runtime's blocking pool and awaits its result.
pub(crate) async fn blocking<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, FfiError> + Send + 'static,
) -> Result<T, FfiError> {
    runtime()?.spawn_blocking(call).await.map_err(|e| FfiError::Steward {
        kind: "internal".into(),
        code: "FFI_TASK".into(),
        message: format!("the call did not finish: {e}"),
    })?
}
