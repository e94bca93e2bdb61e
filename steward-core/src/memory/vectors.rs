//! Note vectors (`<home>/memory-index/vectors.db`, keyed by the note's index row), for
//! meaning-based recall fused with BM25 like mail's: the nearest notes count only within the
//! embedder's distance ceiling and when they stand out from the calibration probes, so a topic
//! memory does not hold finds nothing.

use crate::{
    Steward,
    index::{VectorError, VectorStore},
};

use super::MemoryError;

/// Notes embedded per request.
/// Fixed (not a setting).
pub const MEMORY_EMBED_BATCH: usize = 32;
/// Nearest notes a search looks at.
/// Fixed (not a setting).
pub const MEMORY_VECTOR_CANDIDATES: usize = 50;

fn hash(text: &str) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(text.as_bytes()).into()
}

impl Steward {
    pub(crate) fn memory_vectors(&self) -> Result<&VectorStore, VectorError> {
        self.open_once(&self.memory_vectors, || {
            VectorStore::open(&self.home().join(super::INDEX_DIR), self.limits())
        })
    }

    /// Embeds the notes whose text is new or changed and drops the vectors of notes gone.
    /// `None` without an embedder; else how many were embedded and why it stopped early.
    pub(crate) fn embed_memory(&self) -> Result<Option<(usize, Option<String>)>, MemoryError> {
        let Some(e) = self.embedder_ref() else { return Ok(None) };
        let index = self.memory_index()?;
        let vectors = self.memory_vectors()?;
        let live = index.embed_sources()?;
        let states = vectors.embed_states()?;
        let keep: std::collections::HashSet<i64> = live.iter().map(|(id, _)| *id).collect();
        let gone: Vec<i64> = states.keys().copied().filter(|id| !keep.contains(id)).collect();
        if !gone.is_empty() {
            vectors.remove(&gone)?;
        }
        let todo: Vec<(i64, String, [u8; 32])> = live
            .into_iter()
            .filter_map(|(id, text)| {
                let h = hash(&text);
                let current = states.get(&id).is_some_and(|s| {
                    s.model == e.model() && s.source_hash == h && s.embedded_at.is_some()
                });
                (!current).then_some((id, text, h))
            })
            .collect();
        let (embedded, error) =
            crate::index::embed_in_batches(e, vectors, &todo, MEMORY_EMBED_BATCH, None)?;
        Ok(Some((embedded, error)))
    }

    /// [`Self::embed_memory`] after a write: a failing embedder leaves the note lexical until
    /// the next reconcile, and says so in the log.
    pub(crate) fn embed_memory_quietly(&self) {
        match self.embed_memory() {
            Ok(Some((_, Some(why)))) => tracing::warn!(why, "memory notes not embedded"),
            Err(e) => tracing::warn!(error = %e, "memory notes not embedded"),
            Ok(_) => {}
        }
    }

    /// The index rows of the notes nearest to `text`, nearest first. Empty without an
    /// embedder or vectors, and when the embedder fails (the search is lexical then).
    pub(crate) fn near_memory(&self, text: &str) -> Vec<i64> {
        let Some(e) = self.embedder_ref() else { return Vec::new() };
        let Ok(vectors) = self.memory_vectors() else { return Vec::new() };
        crate::index::near_standing_out(e, vectors, text, MEMORY_VECTOR_CANDIDATES, "note")
            .unwrap_or_else(|why| {
                tracing::warn!(why, "memory search is lexical");
                Vec::new()
            })
    }
}
