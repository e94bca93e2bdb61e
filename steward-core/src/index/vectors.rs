//! Message vectors in sqlite-vec (`<home>/index/vectors.db`), one space per (model, dimension),
//! and the [`Embedder`] trait that fills and queries them.
//!
//! Each space has a vec0 table keyed by message id, `vec_f_<space>`, with the unit-normalized
//! float vectors (cosine distance; the record of truth, and sqlite-vec's exact KNN), and a plain
//! table `vec_q_<space>` with the same vectors as int8 (a plain table loads 10× faster than a
//! vec0 scan). The int8 scale is fixed per space when it is created, from its first batch
//! ([`Q_HEADROOM`] above the largest component; later outliers are clipped).
//!
//! A query runs three passes in memory and one in SQLite:
//! 1. Hamming distance on *centered* sign bits, derived at load from the int8 codes minus their
//!    mean, keeping [`COARSE_FACTOR`]·k (at least [`MIN_COARSE`]) candidates. Centering is what
//!    makes sign bits work on real embeddings: a sentence model's vectors share a strong common
//!    direction (e5's sit at cosine ≈ 0.87 to their centroid), so raw sign bits mostly encode
//!    that direction — measured on real e5 vectors of the demo mailbox, raw bits kept 74% of
//!    the true top 50 at 400 candidates, centered bits 98%.
//! 2. int8 dot products on those candidates, keeping k plus [`RERANK_EXTRA_PERCENT`]% of k
//!    (at least [`MIN_RERANK_EXTRA`] more).
//! 3. Exact cosine on the stored floats for those, nearest first.
//!
//! The in-memory codes are loaded once per space and then kept in step by this store's own
//! writes: each write transaction bumps the space's generation and hands the cache the rows it
//! put or removed, which are applied in place (O(rows changed), plus O(rows) per component whose
//! floor(center) moved — see `Codes::apply`), so the cache stays exactly what a fresh load
//! would build. Only a space written by another handle or process (its generation is not the
//! one the cache was kept at) is loaded again, one load at a time and never while a search of an
//! up-to-date space waits. A space larger than [`MAX_CODE_CACHE_BYTES`] is searched by
//! sqlite-vec's exact scan instead. Spaces written before int8 codes existed are converted when
//! the store opens.
//!
//! Vectors of different models or dimensions never meet: a query vector whose length is not the
//! space's dimension is an error, and a model with no space has no semantic candidates.

use std::{
    collections::HashMap,
    path::Path,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard,
        atomic::{AtomicU64, Ordering},
    },
};

use rusqlite::{OptionalExtension, params};

use crate::{
    Limits,
    embed::EmbedWatermark,
    error::{ErrorKind, StewardError},
    store::{Database, Migration, OpenOptions, Schema, StoreError},
};

/// Largest vector dimension accepted.
pub const MAX_DIMENSION: usize = 4096;
/// Most neighbours one KNN query returns.
pub const MAX_KNN: usize = 500;
/// Candidates kept by the Hamming pass per neighbour asked for.
pub const COARSE_FACTOR: usize = 32;
/// Candidates kept by the Hamming pass at least.
pub const MIN_COARSE: usize = 1_000;
/// A space whose int8 codes fit in this many bytes skips the Hamming pass: all its vectors go
/// to the int8 pass (about a millisecond of scanning).
pub const INT8_FULL_SCAN_BYTES: usize = 2 * 1024 * 1024;
/// Candidates re-ranked on exact cosine beyond the k asked for, in percent of k (after the
/// int8 pass; each costs a read of its floats from sqlite-vec).
pub const RERANK_EXTRA_PERCENT: usize = 50;
/// The fewest extra candidates re-ranked on exact cosine.
pub const MIN_RERANK_EXTRA: usize = 16;
/// The int8 scale leaves this much room above the largest component of a space's first batch.
pub const Q_HEADROOM: f32 = 1.25;
/// Most bytes of codes (int8 and sign bits) kept in memory per space.
pub const MAX_CODE_CACHE_BYTES: usize = 256 * 1024 * 1024;
/// Default farthest cosine distance a KNN neighbour may be to count as a semantic match
/// (similarity ≥ 0.5). Beyond it a neighbour is merely the least unrelated message, and an
/// absent topic must find nothing.
pub const DEFAULT_MAX_VECTOR_DISTANCE: f32 = 0.5;
/// Vectors per sqlite-vec chunk in the float tables.
const FLOAT_CHUNK: usize = 16;
/// Most vectors written in one call.
pub const MAX_VECTOR_BATCH: usize = 1024;

/// The migrations of `vectors.db`.
pub(super) const SCHEMA: Schema = Schema {
    name: "vectors",
    migrations: &[
        Migration {
            version: 1,
            name: "init",
            sql: "CREATE TABLE vector_spaces (
                  id          INTEGER PRIMARY KEY,
                  model       TEXT NOT NULL,
                  dimension   INTEGER NOT NULL CHECK (dimension > 0 AND dimension % 8 = 0),
                  generation  INTEGER NOT NULL DEFAULT 0,
                  created_at  INTEGER NOT NULL,
                  UNIQUE (model, dimension)
              );",
        },
        Migration {
            version: 2,
            name: "embed_state",
            // One row per message the embedding queue has handled: the model and the hash of
            // the source text it embedded (or failed on), when, and the last error. A row whose
            // `embedded_at` is NULL is a failure; `attempts` counts failures charged to the item.
            sql: "CREATE TABLE embed_state (
                  message_id   INTEGER PRIMARY KEY,
                  model        TEXT NOT NULL,
                  dimension    INTEGER,
                  source_hash  BLOB NOT NULL,
                  embedded_at  INTEGER,
                  attempts     INTEGER NOT NULL DEFAULT 0,
                  last_error   TEXT,
                  updated_at   INTEGER NOT NULL
              );",
        },
        Migration {
            version: 3,
            name: "int8_codes",
            // The int8 scale of a space; NULL for a space whose codes are still sign bits in
            // `vec_b_<space>` (converted by `VectorStore::open`).
            sql: "ALTER TABLE vector_spaces ADD COLUMN q_scale REAL;",
        },
        Migration {
            version: 4,
            name: "embed_watermark",
            // The embedding queue's watermark (one row): the model and dimension of its last
            // complete drain and how far into the mirror's sync runs that drain had looked, so
            // the next drain examines only what changed since. Embedded messages per model,
            // counted by triggers (an idle drain reports them without counting), and an index
            // of failures (the only state rows a drain with nothing new to embed retries).
            sql: "CREATE TABLE embed_watermark (
                  id            INTEGER PRIMARY KEY CHECK (id = 1),
                  model         TEXT NOT NULL,
                  dimension     INTEGER NOT NULL,
                  settled_run   INTEGER NOT NULL,
                  seen_run      INTEGER NOT NULL,
                  seen_started  INTEGER NOT NULL,
                  probed_at     INTEGER NOT NULL,
                  updated_at    INTEGER NOT NULL
              );
              CREATE TABLE embed_counts (
                  model     TEXT PRIMARY KEY,
                  embedded  INTEGER NOT NULL
              ) WITHOUT ROWID;
              INSERT INTO embed_counts (model, embedded)
                  SELECT model, count(*) FROM embed_state WHERE embedded_at IS NOT NULL
                  GROUP BY model;
              CREATE TRIGGER embed_counts_insert AFTER INSERT ON embed_state
              WHEN new.embedded_at IS NOT NULL
              BEGIN
                  INSERT INTO embed_counts (model, embedded) SELECT new.model, 0
                      WHERE NOT EXISTS (SELECT 1 FROM embed_counts WHERE model = new.model);
                  UPDATE embed_counts SET embedded = embedded + 1 WHERE model = new.model;
              END;
              CREATE TRIGGER embed_counts_delete AFTER DELETE ON embed_state
              WHEN old.embedded_at IS NOT NULL
              BEGIN
                  UPDATE embed_counts SET embedded = embedded - 1 WHERE model = old.model;
              END;
              CREATE TRIGGER embed_counts_update AFTER UPDATE OF model, embedded_at ON embed_state
              WHEN (old.embedded_at IS NOT NULL) <> (new.embedded_at IS NOT NULL)
                   OR old.model <> new.model
              BEGIN
                  UPDATE embed_counts SET embedded = embedded - 1
                      WHERE model = old.model AND old.embedded_at IS NOT NULL;
                  INSERT INTO embed_counts (model, embedded) SELECT new.model, 0
                      WHERE new.embedded_at IS NOT NULL
                        AND NOT EXISTS (SELECT 1 FROM embed_counts WHERE model = new.model);
                  UPDATE embed_counts SET embedded = embedded + 1
                      WHERE model = new.model AND new.embedded_at IS NOT NULL;
              END;
              CREATE INDEX embed_state_failed ON embed_state (model, attempts)
                  WHERE embedded_at IS NULL;",
        },
    ],
};

/// What the embedding queue last recorded for one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedState {
    /// The model it was embedded with (or failed on).
    pub model: String,
    /// The dimension of its vector; `None` after a failure.
    pub dimension: Option<usize>,
    /// SHA-256 of the source text.
    pub source_hash: [u8; 32],
    /// When it was embedded (Unix seconds); `None` after a failure.
    pub embedded_at: Option<i64>,
    /// Failures charged to this message for this source and model.
    pub attempts: u32,
    /// The last failure.
    pub last_error: Option<String>,
}

/// One embedded message for [`VectorStore::store_embedded`].
#[derive(Debug, Clone)]
pub struct EmbeddedItem {
    /// The message id.
    pub id: i64,
    /// SHA-256 of the source text.
    pub source_hash: [u8; 32],
    /// Its vector.
    pub vector: Vec<f32>,
}

/// One message the embedder refused, for [`VectorStore::record_embed_failures`].
#[derive(Debug, Clone)]
pub struct FailedItem {
    /// The message id.
    pub id: i64,
    /// SHA-256 of the source text.
    pub source_hash: [u8; 32],
    /// Why.
    pub error: String,
}

