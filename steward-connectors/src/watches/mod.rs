//! Watch sources ([`steward_core::watch::WatchAdapter`] implementations).

mod time;

pub use time::{TIME_WATCH_GRACE_SECS, TimeAdapter};

/// Every watch source this crate provides, for a frontend to register.
pub fn all() -> Vec<std::sync::Arc<dyn steward_core::watch::WatchAdapter>> {
    vec![std::sync::Arc::new(TimeAdapter)]
}
