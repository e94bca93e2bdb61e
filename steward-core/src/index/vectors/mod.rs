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

mod codes;
pub(crate) mod items;
mod knn;
mod write;

use codes::*;
use write::*;

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
/// Fixed (not a setting).
pub const MAX_DIMENSION: usize = 4096;
/// Most neighbours one KNN query returns.
/// Fixed (not a setting).
pub const MAX_KNN: usize = 500;
/// Candidates kept by the Hamming pass per neighbour asked for.
/// Fixed (not a setting).
pub const COARSE_FACTOR: usize = 32;
/// Candidates kept by the Hamming pass at least.
/// Fixed (not a setting).
pub const MIN_COARSE: usize = 1_000;
/// A space whose int8 codes fit in this many bytes skips the Hamming pass: all its vectors go
/// to the int8 pass (about a millisecond of scanning).
/// Fixed (not a setting).
pub const INT8_FULL_SCAN_BYTES: usize = 2 * 1024 * 1024;
/// Candidates re-ranked on exact cosine beyond the k asked for, in percent of k (after the
/// int8 pass; each costs a read of its floats from sqlite-vec).
/// Fixed (not a setting).
pub const RERANK_EXTRA_PERCENT: usize = 50;
/// The fewest extra candidates re-ranked on exact cosine.
/// Fixed (not a setting).
pub const MIN_RERANK_EXTRA: usize = 16;
/// The int8 scale leaves this much room above the largest component of a space's first batch.
/// Fixed (not a setting).
pub const Q_HEADROOM: f32 = 1.25;
/// Most bytes of codes (int8 and sign bits) kept in memory per space.
/// Fixed (not a setting).
pub const MAX_CODE_CACHE_BYTES: usize = 256 * 1024 * 1024;
/// Default farthest cosine distance a KNN neighbour may be to count as a semantic match
/// (similarity ≥ 0.5). Beyond it a neighbour is merely the least unrelated message, and an
/// absent topic must find nothing.
/// Default of `[embed] max_distance`.
pub const DEFAULT_MAX_VECTOR_DISTANCE: f32 = 0.5;
/// Vectors per sqlite-vec chunk in the float tables.
/// Fixed (not a setting).
const FLOAT_CHUNK: usize = 16;
/// Most vectors written in one call.
/// Fixed (not a setting).
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

impl VectorStore {
    /// Opens (creating if needed) `<dir>/vectors.db`.
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn open(dir: &Path, limits: &Limits) -> Result<Self, VectorError> {
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
}

#[cfg(test)]
mod tests;