/// Why an embedder failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// The endpoint cannot be reached or failed; retrying later may help.
    #[error("embedder unavailable: {0}")]
    Unavailable(String),
    /// The endpoint refused this input.
    #[error("embedder rejected the input: {0}")]
    Rejected(String),
    /// The endpoint asked to be called again later (HTTP 429).
    #[error("embedder is rate limited; retry in {retry_after_secs} s")]
    Throttled {
        /// Its `Retry-After`, in seconds (a default when it gave none).
        retry_after_secs: u64,
    },
}

impl StewardError for EmbedError {
    fn code(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "EMBED_UNAVAILABLE",
            Self::Rejected(_) => "EMBED_REJECTED",
            Self::Throttled { .. } => "EMBED_THROTTLED",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Unavailable(_) | Self::Throttled { .. } => ErrorKind::Unavailable,
            Self::Rejected(_) => ErrorKind::InvalidInput,
        }
    }
}

/// Turns texts into vectors. Implementations: [`crate::embed::OpenAiEmbedder`] (any
/// OpenAI-compatible `/v1/embeddings` endpoint) and, in tests and benchmarks, fixed vectors.
pub trait Embedder: Send + Sync {
    /// The model name; with the dimension it names the vector space.
    fn model(&self) -> &str;
    /// The dimension this embedder is known to produce before its first answer (configured),
    /// else `None`: the answers then tell, and the store keeps one space per dimension.
    fn dimension(&self) -> Option<usize>;
    /// Document vectors, one per text, in order. A member the endpoint left out comes back
    /// empty (the queue retries it alone).
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// The vector of a search query. Models trained with query and passage prefixes embed the
    /// two differently; by default a query is embedded like a document.
    fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut v = self.embed(&[text])?;
        match (v.pop(), v.is_empty()) {
            (Some(q), true) => Ok(q),
            _ => Err(EmbedError::Unavailable("the embedder answered with a wrong count".into())),
        }
    }
    /// The vectors of the calibration probe queries ([`super::calibration::PROBE_QUERIES`]),
    /// embedded like queries, one per text, in order. By default one [`Self::embed_query`]
    /// each; an embedder that can batch them sends them in one request (the gateway does,
    /// attributed to `search.calibration` in the usage ledger).
    fn embed_probes(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        texts.iter().map(|t| self.embed_query(t)).collect()
    }
    /// The farthest cosine distance that still means "related" for this model (models differ:
    /// the gateway takes it from configuration).
    fn max_distance(&self) -> f32 {
        DEFAULT_MAX_VECTOR_DISTANCE
    }
    /// Texts per request this embedder wants (the queue's batches).
    fn batch_size(&self) -> usize {
        crate::embed::EMBED_BATCH
    }
}

/// Errors of the vector store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VectorError {
    /// A vector's length is not the space's dimension.
    #[error("vector has {found} dimensions; the space of {model} has {expected}")]
    DimensionMismatch {
        /// The model.
        model: String,
        /// The space's dimension.
        expected: usize,
        /// The vector's length.
        found: usize,
    },
    /// A dimension that is zero, not a multiple of 8, or above [`MAX_DIMENSION`].
    #[error("dimension {0} is not supported (a multiple of 8, at most {MAX_DIMENSION})")]
    BadDimension(usize),
    /// A vector with NaN, infinite or all-zero components.
    #[error("vector for message {0} is not finite or is all zeros")]
    BadVector(i64),
    /// A count outside its bounds.
    #[error("{what} {value} is out of range (1..={max})")]
    OutOfRange {
        /// What.
        what: &'static str,
        /// The value given.
        value: usize,
        /// The bound.
        max: usize,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StewardError for VectorError {
    fn code(&self) -> &'static str {
        match self {
            Self::DimensionMismatch { .. } => "VECTOR_DIMENSION_MISMATCH",
            Self::BadDimension(_) => "VECTOR_BAD_DIMENSION",
            Self::BadVector(_) => "VECTOR_INVALID",
            Self::OutOfRange { .. } => "LIMIT_OUT_OF_RANGE",
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Store(e) => e.kind(),
            _ => ErrorKind::InvalidInput,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Space {
    id: i64,
    dimension: usize,
    generation: i64,
}

/// The codes of one space, in memory: what a load of `vec_q_<space>` builds, and what
/// [`Codes::apply`] keeps it equal to as this store writes.
///
/// Rows are in no particular order (appended, swap-removed): nothing a query computes depends
/// on it, since every tie is broken by message id.
#[derive(Debug)]
struct Codes {
    /// The space's generation these codes reflect.
    generation: i64,
    dim: usize,
    words: usize,
    ids: Vec<i64>,
    /// The row of each id.
    rows: HashMap<i64, usize>,
    /// int8 codes, `dim` per vector.
    q: Vec<i8>,
    /// Centered sign bits, `words` per vector.
    bits: Vec<u64>,
    /// The sum of the int8 codes, per component (exact: the center follows every write).
    sums: Vec<i64>,
    /// The mean of the int8 codes, per component.
    center: Vec<f32>,
    /// `floor(center)` as a code: an integer code is above the center exactly when it is above
    /// this, so the bits of a row depend on the center only through these.
    floors: Vec<i8>,
    /// Float → int8 factor.
    scale: f32,
}

/// One change to a space's codes, in the order its transaction made it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CodeOp {
    /// The message's code is (now) this one.
    Put(i64, Vec<u8>),
    /// The message has no vector in the space any more.
    Remove(i64),
}

/// What one write transaction did to one space: its generation before and after, and the
/// changes in order.
#[derive(Debug, Default)]
struct SpaceDelta {
    before: i64,
    after: i64,
    ops: Vec<CodeOp>,
}

/// The deltas of one transaction, by space id.
type Deltas = HashMap<i64, SpaceDelta>;

/// The centered sign bits of one code: bit j set when `v[j] > floors[j]` (the comparison of
/// bytes vectorizes, and equals what [`push_bits`] computes against the float center).
fn code_bits(v: &[i8], floors: &[i8], out: &mut [u64]) {
    for ((xs, ts), w) in v.chunks(64).zip(floors.chunks(64)).zip(out) {
        let mut word = 0u64;
        for (k, (x, t)) in xs.iter().zip(ts).enumerate() {
            word |= u64::from(x > t) << k;
        }
        *w = word;
    }
}

impl Codes {
    fn new(generation: i64, dim: usize, ids: Vec<i64>, q: Vec<i8>, scale: f32) -> Self {
        let words = dim.div_ceil(64);
        // The code sums, in integers (exact, and the loop vectorizes).
        let mut sums = vec![0i64; dim];
        for v in q.chunks_exact(dim) {
            for (s, x) in sums.iter_mut().zip(v) {
                *s += i64::from(*x);
            }
        }
        let rows = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let mut codes = Self {
            generation,
            dim,
            words,
            ids,
            rows,
            q,
            bits: Vec::new(),
            sums,
            center: Vec::new(),
            floors: Vec::new(),
            scale,
        };
        codes.set_center();
        codes.fill_bits();
        codes
    }

    /// The center and its floors, from the sums.
    fn set_center(&mut self) {
        let n = self.ids.len();
        #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
        let center: Vec<f32> = self
            .sums
            .iter()
            .map(|s| if n == 0 { 0.0 } else { (*s as f64 / n as f64) as f32 })
            .collect();
        // For an integer code x, `x > c` exactly when `x > floor(c)`.
        #[allow(clippy::cast_possible_truncation)]
        let floors = center.iter().map(|c| c.floor().clamp(-128.0, 127.0) as i8).collect();
        self.center = center;
        self.floors = floors;
    }

    /// Every row's bits, from the floors.
    fn fill_bits(&mut self) {
        let n = self.ids.len();
        self.bits.clear();
        self.bits.resize(n * self.words, 0);
        for (v, out) in self.q.chunks_exact(self.dim).zip(self.bits.chunks_exact_mut(self.words)) {
            code_bits(v, &self.floors, out);
        }
    }

    /// Bytes held for codes and bits (what [`MAX_CODE_CACHE_BYTES`] bounds).
    fn bytes(&self) -> usize {
        self.ids.len().saturating_mul(self.dim + self.words * 8)
    }

    fn add_row(&mut self, row: usize, sign: i64) {
        let v = &self.q[row * self.dim..(row + 1) * self.dim];
        for (s, x) in self.sums.iter_mut().zip(v) {
            *s += sign * i64::from(*x);
        }
    }

    /// Applies one transaction's changes, in order, leaving exactly the rows, center and bits a
    /// fresh load of the space would build (up to row order).
    ///
    /// Cost: O(dim) per row put or removed, then, for each component whose `floor(center)`
    /// moved, one pass over that component of every row (the bits of a row depend on the
    /// center only through the floors). Appending n rows to N moves a mean by at most
    /// 255·n/N, so on a large space few floors move per batch; when more than an eighth of
    /// them move, every row's bits are recomputed from memory instead (the cost of a build
    /// without the read, and never a reload).
    fn apply(&mut self, ops: &[CodeOp]) {
        let (dim, words) = (self.dim, self.words);
        let mut dirty: Vec<i64> = Vec::new();
        for op in ops {
            match op {
                CodeOp::Remove(id) => {
                    let Some(row) = self.rows.remove(id) else { continue };
                    self.add_row(row, -1);
                    let last = self.ids.len() - 1;
                    if row != last {
                        let moved = self.ids[last];
                        self.ids[row] = moved;
                        self.q.copy_within(last * dim..(last + 1) * dim, row * dim);
                        self.bits.copy_within(last * words..(last + 1) * words, row * words);
                        self.rows.insert(moved, row);
                    }
                    self.ids.truncate(last);
                    self.q.truncate(last * dim);
                    self.bits.truncate(last * words);
                }
                CodeOp::Put(id, code) => {
                    let row = if let Some(&row) = self.rows.get(id) {
                        self.add_row(row, -1);
                        row
                    } else {
                        let row = self.ids.len();
                        self.ids.push(*id);
                        self.q.resize(self.q.len() + dim, 0);
                        self.bits.resize(self.bits.len() + words, 0);
                        self.rows.insert(*id, row);
                        row
                    };
                    // As a load reads a stored code: cut or padded to the dimension.
                    let dst = &mut self.q[row * dim..(row + 1) * dim];
                    dst.fill(0);
                    for (d, b) in dst.iter_mut().zip(code) {
                        *d = i8::from_ne_bytes([*b]);
                    }
                    self.add_row(row, 1);
                    dirty.push(*id);
                }
            }
        }
        let old = std::mem::take(&mut self.floors);
        self.set_center();
        let moved: Vec<usize> = (0..dim).filter(|j| old.get(*j) != self.floors.get(*j)).collect();
        if moved.len() * 8 > dim {
            self.fill_bits();
            return;
        }
        for j in moved {
            let (w, mask, t) = (j / 64, 1u64 << (j % 64), self.floors[j]);
            for (v, b) in self.q.chunks_exact(dim).zip(self.bits.chunks_exact_mut(words)) {
                if v[j] > t {
                    b[w] |= mask;
                } else {
                    b[w] &= !mask;
                }
            }
        }
        for id in dirty {
            if let Some(&row) = self.rows.get(&id) {
                let v = &self.q[row * dim..(row + 1) * dim];
                code_bits(v, &self.floors, &mut self.bits[row * words..(row + 1) * words]);
            }
        }
    }

    /// Ids of the k + [`RERANK_EXTRA_PERCENT`]% best candidates for the unit vector `unit`:
    /// Hamming on centered bits (unless the int8 codes are at most `full_scan_bytes`), then
    /// int8 dot products. Ties are broken by message id at both cuts, so the answer depends on
    /// the rows, not on their order.
    fn candidates(&self, unit: &[f32], k: usize, full_scan_bytes: usize) -> Vec<i64> {
        let n = self.ids.len();
        let coarse = (k * COARSE_FACTOR).max(MIN_COARSE);
        let mut pool: Vec<usize> = if n <= coarse || self.q.len() <= full_scan_bytes {
            (0..n).collect()
        } else {
            let mut qb = Vec::with_capacity(self.words);
            push_bits(unit.iter().map(|x| x * self.scale), &self.center, self.words, &mut qb);
            // Distances, then a histogram to find the cut (a distance is at most the
            // dimension): two linear passes instead of sorting 100,000 pairs.
            let dist: Vec<u16> = self
                .bits
                .chunks_exact(self.words)
                .map(|c| {
                    let d: u32 = c.iter().zip(&qb).map(|(a, b)| (a ^ b).count_ones()).sum();
                    u16::try_from(d).unwrap_or(u16::MAX)
                })
                .collect();
            let mut histogram = vec![0usize; self.dim + 2];
            for d in &dist {
                histogram[usize::from(*d).min(self.dim + 1)] += 1;
            }
            let (mut cut, mut below) = (0usize, 0usize);
            while cut < histogram.len() && below + histogram[cut] < coarse {
                below += histogram[cut];
                cut += 1;
            }
            // Everything nearer than `cut`, then the ties at `cut` with the smallest ids until
            // `coarse`.
            let mut pool = Vec::with_capacity(coarse);
            let mut tied = Vec::new();
            for (i, d) in dist.iter().enumerate() {
                let d = usize::from(*d);
                if d < cut {
                    pool.push(i);
                } else if d == cut {
                    tied.push(i);
                }
            }
            let ties = coarse.saturating_sub(below);
            if tied.len() > ties {
                tied.select_nth_unstable_by_key(ties, |i| self.ids[*i]);
                tied.truncate(ties);
            }
            pool.extend(tied);
            pool
        };
        let fine = (k + (k * RERANK_EXTRA_PERCENT / 100).max(MIN_RERANK_EXTRA)).min(pool.len());
        if fine == 0 {
            return Vec::new();
        }
        // The query in the space's int8 scale: integer dot products vectorize.
        let qq: Vec<i8> = quantize(unit, self.scale).into_iter().map(|b| b as i8).collect();
        let mut scored: Vec<(i32, i64)> = pool
            .drain(..)
            .map(|i| (dot_i8(&self.q[i * self.dim..(i + 1) * self.dim], &qq), self.ids[i]))
            .collect();
        if fine < scored.len() {
            scored.select_nth_unstable_by(fine - 1, |a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            scored.truncate(fine);
        }
        scored.into_iter().map(|(_, id)| id).collect()
    }
}

/// The dot product of two int8 codes (exact in i32 for dimensions up to 133,000).
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum()
}

/// Appends the sign bits of `v - center` as `words` little-endian words.
fn push_bits(v: impl Iterator<Item = f32>, center: &[f32], words: usize, out: &mut Vec<u64>) {
    let start = out.len();
    out.resize(start + words, 0);
    for (j, (x, c)) in v.zip(center).enumerate() {
        if x > *c {
            out[start + j / 64] |= 1 << (j % 64);
        }
    }
}

/// A neighbour: message id and cosine distance (0 = same direction, 2 = opposite).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Neighbour {
    /// The message id.
    pub id: i64,
    /// Cosine distance.
    pub distance: f32,
}

/// The vector store of one Steward home.
#[derive(Debug)]
pub struct VectorStore {
    db: Database,
    cache: CodeCache,
}

/// The in-memory codes of the spaces searched so far.
#[derive(Debug, Default)]
struct CodeCache {
    /// By space id. The map's lock is held only to look up, insert or remove; each space's
    /// codes have their own lock, taken for reading by searches and for writing by a delta.
    spaces: Mutex<HashMap<i64, Arc<RwLock<Codes>>>>,
    /// Held by a write of this store from before its transaction until its delta is applied,
    /// and by a load: so a search that finds its space's generation ahead of the cache waits
    /// for that write's delta instead of loading the space again, and a space is loaded once.
    maintain: Mutex<()>,
    /// Loads from the database (see [`VectorStore::cache_rebuilds`]).
    loads: AtomicU64,
}

/// What a load of a space's codes found.
enum Load {
    /// The cache is at the space's current generation already.
    Current(Arc<RwLock<Codes>>),
    /// The codes, read in one snapshot.
    Loaded(Box<Codes>),
    /// More than [`MAX_CODE_CACHE_BYTES`].
    TooLarge,
    /// The space is gone.
    Gone,
}

/// The codes a search uses, if any.
enum Cached {
    /// Up to date with the space's generation.
    Codes(Arc<RwLock<Codes>>),
    /// The space is larger than [`MAX_CODE_CACHE_BYTES`]: sqlite-vec's exact scan.
    TooLarge,
    /// The space is gone (dropped meanwhile).
    Gone,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read_codes(c: &RwLock<Codes>) -> RwLockReadGuard<'_, Codes> {
    c.read().unwrap_or_else(PoisonError::into_inner)
}

/// Bumps the generation of `space` in this transaction and returns its delta (created with the
/// generation before on the first bump). `None` when the space is gone.
fn bump<'d>(
    tx: &rusqlite::Transaction<'_>,
    space: i64,
    deltas: &'d mut Deltas,
) -> Result<Option<&'d mut SpaceDelta>, StoreError> {
    let generation: Option<i64> = tx
        .query_row(
            "UPDATE vector_spaces SET generation = generation + 1 WHERE id = ?1
             RETURNING generation",
            [space],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| StoreError::query("bump vector generation", e))?;
    let Some(generation) = generation else { return Ok(None) };
    let d = deltas.entry(space).or_insert_with(|| SpaceDelta {
        before: generation - 1,
        after: generation,
        ops: Vec::new(),
    });
    d.after = generation;
    Ok(Some(d))
}

