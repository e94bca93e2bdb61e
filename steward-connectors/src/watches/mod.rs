//! Watch sources ([`steward_core::watch::WatchAdapter`] implementations).

mod time;

pub use time::{TIME_WATCH_GRACE_SECS, TimeAdapter};

/// Every watch source this crate provides, for a frontend to register: `time`, and `train`
/// over ViaggiaTreno (`VIAGGIATRENO_BASE_URL` or the public endpoint; nothing is fetched until
/// a train watch is created).
pub fn all() -> Vec<std::sync::Arc<dyn steward_core::watch::WatchAdapter>> {
    let mut v: Vec<std::sync::Arc<dyn steward_core::watch::WatchAdapter>> =
        vec![std::sync::Arc::new(TimeAdapter)];
    match crate::trains::ViaggiaTreno::from_env() {
        Ok(client) => v.push(std::sync::Arc::new(crate::trains::TrainAdapter::new(client))),
        Err(e) => tracing::warn!(error = %e, "the train watch source is unavailable"),
    }
    v
}

/// `builder` with every watch source of [`all`] registered: how a frontend opens a home.
#[must_use]
pub fn register(mut builder: steward_core::StewardBuilder) -> steward_core::StewardBuilder {
    for adapter in all() {
        builder = builder.watch_adapter(adapter);
    }
    builder
}
