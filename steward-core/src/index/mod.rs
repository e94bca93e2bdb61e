//! Derived indexes over the mirror (rebuildable at any time).
//!
//! Owns: the tantivy BM25 index under `<home>/index/lexical/`. Never does: hold anything that
//! cannot be rebuilt from `mirror.db`. Bounds: the writer's memory budget
//! ([`LEXICAL_WRITER_BYTES`]), query terms ([`MAX_QUERY_TERMS`]) and hits ([`MAX_LEXICAL_HITS`]).
//!
//! Status: the lexical index is built from the mirror on demand ([`LexicalIndex::rebuild`]);
//! building it in the same pass as mirroring, the watermark that ties it to the mirror, the
//! substring and vector indexes and fusion arrive with the rest of the retrieval issue.

mod lexical;

pub use lexical::{
    LEXICAL_WRITER_BYTES, LexicalHit, LexicalIndex, MAX_LEXICAL_HITS, MAX_QUERY_TERMS,
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