fn normalized(id: i64, v: &[f32]) -> Result<Vec<f32>, VectorError> {
    let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if !norm.is_finite() || norm == 0.0 || v.iter().any(|x| !x.is_finite()) {
        return Err(VectorError::BadVector(id));
    }
    #[allow(clippy::cast_possible_truncation)]
    let inv = (1.0 / norm) as f32;
    Ok(v.iter().map(|x| x * inv).collect())
}

fn float_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A vector checked against its space: its id, its stored float form and the unit vector.
fn vector_row(
    model: &str,
    dimension: usize,
    id: i64,
    v: &[f32],
) -> Result<(i64, Vec<u8>, Vec<f32>), VectorError> {
    if v.len() != dimension {
        return Err(VectorError::DimensionMismatch {
            model: model.to_owned(),
            expected: dimension,
            found: v.len(),
        });
    }
    let unit = normalized(id, v)?;
    Ok((id, float_blob(&unit), unit))
}

/// The int8 scale for vectors whose largest component is `max_abs`.
fn q_scale_for(max_abs: f32) -> f32 {
    if max_abs > 0.0 && max_abs.is_finite() { 127.0 / (max_abs * Q_HEADROOM) } else { 127.0 }
}

fn max_abs<'a>(vectors: impl Iterator<Item = &'a [f32]>) -> f32 {
    vectors.flat_map(|v| v.iter()).fold(0f32, |m, x| m.max(x.abs()))
}

/// The int8 code of a unit vector (clipped at ±127).
fn quantize(unit: &[f32], scale: f32) -> Vec<u8> {
    unit.iter()
        .map(|x| {
            #[allow(clippy::cast_possible_truncation)]
            let q = (x * scale).round().clamp(-127.0, 127.0) as i8;
            q.to_ne_bytes()[0]
        })
        .collect()
}

