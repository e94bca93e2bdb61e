//! Nearest neighbours: the code cache (loaded once per space, patched in place), the coarse
//! scan and the exact rerank.

use super::*;

impl VectorStore {
    /// The cached codes of `space` if they are at its generation.
    pub(super) fn cached(&self, space: Space) -> Option<Arc<RwLock<Codes>>> {
        let c = lock(&self.cache.spaces).get(&space.id).cloned()?;
        // A poisoned lock (a panic mid-apply) is never trusted: the caller loads again.
        let current = c.read().is_ok_and(|codes| codes.generation == space.generation);
        current.then_some(c)
    }

    /// The codes to search `space` with: the cached ones when they are at its generation, else
    /// loaded (one load at a time, and after any write of this store in flight has applied
    /// its delta — which usually makes the load unnecessary).
    pub(super) fn codes(&self, space: Space) -> Result<Cached, VectorError> {
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
    pub(super) fn load_codes(&self, space: Space) -> Result<Load, VectorError> {
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

    pub(super) fn exact_knn(
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
