//! The [`Embedder`] contract.

use super::no_panic;
use crate::{StewardError, index::Embedder};

/// What a fixture embedder answers, for [`embedder_contract`].
#[derive(Debug, Clone, Copy)]
pub struct EmbedderExpectations<'a> {
    /// What [`Embedder::model`] says.
    pub model: &'a str,
    /// The length of every vector.
    pub dimension: usize,
    /// Distinct texts to embed (at least two, at most the embedder's batch size).
    pub texts: &'a [&'a str],
    /// The cosine distance two embeddings of the same text may be apart (0: they must be
    /// equal; a little for a real model whose batches are padded).
    pub tolerance: f32,
}

/// Computed in f64: two equal vectors are 0 apart up to rounding.
fn cosine_distance(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    1.0 - dot / (norm(a) * norm(b))
}

fn embed(e: &dyn Embedder, texts: &[&str]) -> Vec<Vec<f32>> {
    no_panic("embed", || e.embed(texts)).unwrap_or_else(|err| {
        panic!("embed of {} text(s) failed: {err} ({})", texts.len(), err.code())
    })
}

/// Checks `embedder` against the [`Embedder`] contract:
///
/// - `model()` is the expected one; `dimension()` is unknown or the expected one, and stays
///   so; `batch_size()` is at least 1; `max_distance()` is a cosine distance in (0, 2];
/// - a batch of N texts returns N vectors, in order, every one of the dimension, finite and
///   not all zeros;
/// - the same text embeds the same (within the tolerance): asked again, alone, twice in one
///   batch, or in a batch in the reverse order;
/// - an empty batch is no vectors or a typed error, never a panic and never vectors;
/// - a query embeds into a vector of the same dimension.
///
/// # Panics
/// Naming the clause the embedder breaks.
pub fn embedder_contract(embedder: &dyn Embedder, expect: &EmbedderExpectations<'_>) {
    let e = embedder;
    let texts = expect.texts;
    assert!(texts.len() >= 2, "give at least two texts");
    assert_eq!(e.model(), expect.model, "model()");
    let declared = e.dimension();
    assert!(
        declared.is_none() || declared == Some(expect.dimension),
        "dimension() says {declared:?}, the answers have {}",
        expect.dimension
    );
    assert!(e.batch_size() >= 1, "batch_size() must be at least 1");
    assert!(texts.len() <= e.batch_size(), "give at most batch_size() texts");
    let max = e.max_distance();
    assert!(
        max.is_finite() && max > 0.0 && max <= 2.0,
        "max_distance() {max} is no cosine distance"
    );

    let close = |a: &[f32], b: &[f32], what: &str| {
        if a == b {
            return;
        }
        let d = cosine_distance(a, b);
        assert!(
            d <= f64::from(expect.tolerance),
            "{what}: the same text is {d} apart (tolerance {})",
            expect.tolerance
        );
    };
    let check = |v: &[f32], what: &str| {
        assert_eq!(v.len(), expect.dimension, "{what}: a vector of another dimension");
        assert!(v.iter().all(|x| x.is_finite()), "{what}: a vector with NaN or infinity");
        assert!(v.iter().any(|x| *x != 0.0), "{what}: a vector of zeros");
    };

    let vectors = embed(e, texts);
    assert_eq!(vectors.len(), texts.len(), "a batch of N texts must return N vectors");
    for (v, t) in vectors.iter().zip(texts) {
        check(v, &format!("embedding of {t:?}"));
    }

    let again = embed(e, texts);
    assert_eq!(again.len(), texts.len(), "a batch of N texts must return N vectors");
    for ((a, b), t) in again.iter().zip(&vectors).zip(texts) {
        close(a, b, &format!("{t:?} asked again"));
    }
    for (t, v) in texts.iter().zip(&vectors) {
        let alone = embed(e, &[*t]);
        assert_eq!(alone.len(), 1, "a batch of one text must return one vector");
        check(&alone[0], &format!("{t:?} alone"));
        close(&alone[0], v, &format!("{t:?} alone and in a batch"));
    }
    let twice = embed(e, &[texts[0], texts[0]]);
    assert_eq!(twice.len(), 2, "a batch of two texts must return two vectors");
    close(&twice[0], &twice[1], &format!("{:?} twice in one batch", texts[0]));
    let reversed: Vec<&str> = texts.iter().rev().copied().collect();
    let back = embed(e, &reversed);
    assert_eq!(back.len(), texts.len(), "a batch of N texts must return N vectors");
    for ((a, b), t) in back.iter().rev().zip(&vectors).zip(texts) {
        close(a, b, &format!("{t:?} in a reversed batch"));
    }

    match no_panic("embed of no text", || e.embed(&[])) {
        Ok(v) => assert!(v.is_empty(), "an empty batch returned {} vector(s)", v.len()),
        Err(err) => assert!(!err.code().is_empty(), "{err}"),
    }

    let query = no_panic("embed_query", || e.embed_query(texts[0]))
        .unwrap_or_else(|err| panic!("embed_query failed: {err} ({})", err.code()));
    check(&query, "the query vector");
    assert_eq!(e.dimension(), declared, "dimension() must not change between calls");
}
