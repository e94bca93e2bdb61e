//! Note vectors (`<home>/memory-index/vectors.db`, keyed by the note's index row), for
//! meaning-based recall fused with BM25 like mail's: the nearest notes count only within the
//! embedder's distance ceiling and when they stand out from the calibration probes, so a topic
//! memory does not hold finds nothing.

use crate::{
    Steward,
    index::{EmbeddedItem, VectorError, VectorStore, calibration},
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
        let mut embedded = 0;
        for batch in todo.chunks(MEMORY_EMBED_BATCH) {
            let texts: Vec<&str> = batch.iter().map(|(_, t, _)| t.as_str()).collect();
            let got = match e.embed(&texts) {
                Ok(v) => v,
                Err(err) => return Ok(Some((embedded, Some(err.to_string())))),
            };
            let items: Vec<EmbeddedItem> = batch
                .iter()
                .zip(got)
                .filter(|(_, v)| !v.is_empty() && v.iter().all(|x| x.is_finite()))
                .map(|((id, _, h), vector)| EmbeddedItem { id: *id, source_hash: *h, vector })
                .collect();
            let Some(dim) = items.first().map(|i| i.vector.len()) else { continue };
            let items: Vec<EmbeddedItem> =
                items.into_iter().filter(|i| i.vector.len() == dim).collect();
            vectors.reset_incompatible(e.model(), dim)?;
            vectors.store_embedded(e.model(), dim, &items)?;
            embedded += items.len();
        }
        Ok(Some((embedded, None)))
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
        let near = || -> Result<Vec<i64>, String> {
            let stored = vectors.dimensions(e.model()).map_err(|x| x.to_string())?;
            if stored.is_empty() {
                return Ok(Vec::new());
            }
            let v = e.embed_query(text).map_err(|x| x.to_string())?;
            if !stored.contains(&v.len()) {
                return Err(format!("no note vectors of dimension {}", v.len()));
            }
            let cutoff = e.max_distance();
            let ids: Vec<i64> = vectors
                .knn(e.model(), &v, MEMORY_VECTOR_CANDIDATES)
                .map_err(|x| x.to_string())?
                .into_iter()
                .filter(|n| n.distance <= cutoff)
                .map(|n| n.id)
                .collect();
            if ids.is_empty() {
                return Ok(ids);
            }
            let probes = calibration::probes_for(e, v.len()).ok_or("probe queries not embedded")?;
            let found =
                vectors.stored_vectors(e.model(), v.len(), &ids).map_err(|x| x.to_string())?;
            let candidates: Vec<(i64, &[f32])> =
                found.iter().map(|(id, f)| (*id, f.as_slice())).collect();
            Ok(calibration::standing_out(&v, &probes, &candidates))
        };
        near().unwrap_or_else(|why| {
            tracing::warn!(why, "memory search is lexical");
            Vec::new()
        })
    }
}
