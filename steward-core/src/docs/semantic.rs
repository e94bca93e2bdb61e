//! Meaning search inside one document (`docs.search`), beside its BM25: with an embedder
//! configured, at most [`MAX_SEMANTIC_CHUNKS`] passages, evenly sampled when the document has
//! more, are embedded in batches of [`DOC_EMBED_BATCH`] and kept with the prepared document
//! (one vector space: another model or dimension drops them); the question's vector ranks them
//! by cosine, and only passages within the embedder's `max_distance` count (a question about
//! something the document does not hold finds nothing by meaning, as in mail). At most
//! [`SEMANTIC_CANDIDATES`] of them and [`LEXICAL_CANDIDATES`] of the BM25 ranking are merged by
//! Reciprocal Rank Fusion over ranks.
//!
//! The answer says how the meaning side went ([`SemanticStatus`]): `disabled` (no embedder),
//! `unavailable` (the question or every passage failed to embed: lexical only), `full` (every
//! passage has a vector), `sampled` (the document has more passages than are embedded: BM25
//! still covers all of them), `partial` (some selected passages have no vector: a failed batch
//! stops the embedding, and its passages are tried again on a later search).

use std::{collections::HashMap, sync::Mutex};

use serde::Serialize;

use crate::index::Embedder;

/// Most passages of one document that get a vector (evenly sampled beyond it).
/// Fixed (not a setting).
pub const MAX_SEMANTIC_CHUNKS: usize = 256;
/// Passages per embedding request.
/// Fixed (not a setting).
pub const DOC_EMBED_BATCH: usize = 64;
/// Most passages the meaning ranking hands to the fusion.
/// Fixed (not a setting).
pub const SEMANTIC_CANDIDATES: usize = 50;
/// Most passages the BM25 ranking of one document hands to the fusion.
/// Fixed (not a setting).
pub const LEXICAL_CANDIDATES: usize = 50;
/// The Reciprocal Rank Fusion constant (as mail's search).
/// Fixed (not a setting).
pub const DOC_RRF_K: f64 = 60.0;

/// How the meaning side of a search went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SemanticStatus {
    /// No embedder is configured: BM25 only.
    Disabled,
    /// The embedder failed (the question, or every passage): BM25 only.
    Unavailable,
    /// Every passage of the document has a vector.
    Full,
    /// The document has more passages than [`MAX_SEMANTIC_CHUNKS`]: an even sample has vectors.
    Sampled,
    /// Some selected passages have no vector (tried again on a later search).
    Partial,
}

/// The meaning side of one search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SemanticReport {
    /// How it went.
    pub status: SemanticStatus,
    /// Passages selected for vectors.
    pub selected: usize,
    /// Of those, passages with a vector.
    pub embedded: usize,
}

/// The vectors of one prepared document's passages, in one space.
#[derive(Debug, Default)]
pub(crate) struct ChunkVectors {
    space: Option<(String, usize)>,
    /// Passage → unit vector.
    vectors: HashMap<usize, Vec<f32>>,
}

/// The selected passages of `n`: all of them, or [`MAX_SEMANTIC_CHUNKS`] evenly spread.
pub(crate) fn selection(n: usize) -> Vec<usize> {
    if n <= MAX_SEMANTIC_CHUNKS {
        (0..n).collect()
    } else {
        (0..MAX_SEMANTIC_CHUNKS).map(|i| i * n / MAX_SEMANTIC_CHUNKS).collect()
    }
}

/// `v` scaled to length 1, when it is a usable vector (finite, not all zeros, bounded).
pub(crate) fn unit(v: Vec<f32>) -> Option<Vec<f32>> {
    if v.is_empty() || v.len() > crate::index::MAX_DIMENSION || v.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    (norm > 0.0).then(|| v.into_iter().map(|x| x / norm).collect())
}