/// Writes checked rows into the space of (`model`, `dimension`), creating it on first use (its
/// int8 scale from these rows).
fn write_vectors(
    tx: &rusqlite::Transaction<'_>,
    model: &str,
    dimension: usize,
    rows: &[(i64, Vec<u8>, Vec<f32>)],
    deltas: &mut Deltas,
) -> Result<(), VectorError> {
    let dim = i64::try_from(dimension).unwrap_or(i64::MAX);
    let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
    let scale = q_scale_for(max_abs(rows.iter().map(|r| r.2.as_slice())));
    tx.execute(
        "INSERT OR IGNORE INTO vector_spaces (model, dimension, created_at, q_scale)
         VALUES (?1, ?2, ?3, ?4)",
        params![model, dim, crate::time::now_secs(), f64::from(scale)],
    )
    .map_err(q("create vector space"))?;
    let (id, scale): (i64, Option<f64>) = tx
        .query_row(
            "SELECT id, q_scale FROM vector_spaces WHERE model = ?1 AND dimension = ?2",
            params![model, dim],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(q("vector space id"))?;
    #[allow(clippy::cast_possible_truncation)]
    let scale = scale.map_or(127.0, |s| s as f32);
    create_tables(tx, id, dimension)?;
    let mut ops = Vec::with_capacity(rows.len());
    for (mid, floats, unit) in rows {
        tx.execute(&format!("DELETE FROM vec_f_{id} WHERE rowid = ?1"), [mid])
            .map_err(q("replace vector"))?;
        tx.execute(
            &format!("INSERT INTO vec_f_{id} (rowid, embedding) VALUES (?1, ?2)"),
            params![mid, floats],
        )
        .map_err(q("insert vector"))?;
        let code = quantize(unit, scale);
        tx.execute(
            &format!("INSERT OR REPLACE INTO vec_q_{id} (id, q) VALUES (?1, ?2)"),
            params![mid, code],
        )
        .map_err(q("insert code"))?;
        ops.push(CodeOp::Put(*mid, code));
    }
    if let Some(d) = bump(tx, id, deltas)? {
        d.ops.extend(ops);
    }
    Ok(())
}

fn create_tables(
    tx: &rusqlite::Transaction<'_>,
    id: i64,
    dimension: usize,
) -> Result<(), StoreError> {
    // Small float chunks: a re-rank reads single vectors, and SQLite reaches an offset
    // inside a blob by walking its overflow chain — through a 4 MB chunk (1,024 vectors
    // of 1,024-d, sqlite-vec's default) that cost ~300 µs per vector.
    tx.execute_batch(&format!(
        "CREATE VIRTUAL TABLE IF NOT EXISTS vec_f_{id}
             USING vec0(embedding float[{dimension}] distance_metric=cosine,
                        chunk_size={FLOAT_CHUNK});
         CREATE TABLE IF NOT EXISTS vec_q_{id} (id INTEGER PRIMARY KEY, q BLOB NOT NULL);"
    ))
    .map_err(|e| StoreError::query("create vector tables", e))
}

/// Gives a space written with sign-bit codes (before migration 3) its int8 codes, from the
/// floats.
fn convert_space(
    tx: &rusqlite::Transaction<'_>,
    id: i64,
    dimension: usize,
) -> Result<(), StoreError> {
    let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
    let rows: Vec<(i64, Vec<f32>)> = tx
        .prepare(&format!("SELECT rowid, embedding FROM vec_f_{id}"))
        .and_then(|mut s| {
            s.query_map([], |r| {
                let blob: Vec<u8> = r.get(1)?;
                let v = blob
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                Ok((r.get(0)?, v))
            })?
            .collect()
        })
        .map_err(q("read vectors to convert"))?;
    let scale = q_scale_for(max_abs(rows.iter().map(|r| r.1.as_slice())));
    create_tables(tx, id, dimension)?;
    for (mid, v) in &rows {
        tx.execute(
            &format!("INSERT OR REPLACE INTO vec_q_{id} (id, q) VALUES (?1, ?2)"),
            params![mid, quantize(v, scale)],
        )
        .map_err(q("convert code"))?;
    }
    tx.execute_batch(&format!("DROP TABLE IF EXISTS vec_b_{id};")).map_err(q("drop sign bits"))?;
    tx.execute(
        "UPDATE vector_spaces SET q_scale = ?2, generation = generation + 1 WHERE id = ?1",
        params![id, f64::from(scale)],
    )
    .map_err(q("convert space"))?;
    Ok(())
}

/// Deletes `ids` from every space in `spaces`.
fn delete_vectors(
    tx: &rusqlite::Transaction<'_>,
    spaces: &[i64],
    ids: &[i64],
    deltas: &mut Deltas,
) -> Result<(), StoreError> {
    let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
    for space in spaces {
        for id in ids {
            tx.execute(&format!("DELETE FROM vec_f_{space} WHERE rowid = ?1"), [id])
                .map_err(q("remove vector"))?;
            tx.execute(&format!("DELETE FROM vec_q_{space} WHERE id = ?1"), [id])
                .map_err(q("remove code"))?;
        }
        if let Some(d) = bump(tx, *space, deltas)? {
            d.ops.extend(ids.iter().map(|id| CodeOp::Remove(*id)));
        }
    }
    Ok(())
}

/// The columns [`state_row`] reads.
const STATE_COLUMNS: &str =
    "message_id, model, dimension, source_hash, embedded_at, attempts, last_error";

fn state_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, EmbedState)> {
    Ok((
        r.get(0)?,
        EmbedState {
            model: r.get(1)?,
            dimension: r.get::<_, Option<i64>>(2)?.and_then(|d| usize::try_from(d).ok()),
            source_hash: hash_of(&r.get::<_, Vec<u8>>(3)?),
            embedded_at: r.get(4)?,
            attempts: r.get(5)?,
            last_error: r.get(6)?,
        },
    ))
}

fn hash_of(blob: &[u8]) -> [u8; 32] {
    let mut h = [0u8; 32];
    if blob.len() == 32 {
        h.copy_from_slice(blob);
    }
    h
}

impl VectorStore {
    /// Opens (creating if needed) `<dir>/vectors.db`.
    pub fn open(dir: &Path, limits: &Limits) -> Result<Self, VectorError> {
        std::fs::create_dir_all(dir).map_err(|e| {
            VectorError::Store(StoreError::Open { path: dir.to_path_buf(), source: Box::new(e) })
        })?;
        let db =
            Database::open(&dir.join("vectors.db"), &SCHEMA, OpenOptions::from_limits(limits))?;
        let old: Vec<(i64, i64)> = db.read(|c| {
            c.prepare("SELECT id, dimension FROM vector_spaces WHERE q_scale IS NULL")
                .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
                .map_err(|e| StoreError::query("vector spaces to convert", e))
        })?;
        for (id, dim) in old {
            let dim = usize::try_from(dim).unwrap_or(0);
            db.write(|tx| convert_space(tx, id, dim))?;
        }
        Ok(Self { db, cache: CodeCache::default() })
    }

