//! Message vectors in sqlite-vec (`<home>/index/vectors.db`), one space per (model, dimension),
//! and the [`Embedder`] trait that fills and queries them.
//!
//! Each space has a vec0 table keyed by message id, `vec_f_<space>`, with the unit-normalized
//! float vectors (cosine distance; the record of truth, and sqlite-vec's exact KNN), and a plain
//! table `vec_b_<space>` with their sign bits (a plain table loads 10× faster than a vec0 scan). A query scans the sign bits in memory (Hamming
//! distance, a 1,024-d code is 128 bytes), keeps the [`RERANK_FACTOR`]·k nearest and re-ranks
//! them by exact cosine on the floats. The in-memory codes are loaded once per space and
//! reloaded when the space's generation changes; a space larger than
//! [`MAX_CODE_CACHE_BYTES`] is searched by sqlite-vec's exact scan instead.
//!
//! Vectors of different models or dimensions never meet: a query vector whose length is not the
//! space's dimension is an error, and a model with no space has no semantic candidates.

use std::{
    collections::HashMap,
    path::Path,
    sync::{Arc, Mutex},
};

use rusqlite::{OptionalExtension, params};

use crate::{
    Limits,
    error::{ErrorKind, StewardError},
    store::{Database, Migration, OpenOptions, Schema, StoreError},
};

