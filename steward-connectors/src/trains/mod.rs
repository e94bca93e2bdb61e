//! Italian trains over ViaggiaTreno. Today: the dictated-station resolver over any
//! [`StationSource`] (the live autocomplete endpoint, or a station list); the HTTP client, the
//! snapshot normalization and the watch adapter come next.

mod stations;

pub use stations::{
    AMBIGUOUS_CANDIDATES, MAX_FALLBACK_QUERIES, MIN_LEAD, MIN_MULTI_SCORE, MIN_SOLE_SCORE, Station,
    StationList, StationResolution, StationSource, normalize, resolve_station, similarity,
};
