//! Italian trains over ViaggiaTreno. Today: the dictated-station resolver over any
//! [`StationSource`] (the live autocomplete endpoint, or a station list), and the normalization
//! of a run's status into a [`TrainSnapshot`] with its semantic events, the HTTP client
//! ([`ViaggiaTreno`]) with `find_next_train` and `train_status`, and the `train` watch source
//! ([`TrainAdapter`]).

mod client;
mod next;
mod snapshot;

pub use client::{
    DEFAULT_BASE_URL, EXPIRY_AFTER_SECS, FALLBACK_EXPIRY_SECS, FetchError, Fetched, MAX_ATTEMPTS,
    MAX_RESPONSE_BYTES, REQUEST_TIMEOUT_SECS, STOP_SELECTORS, TrainAdapter, TrainRef, ViaggiaTreno,
};
mod stations;
pub mod tools;

pub use next::{
    MAX_CANDIDATES, NextTrain, STALE_DEPARTURE_SECS, TrainError, TrainStatus, board_time,
};

pub use snapshot::{
    SnapshotError, Stop, TrainSnapshot, normalize_run, rome_offset_secs, rome_rfc3339, train_events,
};

pub use stations::{
    AMBIGUOUS_CANDIDATES, MAX_FALLBACK_QUERIES, MIN_LEAD, MIN_MULTI_SCORE, MIN_SOLE_SCORE, Station,
    StationList, StationResolution, StationSource, normalize, resolve_station, similarity,
};