/// Largest vector dimension accepted.
pub const MAX_DIMENSION: usize = 4096;
/// Most neighbours one KNN query returns.
pub const MAX_KNN: usize = 500;
/// Candidates re-ranked on exact cosine per neighbour asked for.
pub const RERANK_FACTOR: usize = 8;
/// Most bytes of sign-bit codes kept in memory per space.
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
    /// The farthest cosine distance that still means "related" for this model (models differ:
    /// the gateway takes it from configuration).
    fn max_distance(&self) -> f32 {
        DEFAULT_MAX_VECTOR_DISTANCE
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

/// Sign-bit codes of one space, in memory.
#[derive(Debug)]
struct Codes {
    generation: i64,
    words: usize,
    ids: Vec<i64>,
    bits: Vec<u64>,
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
    codes: Mutex<HashMap<i64, Arc<Codes>>>,
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

fn sign_bits(v: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; v.len().div_ceil(8)];
    for (i, x) in v.iter().enumerate() {
        if *x > 0.0 {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

fn words_of(bytes: &[u8], words: usize, out: &mut Vec<u64>) {
    for w in 0..words {
        let mut buf = [0u8; 8];
        for (k, b) in buf.iter_mut().enumerate() {
            *b = bytes.get(w * 8 + k).copied().unwrap_or(0);
        }
        out.push(u64::from_le_bytes(buf));
    }
}

/// A vector checked against its space and turned into its stored forms.
fn vector_row(
    model: &str,
    dimension: usize,
    id: i64,
    v: &[f32],
) -> Result<(i64, Vec<u8>, Vec<u8>), VectorError> {
    if v.len() != dimension {
        return Err(VectorError::DimensionMismatch {
            model: model.to_owned(),
            expected: dimension,
            found: v.len(),
        });
    }
    let unit = normalized(id, v)?;
    Ok((id, float_blob(&unit), sign_bits(&unit)))
}

/// Writes checked rows into the space of (`model`, `dimension`), creating it on first use.
fn write_vectors(
    tx: &rusqlite::Transaction<'_>,
    model: &str,
    dimension: usize,
    rows: &[(i64, Vec<u8>, Vec<u8>)],
) -> Result<(), VectorError> {
    let dim = i64::try_from(dimension).unwrap_or(i64::MAX);
    let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
    tx.execute(
        "INSERT OR IGNORE INTO vector_spaces (model, dimension, created_at)
         VALUES (?1, ?2, ?3)",
        params![model, dim, crate::time::now_secs()],
    )
    .map_err(q("create vector space"))?;
    let id: i64 = tx
        .query_row(
            "SELECT id FROM vector_spaces WHERE model = ?1 AND dimension = ?2",
            params![model, dim],
            |r| r.get(0),
        )
        .map_err(q("vector space id"))?;
    // Small float chunks: a re-rank reads single vectors, and SQLite reaches an offset
    // inside a blob by walking its overflow chain — through a 4 MB chunk (1,024 vectors
    // of 1,024-d, sqlite-vec's default) that cost ~300 µs per vector.
    tx.execute_batch(&format!(
        "CREATE VIRTUAL TABLE IF NOT EXISTS vec_f_{id}
             USING vec0(embedding float[{dimension}] distance_metric=cosine,
                        chunk_size={FLOAT_CHUNK});
         CREATE TABLE IF NOT EXISTS vec_b_{id} (id INTEGER PRIMARY KEY, code BLOB NOT NULL);"
    ))
    .map_err(q("create vector tables"))?;
    for (mid, floats, bits) in rows {
        tx.execute(&format!("DELETE FROM vec_f_{id} WHERE rowid = ?1"), [mid])
            .map_err(q("replace vector"))?;
        tx.execute(
            &format!("INSERT INTO vec_f_{id} (rowid, embedding) VALUES (?1, ?2)"),
            params![mid, floats],
        )
        .map_err(q("insert vector"))?;
        tx.execute(
            &format!("INSERT OR REPLACE INTO vec_b_{id} (id, code) VALUES (?1, ?2)"),
            params![mid, bits],
        )
        .map_err(q("insert code"))?;
    }
    tx.execute("UPDATE vector_spaces SET generation = generation + 1 WHERE id = ?1", [id])
        .map_err(q("bump vector generation"))?;
    Ok(())
}

/// Deletes `ids` from every space in `spaces`.
fn delete_vectors(
    tx: &rusqlite::Transaction<'_>,
    spaces: &[i64],
    ids: &[i64],
) -> Result<(), StoreError> {
    let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
    for space in spaces {
        for id in ids {
            tx.execute(&format!("DELETE FROM vec_f_{space} WHERE rowid = ?1"), [id])
                .map_err(q("remove vector"))?;
            tx.execute(&format!("DELETE FROM vec_b_{space} WHERE id = ?1"), [id])
                .map_err(q("remove code"))?;
        }
        tx.execute("UPDATE vector_spaces SET generation = generation + 1 WHERE id = ?1", [space])
            .map_err(q("bump vector generation"))?;
    }
    Ok(())
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
        Ok(Self { db, codes: Mutex::new(HashMap::new()) })
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
        self.db.write(|tx| write_vectors(tx, model, dimension, &rows))
    }

    /// Drops the vectors of `ids` from every space (messages soft-deleted or re-embedded).
    pub fn remove(&self, ids: &[i64]) -> Result<(), VectorError> {
        let spaces = self.space_ids()?;
        self.db.write(|tx| {
            delete_vectors(tx, &spaces, ids)?;
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
                .prepare(
                    "SELECT message_id, model, dimension, source_hash, embedded_at, attempts,
                            last_error
                     FROM embed_state",
                )
                .map_err(|e| StoreError::query("embed state", e))?;
            let rows = s
                .query_map([], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        EmbedState {
                            model: r.get(1)?,
                            dimension: r
                                .get::<_, Option<i64>>(2)?
                                .and_then(|d| usize::try_from(d).ok()),
                            source_hash: hash_of(&r.get::<_, Vec<u8>>(3)?),
                            embedded_at: r.get(4)?,
                            attempts: r.get(5)?,
                            last_error: r.get(6)?,
                        },
                    ))
                })
                .and_then(Iterator::collect::<Result<HashMap<_, _>, _>>)
                .map_err(|e| StoreError::query("embed state", e))?;
            Ok::<_, StoreError>(rows)
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
        self.db.write(|tx| {
            delete_vectors(tx, &spaces, &ids)?;
            write_vectors(tx, model, dimension, &rows)?;
            for i in items {
                tx.execute(
                    "INSERT OR REPLACE INTO embed_state
                         (message_id, model, dimension, source_hash, embedded_at, attempts,
                          last_error, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, 0, NULL, ?5)",
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
        self.db.write(|tx| {
            delete_vectors(tx, &spaces, &ids)?;
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
        let reset = self.db.write(|tx| {
            let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
            for space in &dropped {
                tx.execute_batch(&format!(
                    "DROP TABLE IF EXISTS vec_f_{space}; DROP TABLE IF EXISTS vec_b_{space};"
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
            Ok::<_, VectorError>(u64::try_from(n).unwrap_or(0))
        })?;
        let mut cache = self.codes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
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

    fn codes(&self, space: Space) -> Result<Option<Arc<Codes>>, VectorError> {
        let mut cache = self.codes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = cache.get(&space.id)
            && c.generation == space.generation
        {
            return Ok(Some(Arc::clone(c)));
        }
        let words = space.dimension.div_ceil(64);
        let loaded = self.db.read(|c| {
            let n: usize = c
                .query_row(&format!("SELECT count(*) FROM vec_b_{}", space.id), [], |r| {
                    r.get::<_, i64>(0)
                })
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
                .map_err(|e| StoreError::query("count codes", e))?;
            if n.saturating_mul(words * 8) > MAX_CODE_CACHE_BYTES {
                return Ok::<_, StoreError>(None);
            }
            let mut ids = Vec::with_capacity(n);
            let mut bits = Vec::with_capacity(n * words);
            let mut s = c
                .prepare(&format!("SELECT id, code FROM vec_b_{}", space.id))
                .map_err(|e| StoreError::query("load codes", e))?;
            let mut rows = s.query([]).map_err(|e| StoreError::query("load codes", e))?;
            while let Some(r) = rows.next().map_err(|e| StoreError::query("load codes", e))? {
                ids.push(r.get(0).map_err(|e| StoreError::query("code id", e))?);
                let blob = r.get_ref(1).and_then(|v| Ok(v.as_blob()?));
                words_of(blob.map_err(|e| StoreError::query("code", e))?, words, &mut bits);
            }
            Ok(Some(Codes { generation: space.generation, words, ids, bits }))
        })?;
        match loaded {
            Some(codes) => {
                let codes = Arc::new(codes);
                cache.insert(space.id, Arc::clone(&codes));
                Ok(Some(codes))
            }
            None => {
                cache.remove(&space.id);
                Ok(None)
            }
        }
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
        let Some(codes) = self.codes(space)? else { return self.exact_knn(space, &unit, k) };
        // Coarse pass: Hamming distance on sign bits.
        let mut q = Vec::with_capacity(codes.words);
        words_of(&sign_bits(&unit), codes.words, &mut q);
        let keep = (k * RERANK_FACTOR).min(codes.ids.len());
        if keep == 0 {
            return Ok(Vec::new());
        }
        let mut scored: Vec<(u32, usize)> = codes
            .bits
            .chunks_exact(codes.words)
            .enumerate()
            .map(|(i, c)| (c.iter().zip(&q).map(|(a, b)| (a ^ b).count_ones()).sum(), i))
            .collect();
        if keep < scored.len() {
            scored.select_nth_unstable(keep - 1);
            scored.truncate(keep);
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
            let mut out = Vec::with_capacity(scored.len());
            for (_, i) in &scored {
                let id = codes.ids[*i];
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
}
