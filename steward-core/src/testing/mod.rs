//! Conformance suites (feature `testing`): the contracts of the traits connectors implement —
//! [`MailSource`](crate::mirror::MailSource), [`WatchAdapter`](crate::watch::WatchAdapter),
//! [`Embedder`](crate::index::Embedder) and [`MailTransport`](crate::outbox::MailTransport) —
//! written once as functions that panic naming the clause an implementation breaks.
//!
//! An implementation's test builds a small fixture (files on disk, a loopback server), states
//! what the fixture holds in the suite's `…Expectations`, and calls the suite; the next source,
//! adapter, embedder or transport proves the same contract by doing the same.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approvals;
mod embedder;
mod mail_source;
mod transport;
mod watch_adapter;

pub use approvals::approved_watch;
pub use embedder::{EmbedderExpectations, embedder_contract};
pub use mail_source::{MailSourceExpectations, mail_source_contract, missing_root_contract};
pub use transport::{TransportExpectations, mail_transport_contract};
pub use watch_adapter::{WatchAdapterExpectations, watch_adapter_contract};

/// Runs `f` (a call into the implementation under test), turning a panic into a failure that
/// names the call: the contracts say "a typed error, never a panic".
fn no_panic<T>(what: &str, f: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            panic!("contract broken: {what} panicked ({message}); it must return a typed error")
        }
    }
}