/// The passages closest in meaning to `query`, best first (within the embedder's
/// `max_distance`, at most [`SEMANTIC_CANDIDATES`]), and how it went. `text_of(i)` is the
/// text of passage `i` of `n`.
pub(crate) fn rank<'a>(
    embedder: Option<&dyn Embedder>,
    cache: &Mutex<ChunkVectors>,
    n: usize,
    text_of: impl Fn(usize) -> &'a str,
    query: &str,
) -> (Vec<usize>, SemanticReport) {
    let selected = selection(n);
    let report = |status, embedded| SemanticReport { status, selected: selected.len(), embedded };
    let Some(e) = embedder else { return (Vec::new(), report(SemanticStatus::Disabled, 0)) };
    let Some(q) = e.embed_query(query).ok().and_then(unit) else {
        return (Vec::new(), report(SemanticStatus::Unavailable, 0));
    };
    let space = (e.model().to_owned(), q.len());
    // One search embeds a document's passages at a time: a second one waits and reuses them.
    let mut c = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if c.space.as_ref() != Some(&space) {
        c.vectors.clear();
        c.space = Some(space.clone());
    }
    let missing: Vec<usize> =
        selected.iter().copied().filter(|i| !c.vectors.contains_key(i)).collect();
    let batch = e.batch_size().clamp(1, DOC_EMBED_BATCH);
    for group in missing.chunks(batch) {
        let texts: Vec<&str> = group.iter().map(|&i| text_of(i)).collect();
        let Ok(vectors) = e.embed(&texts) else { break };
        if vectors.len() != group.len() {
            break;
        }
        for (&i, v) in group.iter().zip(vectors) {
            if let Some(v) = unit(v).filter(|v| v.len() == space.1) {
                c.vectors.insert(i, v);
            }
        }
    }
    let cutoff = e.max_distance();
    let mut near: Vec<(usize, f32)> = selected
        .iter()
        .filter_map(|i| c.vectors.get(i).map(|v| (*i, v)))
        .map(|(i, v)| (i, 1.0 - v.iter().zip(&q).map(|(a, b)| a * b).sum::<f32>()))
        .filter(|(_, d)| *d <= cutoff)
        .collect();
    let embedded = selected.iter().filter(|i| c.vectors.contains_key(i)).count();
    drop(c);
    near.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    near.truncate(SEMANTIC_CANDIDATES);
    let status = if embedded == 0 {
        SemanticStatus::Unavailable
    } else if embedded < selected.len() {
        SemanticStatus::Partial
    } else if n > MAX_SEMANTIC_CHUNKS {
        SemanticStatus::Sampled
    } else {
        SemanticStatus::Full
    };
    (near.into_iter().map(|(i, _)| i).collect(), report(status, embedded))
}

/// One fused passage: its ranks in each list (1-based) and its RRF score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Fused<T> {
    pub chunk: T,
    pub lexical: Option<u32>,
    pub vector: Option<u32>,
    pub score: f64,
}

