//! Italian trains over ViaggiaTreno. Today: the dictated-station resolver over any
//! [`StationSource`] (the live autocomplete endpoint, or a station list), and the normalization
//! of a run's status into a [`TrainSnapshot`] with its semantic events; the HTTP client and the
//! watch adapter come next.

mod snapshot;
mod stations;

pub use snapshot::{
    SnapshotError, Stop, TrainSnapshot, normalize_run, rome_offset_secs, rome_rfc3339, train_events,
};

pub use stations::{
    AMBIGUOUS_CANDIDATES, MAX_FALLBACK_QUERIES, MIN_LEAD, MIN_MULTI_SCORE, MIN_SOLE_SCORE, Station,
    StationList, StationResolution, StationSource, normalize, resolve_station, similarity,
};
