//! Derived indexes over the mirror (rebuildable at any time).
//!
//! Owns: the tantivy index under `<home>/index/lexical/` (BM25 fields and trigram substring
//! fields, tied to the mirror by a watermark = the last sync run it reflects) and the vector
//! store `<home>/index/vectors.db` (sqlite-vec, one space per model and dimension, filled
//! through an [`Embedder`]). Never does: hold anything that cannot be rebuilt from `mirror.db`
//! (vectors can be recomputed by their embedder), or decide a substring match without checking
//! the text. Bounds: the writer's memory budget ([`LEXICAL_WRITER_BYTES`]), query terms
//! ([`MAX_QUERY_TERMS`]), hits ([`MAX_LEXICAL_HITS`]), substring candidates
//! ([`MAX_SUBSTRING_CANDIDATES`]), neighbours ([`MAX_KNN`]) and the code cache
//! ([`MAX_CODE_CACHE_BYTES`]).

pub mod calibration;
pub mod fold;
mod lexical;
mod vectors;

pub use fold::MIN_SUBSTRING_CHARS;
pub use lexical::{
    CandidateOrder, LEXICAL_WRITER_BYTES, LexicalHit, LexicalIndex, MAX_LEXICAL_HITS,
    MAX_QUERY_TERMS, MAX_SUBSTRING_CANDIDATES, SubstringField,
};
pub(crate) use lexical::{analyzer, query_terms};
pub(crate) use vectors::items::{embed_in_batches, near_standing_out};
pub use vectors::{
    COARSE_FACTOR, DEFAULT_MAX_VECTOR_DISTANCE, EmbedError, EmbedState, EmbeddedItem, Embedder,
    FailedItem, INT8_FULL_SCAN_BYTES, MAX_CODE_CACHE_BYTES, MAX_DIMENSION, MAX_KNN,
    MAX_VECTOR_BATCH, MIN_COARSE, MIN_RERANK_EXTRA, Neighbour, Q_HEADROOM, RERANK_EXTRA_PERCENT,
    VectorError, VectorStore,
};

use crate::error::{ErrorKind, StewardError};

/// Errors of the derived indexes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// The index files could not be opened, written or read.
    #[error("lexical index: {0}")]
    Tantivy(String),
    /// The mirror could not be read.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A limit outside its bounds.
    #[error("{what} {value} is out of range (1..={max})")]
    OutOfRange {
        /// What.
        what: &'static str,
        /// The value given.
        value: usize,
        /// The bound.
        max: usize,
    },
}

impl From<tantivy::TantivyError> for IndexError {
    fn from(e: tantivy::TantivyError) -> Self {
        Self::Tantivy(e.to_string())
    }
}

impl StewardError for IndexError {
    fn code(&self) -> &'static str {
        match self {
            Self::Tantivy(_) => "INDEX_UNAVAILABLE",
            Self::Store(e) => e.code(),
            Self::OutOfRange { .. } => "LIMIT_OUT_OF_RANGE",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Tantivy(_) => ErrorKind::Unavailable,
            Self::Store(e) => e.kind(),
            Self::OutOfRange { .. } => ErrorKind::InvalidInput,
        }
    }
}