/// Reciprocal Rank Fusion of the two rankings (best first each; the callers bound them),
/// best first; ties go to the better BM25 rank, then the earlier passage.
pub(crate) fn fuse<T: Copy + Eq + std::hash::Hash + Ord>(
    lexical: &[T],
    vector: &[T],
) -> Vec<Fused<T>> {
    let rank = |i: usize| u32::try_from(i + 1).unwrap_or(u32::MAX);
    let mut by: HashMap<T, Fused<T>> = HashMap::new();
    let blank = |chunk| Fused { chunk, lexical: None, vector: None, score: 0.0 };
    for (i, &c) in lexical.iter().enumerate() {
        by.entry(c).or_insert_with(|| blank(c)).lexical = Some(rank(i));
    }
    for (i, &c) in vector.iter().enumerate() {
        by.entry(c).or_insert_with(|| blank(c)).vector = Some(rank(i));
    }
    let mut out: Vec<Fused<T>> = by
        .into_values()
        .map(|mut f| {
            f.score = [f.lexical, f.vector]
                .into_iter()
                .flatten()
                .map(|r| 1.0 / (DOC_RRF_K + f64::from(r)))
                .sum();
            f
        })
        .collect();
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.lexical.unwrap_or(u32::MAX).cmp(&b.lexical.unwrap_or(u32::MAX)))
            .then(a.chunk.cmp(&b.chunk))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::EmbedError;

    /// Vectors from words: each of a few topics is an axis; a failing switch for batches.
    struct Topics {
        fail_batches: std::sync::atomic::AtomicUsize,
        calls: std::sync::atomic::AtomicUsize,
    }

    impl Embedder for Topics {
        fn model(&self) -> &str {
            "topics"
        }
        fn dimension(&self) -> Option<usize> {
            Some(4)
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            use std::sync::atomic::Ordering::SeqCst;
            self.calls.fetch_add(1, SeqCst);
            if self.fail_batches.load(SeqCst) > 0 && texts.len() > 1 {
                self.fail_batches.fetch_sub(1, SeqCst);
                return Err(EmbedError::Unavailable("down".into()));
            }
            Ok(texts
                .iter()
                .map(|t| {
                    let has = |w: &str| if t.contains(w) { 1.0 } else { 0.0 };
                    let topics = [has("rent") + has("lease"), has("boiler") + has("heating")];
                    vec![topics[0], topics[1], has("nothing"), 0.01]
                })
                .collect())
        }
        fn max_distance(&self) -> f32 {
            0.5
        }
    }

    #[test]
    fn passages_are_ranked_by_meaning_within_the_distance_and_kept_for_the_next_search() {
        let texts = ["the lease and its rent", "the boiler", "nothing here", "heating failed"];
        let e = Topics { fail_batches: 0.into(), calls: 0.into() };
        let cache = Mutex::new(ChunkVectors::default());
        let (ranked, r) = rank(Some(&e), &cache, 4, |i| texts[i], "heating");
        assert_eq!(ranked, [1, 3], "only the passages within the distance, nearest first");
        assert_eq!((r.status, r.selected, r.embedded), (SemanticStatus::Full, 4, 4));
        let calls = e.calls.load(std::sync::atomic::Ordering::SeqCst);
        let (_, r2) = rank(Some(&e), &cache, 4, |i| texts[i], "rent");
        assert_eq!(r2.status, SemanticStatus::Full);
        // The passages' vectors were kept: only the question was embedded again.
        assert_eq!(e.calls.load(std::sync::atomic::Ordering::SeqCst), calls + 1);
        // Nothing near: nothing by meaning.
        let (none, _) = rank(Some(&e), &cache, 4, |i| texts[i], "weather");
        assert!(none.is_empty());
        // No embedder: disabled.
        let (_, off) = rank(None, &cache, 4, |i| texts[i], "rent");
        assert_eq!(off.status, SemanticStatus::Disabled);
    }

    #[test]
    fn a_failed_batch_is_partial_and_retried_and_a_long_document_is_sampled() {
        let e = Topics { fail_batches: 1.into(), calls: 0.into() };
        let cache = Mutex::new(ChunkVectors::default());
        let n = 600;
        let text = |i: usize| if i.is_multiple_of(2) { "boiler" } else { "rent" };
        let (_, r) = rank(Some(&e), &cache, n, text, "boiler");
        assert_eq!((r.status, r.selected, r.embedded), (SemanticStatus::Unavailable, 256, 0));
        let (ranked, r) = rank(Some(&e), &cache, n, text, "boiler");
        assert_eq!((r.status, r.selected, r.embedded), (SemanticStatus::Sampled, 256, 256));
        assert!(ranked.iter().all(|&i| i.is_multiple_of(2)) && ranked.len() == SEMANTIC_CANDIDATES);
        let s = selection(n);
        assert_eq!((s[0], s[255], s.len()), (0, 597, 256));
    }

    #[test]
    fn fusion_merges_ranks_and_prefers_what_both_lists_found() {
        let f = fuse(&[3_usize, 1, 2], &[2, 5]);
        let order: Vec<usize> = f.iter().map(|x| x.chunk).collect();
        assert_eq!(order, [2, 3, 1, 5]);
        assert_eq!((f[0].lexical, f[0].vector), (Some(3), Some(1)));
    }
}