    /// Runs one write transaction that may change spaces, then applies what it changed to the
    /// loaded codes (see [`Codes::apply`]): the caches of this store follow its writes without
    /// being loaded again.
    fn write_tracked<T>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>, &mut Deltas) -> Result<T, VectorError>,
    ) -> Result<T, VectorError> {
        let _maintain = lock(&self.cache.maintain);
        let mut deltas = Deltas::new();
        let out = self.db.write(|tx| f(tx, &mut deltas))?;
        for (space, delta) in deltas {
            let Some(c) = lock(&self.cache.spaces).get(&space).cloned() else { continue };
            let Ok(mut codes) = c.write() else {
                // A panic mid-apply: the codes cannot be trusted; the next search loads.
                lock(&self.cache.spaces).remove(&space);
                continue;
            };
            if codes.generation != delta.before {
                // Behind another writer (another handle or process): the next search loads.
                continue;
            }
            codes.apply(&delta.ops);
            codes.generation = delta.after;
            if codes.bytes() > MAX_CODE_CACHE_BYTES {
                drop(codes);
                lock(&self.cache.spaces).remove(&space);
            }
        }
        Ok(out)
    }

    /// Code caches loaded whole from the database since this store was opened: the first
    /// search of each space, and a space written since by another handle or process. This
    /// store's own writes update a loaded cache in place and never cause one (for tests and
    /// benchmarks).
    pub fn cache_rebuilds(&self) -> u64 {
        self.cache.loads.load(Ordering::Relaxed)
    }

    fn space(&self, model: &str, dimension: usize) -> Result<Option<Space>, VectorError> {
        let dim = i64::try_from(dimension).unwrap_or(i64::MAX);
        Ok(self.db.read(|c| {
            c.prepare_cached(
                "SELECT id, generation FROM vector_spaces WHERE model = ?1 AND dimension = ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![model, dim], |r| {
                    Ok(Space { id: r.get(0)?, dimension, generation: r.get(1)? })
                })
                .optional()
            })
            .map_err(|e| StoreError::query("vector space", e))
        })?)
    }

    /// The dimensions this model has vectors in.
    pub fn dimensions(&self, model: &str) -> Result<Vec<usize>, VectorError> {
        Ok(self.db.read(|c| {
            let mut s = c
                .prepare_cached("SELECT dimension FROM vector_spaces WHERE model = ?1")
                .map_err(|e| StoreError::query("vector dimensions", e))?;
            let rows = s
                .query_map([model], |r| r.get::<_, i64>(0))
                .and_then(Iterator::collect::<Result<Vec<i64>, _>>)
                .map_err(|e| StoreError::query("vector dimensions", e))?;
            Ok::<_, StoreError>(rows.into_iter().filter_map(|d| usize::try_from(d).ok()).collect())
        })?)
    }

    /// Stores (replacing) the vectors of messages in the space of (`model`, `dimension`),
    /// creating the space on first use. All or nothing: one bad vector rejects the batch.
    pub fn upsert(
        &self,
        model: &str,
        dimension: usize,
        vectors: &[(i64, Vec<f32>)],
    ) -> Result<(), VectorError> {
        if dimension == 0 || !dimension.is_multiple_of(8) || dimension > MAX_DIMENSION {
            return Err(VectorError::BadDimension(dimension));
        }
        if vectors.len() > MAX_VECTOR_BATCH {
            return Err(VectorError::OutOfRange {
                what: "vector batch",
                value: vectors.len(),
                max: MAX_VECTOR_BATCH,
            });
        }
        let rows = vectors
            .iter()
            .map(|(id, v)| vector_row(model, dimension, *id, v))
            .collect::<Result<Vec<_>, _>>()?;
        self.write_tracked(|tx, deltas| write_vectors(tx, model, dimension, &rows, deltas))
    }

    /// Drops the vectors of `ids` from every space (messages soft-deleted or re-embedded).
    pub fn remove(&self, ids: &[i64]) -> Result<(), VectorError> {
        let spaces = self.space_ids()?;
        self.write_tracked(|tx, deltas| {
            delete_vectors(tx, &spaces, ids, deltas)?;
            for id in ids {
                tx.execute("DELETE FROM embed_state WHERE message_id = ?1", [id])
                    .map_err(|e| StoreError::query("remove embed state", e))?;
            }
            Ok::<_, VectorError>(())
        })
    }

    fn space_ids(&self) -> Result<Vec<i64>, StoreError> {
        self.db.read(|c| {
            c.prepare_cached("SELECT id FROM vector_spaces")
                .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
                .map_err(|e| StoreError::query("vector spaces", e))
        })
    }

    /// What the embedding queue recorded, by message id.
    pub fn embed_states(&self) -> Result<HashMap<i64, EmbedState>, VectorError> {
        Ok(self.db.read(|c| {
            let mut s = c
                .prepare(&format!("SELECT {STATE_COLUMNS} FROM embed_state"))
                .map_err(|e| StoreError::query("embed state", e))?;
            let rows = s
                .query_map([], state_row)
                .and_then(Iterator::collect::<Result<HashMap<_, _>, _>>)
                .map_err(|e| StoreError::query("embed state", e))?;
            Ok::<_, StoreError>(rows)
        })?)
    }

    /// What the embedding queue recorded for `ids` (one primary-key read each).
    pub(crate) fn embed_states_of(
        &self,
        ids: &[i64],
    ) -> Result<HashMap<i64, EmbedState>, VectorError> {
        Ok(self.db.read(|c| {
            let mut s = c
                .prepare_cached(&format!(
                    "SELECT {STATE_COLUMNS} FROM embed_state WHERE message_id = ?1"
                ))
                .map_err(|e| StoreError::query("embed state", e))?;
            let mut out = HashMap::with_capacity(ids.len());
            for id in ids {
                if let Some((id, state)) = s
                    .query_row([id], state_row)
                    .optional()
                    .map_err(|e| StoreError::query("embed state", e))?
                {
                    out.insert(id, state);
                }
            }
            Ok::<_, StoreError>(out)
        })?)
    }

    /// Messages whose last attempt with `model` failed and was charged fewer than
    /// `max_attempts` times, in id order: what a drain retries though they did not change
    /// (read through the index of failures, so a drain with none reads nothing).
    pub(crate) fn retryable_failures(
        &self,
        model: &str,
        max_attempts: u32,
    ) -> Result<Vec<i64>, VectorError> {
        Ok(self.db.read(|c| {
            c.prepare_cached(
                "SELECT message_id FROM embed_state
                 WHERE embedded_at IS NULL AND model = ?1 AND attempts < ?2
                 ORDER BY message_id",
            )
            .and_then(|mut s| s.query_map(params![model, max_attempts], |r| r.get(0))?.collect())
            .map_err(|e| StoreError::query("failed embeddings", e))
        })?)
    }

    /// For `model`: messages embedded (a count kept by triggers) and messages given up (failed
    /// `max_attempts` times; read through the index of failures). No pass over the state.
    pub(crate) fn embed_totals(
        &self,
        model: &str,
        max_attempts: u32,
    ) -> Result<(u64, u64), VectorError> {
        Ok(self.db.read(|c| {
            c.query_row(
                "SELECT coalesce((SELECT embedded FROM embed_counts WHERE model = ?1), 0),
                        (SELECT count(*) FROM embed_state
                         WHERE embedded_at IS NULL AND model = ?1 AND attempts >= ?2)",
                params![model, max_attempts],
                |r| {
                    Ok((
                        u64::try_from(r.get::<_, i64>(0)?).unwrap_or(0),
                        u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
                    ))
                },
            )
            .map_err(|e| StoreError::query("embed totals", e))
        })?)
    }

    /// Where the embedding queue's last complete drain left off, if it recorded it.
    pub(crate) fn embed_watermark(&self) -> Result<Option<EmbedWatermark>, VectorError> {
        Ok(self.db.read(|c| {
            c.query_row(
                "SELECT model, dimension, settled_run, seen_run, seen_started, probed_at
                 FROM embed_watermark WHERE id = 1",
                [],
                |r| {
                    Ok(EmbedWatermark {
                        model: r.get(0)?,
                        dimension: usize::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
                        settled_run: r.get(2)?,
                        seen_run: r.get(3)?,
                        seen_started: r.get(4)?,
                        probed_at: r.get(5)?,
                    })
                },
            )
            .optional()
            .map_err(|e| StoreError::query("embed watermark", e))
        })?)
    }

    /// Records where a complete drain left off.
    pub(crate) fn set_embed_watermark(&self, w: &EmbedWatermark) -> Result<(), VectorError> {
        let dim = i64::try_from(w.dimension).unwrap_or(i64::MAX);
        Ok(self.db.write(|tx| {
            tx.execute(
                "INSERT INTO embed_watermark
                     (id, model, dimension, settled_run, seen_run, seen_started, probed_at,
                      updated_at)
                 VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (id) DO UPDATE SET
                     model = excluded.model, dimension = excluded.dimension,
                     settled_run = excluded.settled_run, seen_run = excluded.seen_run,
                     seen_started = excluded.seen_started, probed_at = excluded.probed_at,
                     updated_at = excluded.updated_at",
                params![
                    w.model,
                    dim,
                    w.settled_run,
                    w.seen_run,
                    w.seen_started,
                    w.probed_at,
                    crate::time::now_secs()
                ],
            )
            .map(|_| ())
            .map_err(|e| StoreError::query("record embed watermark", e))
        })?)
    }

    /// Forgets where the embedding queue left off: its next drain examines every message again
    /// (an explicit rescan; also what a changed model or dimension does by itself).
    pub fn forget_embed_watermark(&self) -> Result<(), VectorError> {
        Ok(self.db.write(|tx| {
            tx.execute("DELETE FROM embed_watermark", [])
                .map(|_| ())
                .map_err(|e| StoreError::query("forget embed watermark", e))
        })?)
    }

    /// For `model`: messages embedded, messages whose last attempt failed, and the newest
    /// failure's message (for status screens; one indexed pass over the queue's state).
    pub fn embed_summary(&self, model: &str) -> Result<(u64, u64, Option<String>), VectorError> {
        Ok(self.db.read(|c| {
            c.query_row(
                "SELECT count(embedded_at), count(*) - count(embedded_at),
                        (SELECT last_error FROM embed_state
                         WHERE model = ?1 AND embedded_at IS NULL
                         ORDER BY updated_at DESC LIMIT 1)
                 FROM embed_state WHERE model = ?1",
                [model],
                |r| {
                    Ok((
                        u64::try_from(r.get::<_, i64>(0)?).unwrap_or(0),
                        u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
                        r.get(2)?,
                    ))
                },
            )
            .map_err(|e| StoreError::query("embed summary", e))
        })?)
    }

    /// Stores freshly embedded messages and their state in one transaction: their vectors go
    /// into the space of (`model`, `dimension`) and leave every other space.
    pub fn store_embedded(
        &self,
        model: &str,
        dimension: usize,
        items: &[EmbeddedItem],
    ) -> Result<(), VectorError> {
        if dimension == 0 || !dimension.is_multiple_of(8) || dimension > MAX_DIMENSION {
            return Err(VectorError::BadDimension(dimension));
        }
        if items.len() > MAX_VECTOR_BATCH {
            return Err(VectorError::OutOfRange {
                what: "vector batch",
                value: items.len(),
                max: MAX_VECTOR_BATCH,
            });
        }
        let rows = items
            .iter()
            .map(|i| vector_row(model, dimension, i.id, &i.vector))
            .collect::<Result<Vec<_>, _>>()?;
        let spaces = self.space_ids()?;
        let ids: Vec<i64> = items.iter().map(|i| i.id).collect();
        let now = crate::time::now_secs();
        let dim = i64::try_from(dimension).unwrap_or(i64::MAX);
        self.write_tracked(|tx, deltas| {
            delete_vectors(tx, &spaces, &ids, deltas)?;
            write_vectors(tx, model, dimension, &rows, deltas)?;
            for i in items {
                tx.execute(
                    // An upsert, not INSERT OR REPLACE: a replace's delete would not fire the
                    // trigger that counts embedded messages.
                    "INSERT INTO embed_state
                         (message_id, model, dimension, source_hash, embedded_at, attempts,
                          last_error, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, 0, NULL, ?5)
                     ON CONFLICT (message_id) DO UPDATE SET
                         model = excluded.model, dimension = excluded.dimension,
                         source_hash = excluded.source_hash, embedded_at = excluded.embedded_at,
                         attempts = 0, last_error = NULL, updated_at = excluded.updated_at",
                    params![i.id, model, dim, &i.source_hash[..], now],
                )
                .map_err(|e| StoreError::query("record embedding", e))?;
            }
            Ok::<_, VectorError>(())
        })
    }

    /// Records messages the embedder refused: a failure charged to each (counted again only
    /// for the same model and source), and their now stale vectors removed.
    pub fn record_embed_failures(
        &self,
        model: &str,
        items: &[FailedItem],
    ) -> Result<(), VectorError> {
        let spaces = self.space_ids()?;
        let ids: Vec<i64> = items.iter().map(|i| i.id).collect();
        let now = crate::time::now_secs();
        self.write_tracked(|tx, deltas| {
            delete_vectors(tx, &spaces, &ids, deltas)?;
            for i in items {
                tx.execute(
                    "INSERT INTO embed_state
                         (message_id, model, dimension, source_hash, embedded_at, attempts,
                          last_error, updated_at)
                     VALUES (?1, ?2, NULL, ?3, NULL, 1, ?4, ?5)
                     ON CONFLICT (message_id) DO UPDATE SET
                         attempts = CASE WHEN model = excluded.model
                                          AND source_hash = excluded.source_hash
                                          AND embedded_at IS NULL
                                    THEN attempts + 1 ELSE 1 END,
                         model = excluded.model, dimension = NULL,
                         source_hash = excluded.source_hash, embedded_at = NULL,
                         last_error = excluded.last_error, updated_at = excluded.updated_at",
                    params![i.id, model, &i.source_hash[..], i.error, now],
                )
                .map_err(|e| StoreError::query("record embedding failure", e))?;
            }
            Ok::<_, VectorError>(())
        })
    }

    /// Drops every space but (`model`, `dimension`) and the queue state of what was in them,
    /// so that vectors of two models or dimensions never mix. Returns the messages reset.
    pub fn reset_incompatible(&self, model: &str, dimension: usize) -> Result<u64, VectorError> {
        let dim = i64::try_from(dimension).unwrap_or(i64::MAX);
        let dropped: Vec<i64> = self.db.read(|c| {
            c.prepare_cached(
                "SELECT id FROM vector_spaces WHERE NOT (model = ?1 AND dimension = ?2)",
            )
            .and_then(|mut s| s.query_map(params![model, dim], |r| r.get(0))?.collect())
            .map_err(|e| StoreError::query("vector spaces", e))
        })?;
        let _maintain = lock(&self.cache.maintain);
        let reset = self.db.write(|tx| {
            let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
            for space in &dropped {
                tx.execute_batch(&format!(
                    "DROP TABLE IF EXISTS vec_f_{space}; DROP TABLE IF EXISTS vec_q_{space};"
                ))
                .map_err(q("drop vector space"))?;
                tx.execute("DELETE FROM vector_spaces WHERE id = ?1", [space])
                    .map_err(q("drop vector space"))?;
            }
            let n = tx
                .execute(
                    "DELETE FROM embed_state
                     WHERE model <> ?1 OR (dimension IS NOT NULL AND dimension <> ?2)",
                    params![model, dim],
                )
                .map_err(q("reset embed state"))?;
            // A watermark of another model or dimension covers nothing that is left.
            tx.execute(
                "DELETE FROM embed_watermark WHERE NOT (model = ?1 AND dimension = ?2)",
                params![model, dim],
            )
            .map_err(q("reset embed watermark"))?;
            Ok::<_, VectorError>(u64::try_from(n).unwrap_or(0))
        })?;
        let mut cache = lock(&self.cache.spaces);
        for space in &dropped {
            cache.remove(space);
        }
        Ok(reset)
    }

    /// Vectors stored for `model` at `dimension`.
    pub fn count(&self, model: &str, dimension: usize) -> Result<u64, VectorError> {
        let Some(space) = self.space(model, dimension)? else { return Ok(0) };
        Ok(self.db.read(|c| {
            c.query_row(&format!("SELECT count(*) FROM vec_f_{}", space.id), [], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(|e| StoreError::query("count vectors", e))
        })?)
    }

    /// The cached codes of `space` if they are at its generation.
    fn cached(&self, space: Space) -> Option<Arc<RwLock<Codes>>> {
        let c = lock(&self.cache.spaces).get(&space.id).cloned()?;
        // A poisoned lock (a panic mid-apply) is never trusted: the caller loads again.
        let current = c.read().is_ok_and(|codes| codes.generation == space.generation);
        current.then_some(c)
    }

    /// The codes to search `space` with: the cached ones when they are at its generation, else
    /// loaded (one load at a time, and after any write of this store in flight has applied
    /// its delta — which usually makes the load unnecessary).
    fn codes(&self, space: Space) -> Result<Cached, VectorError> {
        if let Some(c) = self.cached(space) {
            return Ok(Cached::Codes(c));
        }
        let _maintain = lock(&self.cache.maintain);
        match self.load_codes(space)? {
            Load::Current(c) => Ok(Cached::Codes(c)),
            Load::Loaded(codes) => {
                self.cache.loads.fetch_add(1, Ordering::Relaxed);
                let c = Arc::new(RwLock::new(*codes));
                lock(&self.cache.spaces).insert(space.id, Arc::clone(&c));
                Ok(Cached::Codes(c))
            }
            Load::TooLarge => {
                lock(&self.cache.spaces).remove(&space.id);
                Ok(Cached::TooLarge)
            }
            Load::Gone => {
                lock(&self.cache.spaces).remove(&space.id);
                Ok(Cached::Gone)
            }
        }
    }

    /// Reads the codes of `space` in one read transaction, tagged with the generation they
    /// reflect (unless the cache is already at it).
    fn load_codes(&self, space: Space) -> Result<Load, VectorError> {
        let (dim, words) = (space.dimension, space.dimension.div_ceil(64));
        Ok(self.db.read(|c| {
            let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
            // One snapshot: the generation and the rows it tags.
            let tx = c.unchecked_transaction().map_err(q("begin code load"))?;
            let head: Option<(i64, f64)> = tx
                .query_row(
                    "SELECT generation, coalesce(q_scale, 127.0) FROM vector_spaces WHERE id = ?1",
                    [space.id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(q("vector space"))?;
            let Some((generation, scale)) = head else { return Ok(Load::Gone) };
            if let Some(c) = self.cached(Space { generation, ..space }) {
                return Ok(Load::Current(c));
            }
            let n: usize = tx
                .query_row(&format!("SELECT count(*) FROM vec_q_{}", space.id), [], |r| {
                    r.get::<_, i64>(0)
                })
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
                .map_err(q("count codes"))?;
            if n.saturating_mul(dim + words * 8) > MAX_CODE_CACHE_BYTES {
                return Ok::<_, StoreError>(Load::TooLarge);
            }
            let mut ids = Vec::with_capacity(n);
            let mut codes = Vec::with_capacity(n * dim);
            let mut s = tx
                .prepare(&format!("SELECT id, q FROM vec_q_{}", space.id))
                .map_err(q("load codes"))?;
            let mut rows = s.query([]).map_err(q("load codes"))?;
            while let Some(r) = rows.next().map_err(q("load codes"))? {
                ids.push(r.get(0).map_err(q("code id"))?);
                let blob = r.get_ref(1).and_then(|v| Ok(v.as_blob()?)).map_err(q("code"))?;
                let take = blob.len().min(dim);
                codes.extend(blob[..take].iter().map(|b| i8::from_ne_bytes([*b])));
                codes.resize(codes.len() + (dim - take), 0);
            }
            #[allow(clippy::cast_possible_truncation)]
            Ok(Load::Loaded(Box::new(Codes::new(generation, dim, ids, codes, scale as f32))))
        })?)
    }

    /// The `k` messages nearest to `query` in the space of (`model`, `query.len()`), nearest
    /// first. Empty when the model has no vectors at that dimension.
    pub fn knn(&self, model: &str, query: &[f32], k: usize) -> Result<Vec<Neighbour>, VectorError> {
        if k == 0 || k > MAX_KNN {
            return Err(VectorError::OutOfRange { what: "neighbours", value: k, max: MAX_KNN });
        }
        if query.is_empty() || !query.len().is_multiple_of(8) || query.len() > MAX_DIMENSION {
            return Err(VectorError::BadDimension(query.len()));
        }
        let Some(space) = self.space(model, query.len())? else { return Ok(Vec::new()) };
        let unit = normalized(0, query)?;
        let codes = match self.codes(space)? {
            Cached::Codes(c) => c,
            Cached::TooLarge => return self.exact_knn(space, &unit, k),
            Cached::Gone => return Ok(Vec::new()),
        };
        // The read lock is held for the scan only (a delta being applied waits for it, and it
        // for a delta: both are short), not for the re-rank below.
        let candidates = read_codes(&codes).candidates(&unit, k, INT8_FULL_SCAN_BYTES);
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        // Fine pass: exact cosine on the stored floats.
        let mut out: Vec<Neighbour> = self.db.read(|c| {
            let mut s = c
                .prepare_cached(&format!(
                    "SELECT vec_distance_cosine(embedding, ?2) FROM vec_f_{} WHERE rowid = ?1",
                    space.id
                ))
                .map_err(|e| StoreError::query("rerank", e))?;
            let qb = float_blob(&unit);
            let mut out = Vec::with_capacity(candidates.len());
            for &id in &candidates {
                let d: Option<f64> = s
                    .query_row(params![id, qb], |r| r.get(0))
                    .optional()
                    .map_err(|e| StoreError::query("rerank", e))?;
                if let Some(d) = d {
                    #[allow(clippy::cast_possible_truncation)]
                    out.push(Neighbour { id, distance: d as f32 });
                }
            }
            Ok::<_, StoreError>(out)
        })?;
        out.sort_by(|a, b| a.distance.total_cmp(&b.distance).then(a.id.cmp(&b.id)));
        out.truncate(k);
        Ok(out)
    }

    /// The stored (unit-normalized) vectors of `ids` in the space of (`model`, `dimension`), in
    /// the order of `ids`; an id without a vector in that space is left out. At most
    /// [`MAX_KNN`] ids per call.
    pub fn stored_vectors(
        &self,
        model: &str,
        dimension: usize,
        ids: &[i64],
    ) -> Result<Vec<(i64, Vec<f32>)>, VectorError> {
        if ids.len() > MAX_KNN {
            return Err(VectorError::OutOfRange {
                what: "vectors",
                value: ids.len(),
                max: MAX_KNN,
            });
        }
        let Some(space) = self.space(model, dimension)? else { return Ok(Vec::new()) };
        Ok(self.db.read(|c| {
            let mut s = c
                .prepare_cached(&format!(
                    "SELECT embedding FROM vec_f_{} WHERE rowid = ?1",
                    space.id
                ))
                .map_err(|e| StoreError::query("stored vector", e))?;
            let mut out = Vec::with_capacity(ids.len());
            for &id in ids {
                let blob: Option<Vec<u8>> = s
                    .query_row([id], |r| r.get(0))
                    .optional()
                    .map_err(|e| StoreError::query("stored vector", e))?;
                if let Some(blob) = blob {
                    let v = blob
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect();
                    out.push((id, v));
                }
            }
            Ok::<_, StoreError>(out)
        })?)
    }

    /// The exact `k` nearest by sqlite-vec's full float scan (what [`VectorStore::knn`] is
    /// measured against; slow on large spaces).
    pub fn knn_exact(
        &self,
        model: &str,
        query: &[f32],
        k: usize,
    ) -> Result<Vec<Neighbour>, VectorError> {
        if k == 0 || k > MAX_KNN {
            return Err(VectorError::OutOfRange { what: "neighbours", value: k, max: MAX_KNN });
        }
        let Some(space) = self.space(model, query.len())? else { return Ok(Vec::new()) };
        self.exact_knn(space, &normalized(0, query)?, k)
    }

    fn exact_knn(
        &self,
        space: Space,
        unit: &[f32],
        k: usize,
    ) -> Result<Vec<Neighbour>, VectorError> {
        let kk = i64::try_from(k).unwrap_or(i64::MAX);
        Ok(self.db.read(|c| {
            let mut s = c
                .prepare_cached(&format!(
                    "SELECT rowid, distance FROM vec_f_{} WHERE embedding MATCH ?1 AND k = ?2
                     ORDER BY distance",
                    space.id
                ))
                .map_err(|e| StoreError::query("knn", e))?;
            s.query_map(params![float_blob(unit), kk], |r| {
                let d: f64 = r.get(1)?;
                #[allow(clippy::cast_possible_truncation)]
                Ok(Neighbour { id: r.get(0)?, distance: d as f32 })
            })
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(|e| StoreError::query("knn", e))
        })?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_bits_compare_bytes_exactly_as_the_float_comparison_would() {
        // Codes at every extreme and centers both integral and not, over a dimension that is
        // not a multiple of 64: the byte comparison in `Codes::new` must equal `push_bits`.
        let dim = 200;
        let mut q = Vec::new();
        for i in 0..300i64 {
            for j in 0..dim as i64 {
                let x = ((i * 37 + j * 11) % 256) - 128;
                q.push(i8::try_from(if i % 7 == 0 { 127 } else { x }).unwrap());
            }
        }
        let codes = Codes::new(1, dim, (0..300).collect(), q.clone(), 127.0);
        assert!(codes.center.iter().any(|c| c.fract() != 0.0));
        let mut expected = Vec::new();
        for v in q.chunks_exact(dim) {
            push_bits(v.iter().map(|x| f32::from(*x)), &codes.center, codes.words, &mut expected);
        }
        assert_eq!(codes.bits, expected);
        // An integral center: equal codes are not above it.
        let flat = Codes::new(1, 64, vec![1, 2], vec![5i8; 128], 127.0);
        assert_eq!(flat.center, vec![5.0; 64]);
        assert_eq!(flat.bits, vec![0, 0]);
    }

    fn store() -> (tempfile::TempDir, VectorStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = VectorStore::open(dir.path(), &Limits::default()).unwrap();
        (dir, s)
    }

    fn pseudo(seed: u64, dim: usize) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..dim)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                #[allow(clippy::cast_precision_loss)]
                let x = (s % 2001) as f32 / 1000.0 - 1.0;
                x
            })
            .collect()
    }

    #[test]
    fn knn_agrees_with_exact_scan_and_spaces_do_not_mix() {
        let (_d, s) = store();
        let dim = 64;
        let batch: Vec<(i64, Vec<f32>)> = (1..=300).map(|i| (i, pseudo(i as u64, dim))).collect();
        s.upsert("m", dim, &batch).unwrap();
        s.upsert("m", 128, &[(1, pseudo(9, 128))]).unwrap();
        // A query near message 42 finds it first, on both paths.
        let mut q = pseudo(42, dim);
        q[0] += 0.01;
        let fast = s.knn("m", &q, 10).unwrap();
        let space = s.space("m", dim).unwrap().unwrap();
        let exact = s.exact_knn(space, &normalized(0, &q).unwrap(), 10).unwrap();
        assert_eq!(fast[0].id, 42);
        assert_eq!(exact[0].id, 42);
        let overlap = fast.iter().filter(|n| exact.iter().any(|e| e.id == n.id)).count();
        assert!(overlap >= 8, "binary coarse pass kept {overlap}/10 of the exact neighbours");
        // Another model, or a dimension with no space, finds nothing.
        assert!(s.knn("other", &q, 10).unwrap().is_empty());
        assert!(s.knn("m", &pseudo(1, 256), 5).unwrap().is_empty());
        assert_eq!(s.knn("m", &pseudo(1, 128), 5).unwrap().len(), 1);
        assert_eq!(s.dimensions("m").unwrap().len(), 2);
    }

    /// Vectors like a sentence model's: a strong shared direction plus a small individual part
    /// (their cosine to the centroid is about 0.87, as measured on e5).
    fn anisotropic(seed: u64, dim: usize) -> Vec<f32> {
        // Used by the conversion test.
        let common = pseudo(7, dim);
        let own = pseudo(seed + 1_000, dim);
        common.iter().zip(&own).map(|(c, o)| 1.8 * c + o).collect()
    }

    /// Recall@50 of the candidate passes against the exact top 50, over 20 queries.
    fn recall(
        s: &VectorStore,
        dim: usize,
        vector_of: &dyn Fn(u64) -> Vec<f32>,
        full: usize,
    ) -> f64 {
        let space = s.space("m", dim).unwrap().unwrap();
        let Cached::Codes(codes) = s.codes(space).unwrap() else { panic!("no codes") };
        let codes = read_codes(&codes);
        let (mut hit, mut total) = (0, 0);
        for seed in 0..20u64 {
            let unit = normalized(0, &vector_of(100_000 + seed)).unwrap();
            let exact = s.exact_knn(space, &unit, 50).unwrap();
            let found: Vec<i64> = codes.candidates(&unit, 50, full);
            hit += exact.iter().filter(|e| found.contains(&e.id)).count();
            total += exact.len();
        }
        hit as f64 / total as f64
    }

    #[test]
    fn centered_codes_keep_recall_on_vectors_with_a_common_direction() {
        let (_d, s) = store();
        let dim = 384;
        // Like a sentence model's vectors: a strong shared direction (cosine ≈ 0.89 to the
        // centroid), 40 topics, an individual part.
        let common = pseudo(7, dim);
        let topics: Vec<Vec<f32>> = (0..40).map(|t| pseudo(500 + t, dim)).collect();
        let vector_of = |seed: u64| -> Vec<f32> {
            let (t, own) = (&topics[(seed % 40) as usize], pseudo(seed + 1_000, dim));
            (0..dim).map(|j| 1.8 * common[j] + 0.8 * t[j] + 0.5 * own[j]).collect()
        };
        for chunk in (1..=6_000i64).collect::<Vec<_>>().chunks(MAX_VECTOR_BATCH) {
            let batch: Vec<(i64, Vec<f32>)> =
                chunk.iter().map(|i| (*i, vector_of(*i as u64))).collect();
            s.upsert("m", dim, &batch).unwrap();
        }
        let hamming = recall(&s, dim, &vector_of, 0);
        let full = recall(&s, dim, &vector_of, usize::MAX);
        eprintln!("recall@50: hamming + int8 {hamming:.3}, int8 alone {full:.3}");
        assert!(hamming >= 0.98, "hamming + int8 recall@50 {hamming:.3}");
        assert!(full >= 0.99, "int8 recall@50 {full:.3}");
        // What a query returns: exact cosines, nearest first.
        let q = vector_of(424_242);
        let unit = normalized(0, &q).unwrap();
        let fast = s.knn("m", &q, 50).unwrap();
        assert!(fast.windows(2).all(|w| w[0].distance <= w[1].distance));
        for n in &fast {
            let v = normalized(0, &vector_of(n.id as u64)).unwrap();
            let cos: f32 = v.iter().zip(&unit).map(|(a, b)| a * b).sum();
            assert!((1.0 - cos - n.distance).abs() < 1e-4, "an exact distance");
        }
    }

    #[test]
    fn a_space_with_sign_bit_codes_is_converted_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let dim = 64;
        {
            let s = VectorStore::open(dir.path(), &Limits::default()).unwrap();
            let batch: Vec<(i64, Vec<f32>)> =
                (1..=200).map(|i| (i, anisotropic(i as u64, dim))).collect();
            s.upsert("m", dim, &batch).unwrap();
            // Back to what migration 2 left: no scale, sign bits in vec_b_.
            let id = s.space("m", dim).unwrap().unwrap().id;
            s.db.write(|tx| {
                tx.execute_batch(&format!(
                    "DROP TABLE vec_q_{id};
                     CREATE TABLE vec_b_{id} (id INTEGER PRIMARY KEY, code BLOB NOT NULL);
                     UPDATE vector_spaces SET q_scale = NULL;"
                ))
                .map_err(|e| StoreError::query("downgrade", e))
            })
            .unwrap();
        }
        let s = VectorStore::open(dir.path(), &Limits::default()).unwrap();
        let n = s.knn("m", &anisotropic(42, dim), 5).unwrap();
        assert_eq!(n[0].id, 42);
        let tables: i64 =
            s.db.read(|c| {
                c.query_row(
                    "SELECT count(*) FROM sqlite_master WHERE name LIKE 'vec_b_%'",
                    [],
                    |r| r.get(0),
                )
                .map_err(|e| StoreError::query("tables", e))
            })
            .unwrap();
        assert_eq!(tables, 0, "the sign-bit table is gone");
    }

    #[test]
    fn bad_vectors_are_rejected_and_change_nothing() {
        let (_d, s) = store();
        s.upsert("m", 8, &[(1, vec![1.0; 8])]).unwrap();
        let e = s.upsert("m", 8, &[(2, vec![1.0; 8]), (3, vec![1.0; 9])]).unwrap_err();
        assert_eq!(e.code(), "VECTOR_DIMENSION_MISMATCH");
        let e = s.upsert("m", 8, &[(2, vec![f32::NAN; 8])]).unwrap_err();
        assert_eq!(e.code(), "VECTOR_INVALID");
        assert_eq!(s.upsert("m", 12, &[]).unwrap_err().code(), "VECTOR_BAD_DIMENSION");
        assert_eq!(s.count("m", 8).unwrap(), 1);
        assert_eq!(s.knn("m", &[1.0; 8], 0).unwrap_err().code(), "LIMIT_OUT_OF_RANGE");
        // Replacing and removing keep one row per message, and the cache follows.
        s.upsert("m", 8, &[(1, vec![-1.0; 8]), (2, vec![1.0; 8])]).unwrap();
        assert_eq!(s.knn("m", &[1.0; 8], 1).unwrap()[0].id, 2);
        s.remove(&[2]).unwrap();
        assert_eq!(s.count("m", 8).unwrap(), 1);
        let n = s.knn("m", &[1.0; 8], 5).unwrap();
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].id, 1);
    }

    /// (id, code, bits) of every row, by id.
    fn rows_of(c: &Codes) -> Vec<(i64, Vec<i8>, Vec<u64>)> {
        let mut rows: Vec<_> = (0..c.ids.len())
            .map(|i| {
                (
                    c.ids[i],
                    c.q[i * c.dim..(i + 1) * c.dim].to_vec(),
                    c.bits[i * c.words..(i + 1) * c.words].to_vec(),
                )
            })
            .collect();
        rows.sort_by_key(|r| r.0);
        rows
    }

    /// Same rows, same bits, same center as a fresh build (row order aside).
    fn assert_same(kept: &Codes, fresh: &Codes) {
        assert_eq!(rows_of(kept), rows_of(fresh));
        assert_eq!(kept.sums, fresh.sums);
        assert_eq!(kept.center, fresh.center);
        assert_eq!(kept.floors, fresh.floors);
        assert_eq!(kept.rows.len(), kept.ids.len());
        assert!(kept.rows.iter().all(|(id, row)| kept.ids[*row] == *id));
    }

    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    fn code(rng: &mut Rng, dim: usize, bias: i64) -> Vec<i8> {
        (0..dim)
            .map(|_| {
                let x = bias + i64::try_from(rng.below(121)).unwrap() - 60;
                i8::try_from(x.clamp(-127, 127)).unwrap()
            })
            .collect()
    }

    fn stored(code: &[i8]) -> Vec<u8> {
        code.iter().map(|x| x.to_ne_bytes()[0]).collect()
    }

    /// What a load of these codes builds (ids in order, as `vec_q_` returns them).
    fn fresh(set: &std::collections::BTreeMap<i64, Vec<i8>>, dim: usize) -> Codes {
        let ids = set.keys().copied().collect();
        let q = set.values().flatten().copied().collect();
        Codes::new(0, dim, ids, q, 127.0)
    }

    #[test]
    fn applied_writes_leave_exactly_the_codes_a_fresh_load_builds() {
        // A dimension that is not a multiple of 64; small batches that barely move the mean (a
        // few floors move: only those components are redone) and batches of skewed codes that
        // drag it (most floors move: every row's bits are recomputed); puts, replacements,
        // removals, removals of absent ids, down to empty and back.
        let dim = 200;
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let mut set: std::collections::BTreeMap<i64, Vec<i8>> =
            (1..=2_000).map(|id| (id, code(&mut rng, dim, 0))).collect();
        let mut kept = fresh(&set, dim);
        let (mut next_id, mut few_moved, mut many_moved) = (2_001i64, 0, 0);
        for round in 0..60i64 {
            let skewed = round % 4 == 3;
            let bias = match (skewed, round % 8 == 3) {
                (false, _) => 0,
                (true, true) => 50,
                (true, false) => -50,
            };
            let count = if skewed { 400 } else { 1 + rng.below(8) };
            let mut ops = Vec::new();
            for _ in 0..count {
                let pick = |rng: &mut Rng, set: &std::collections::BTreeMap<i64, Vec<i8>>| {
                    let n = u64::try_from(set.len()).unwrap();
                    *set.keys().nth(usize::try_from(rng.below(n)).unwrap()).unwrap()
                };
                match if skewed { 4 } else { rng.below(5) } {
                    0 => {
                        let id = pick(&mut rng, &set);
                        set.remove(&id);
                        ops.push(CodeOp::Remove(id));
                    }
                    1 => {
                        let id = pick(&mut rng, &set);
                        let c = code(&mut rng, dim, bias);
                        ops.push(CodeOp::Put(id, stored(&c)));
                        set.insert(id, c);
                    }
                    2 => ops.push(CodeOp::Remove(1_000_000 + round)),
                    _ => {
                        let c = code(&mut rng, dim, bias);
                        ops.push(CodeOp::Put(next_id, stored(&c)));
                        set.insert(next_id, c);
                        next_id += 1;
                    }
                }
            }
            let before = kept.floors.clone();
            kept.apply(&ops);
            let moved = before.iter().zip(&kept.floors).filter(|(a, b)| a != b).count();
            if moved * 8 > dim {
                many_moved += 1;
            } else if moved > 0 {
                few_moved += 1;
            }
            assert_same(&kept, &fresh(&set, dim));
        }
        assert!(few_moved > 0 && many_moved > 0, "both paths: {few_moved} / {many_moved}");
        let all: Vec<CodeOp> = set.keys().map(|id| CodeOp::Remove(*id)).collect();
        set.clear();
        kept.apply(&all);
        assert_same(&kept, &fresh(&set, dim));
        let c = code(&mut rng, dim, 30);
        kept.apply(&[CodeOp::Put(7, stored(&c))]);
        set.insert(7, c);
        assert_same(&kept, &fresh(&set, dim));
    }

    #[test]
    fn writes_update_the_code_cache_in_place_and_searches_match_a_fresh_load() {
        let (dir, s) = store();
        let dim = 64;
        let batch = |ids: std::ops::Range<i64>, salt: u64| -> Vec<(i64, Vec<f32>)> {
            ids.map(|i| (i, anisotropic(i as u64 * 7 + salt, dim))).collect()
        };
        s.upsert("m", dim, &batch(1..601, 0)).unwrap();
        s.upsert("m", dim, &batch(601..1_201, 0)).unwrap();
        let queries: Vec<Vec<f32>> = (0..8).map(|i| anisotropic(424_242 + i, dim)).collect();
        s.knn("m", &queries[0], 10).unwrap();
        assert_eq!(s.cache_rebuilds(), 1, "the first search loads the codes");
        // Ten rounds of every kind of write: new vectors, re-embedded ones, removals, failures.
        for round in 0..10i64 {
            s.upsert("m", dim, &batch(1_201 + round * 40..1_241 + round * 40, 0)).unwrap();
            let again: Vec<EmbeddedItem> = batch(1 + round * 13..11 + round * 13, 99)
                .into_iter()
                .map(|(id, vector)| EmbeddedItem { id, source_hash: [0; 32], vector })
                .collect();
            s.store_embedded("m", dim, &again).unwrap();
            s.remove(&[500 + round, 900 + round * 3]).unwrap();
            let failed = FailedItem { id: 600 + round, source_hash: [1; 32], error: "no".into() };
            s.record_embed_failures("m", &[failed]).unwrap();
            assert_eq!(s.knn("m", &queries[0], 10).unwrap().len(), 10);
        }
        assert_eq!(s.cache_rebuilds(), 1, "no write of this store reloaded the codes");

        // The codes kept equal what a fresh load builds, and so do the answers.
        let space = s.space("m", dim).unwrap().unwrap();
        let other = VectorStore::open(dir.path(), &Limits::default()).unwrap();
        let compare = |s: &VectorStore, other: &VectorStore| {
            let space = s.space("m", dim).unwrap().unwrap();
            let Cached::Codes(kept) = s.codes(space).unwrap() else { panic!("no codes") };
            let Cached::Codes(fresh) = other.codes(space).unwrap() else { panic!("no codes") };
            {
                let (kept, fresh) = (read_codes(&kept), read_codes(&fresh));
                assert_eq!(kept.generation, space.generation);
                assert_same(&kept, &fresh);
                for q in &queries {
                    // The Hamming pass too (this space is small enough to skip it in `knn`).
                    let unit = normalized(0, q).unwrap();
                    let mut a = kept.candidates(&unit, 10, 0);
                    let mut b = fresh.candidates(&unit, 10, 0);
                    a.sort_unstable();
                    b.sort_unstable();
                    assert_eq!(a, b);
                }
            }
            for q in &queries {
                assert_eq!(s.knn("m", q, 10).unwrap(), other.knn("m", q, 10).unwrap());
            }
        };
        compare(&s, &other);
        assert_eq!(other.cache_rebuilds(), 1);
        assert!(space.generation > 40);

        // A write by another handle (or process) is seen: the next search loads the codes.
        other.upsert("m", dim, &batch(5_000..5_010, 3)).unwrap();
        assert_eq!(other.cache_rebuilds(), 1, "the writer kept its own codes");
        compare(&s, &other);
        assert_eq!(s.cache_rebuilds(), 2);
    }

    #[test]
    fn embed_totals_and_the_watermark_follow_every_write() {
        let (_d, s) = store();
        let item = |id: i64| EmbeddedItem {
            id,
            source_hash: [u8::try_from(id).unwrap(); 32],
            vector: pseudo(id as u64, 8),
        };
        s.store_embedded("m", 8, &[item(1), item(2), item(3)]).unwrap();
        assert_eq!(s.embed_totals("m", 3).unwrap(), (3, 0));
        s.store_embedded("m", 8, &[item(2)]).unwrap();
        assert_eq!(s.embed_totals("m", 3).unwrap(), (3, 0), "re-embedded, counted once");
        let fail = FailedItem { id: 3, source_hash: [9; 32], error: "no".into() };
        for attempts in 1..=3usize {
            s.record_embed_failures("m", std::slice::from_ref(&fail)).unwrap();
            let retry = s.retryable_failures("m", 3).unwrap();
            assert_eq!(retry, if attempts < 3 { vec![3] } else { vec![] });
        }
        assert_eq!(s.embed_totals("m", 3).unwrap(), (2, 1));
        s.remove(&[1]).unwrap();
        assert_eq!(s.embed_totals("m", 3).unwrap(), (1, 1));
        let embedded =
            s.embed_states().unwrap().values().filter(|e| e.embedded_at.is_some()).count();
        assert_eq!(embedded, 1, "the count is the truth");

        assert_eq!(s.embed_watermark().unwrap(), None);
        let w = EmbedWatermark {
            model: "m".into(),
            dimension: 8,
            settled_run: 4,
            seen_run: 5,
            seen_started: 100,
            probed_at: 7,
        };
        s.set_embed_watermark(&w).unwrap();
        assert_eq!(s.embed_watermark().unwrap().as_ref(), Some(&w));
        s.reset_incompatible("m", 8).unwrap();
        assert_eq!(s.embed_watermark().unwrap().as_ref(), Some(&w), "same model and dimension");
        s.reset_incompatible("m", 16).unwrap();
        assert_eq!(s.embed_watermark().unwrap(), None, "another dimension: it covers nothing");
        assert_eq!(s.embed_totals("m", 3).unwrap(), (0, 1));
        s.set_embed_watermark(&w).unwrap();
        s.forget_embed_watermark().unwrap();
        assert_eq!(s.embed_watermark().unwrap(), None);
    }
}
