//! Quantized codes: int8 rows, their sign bits around a center, the in-place patches a write
//! applies, and quantizing a unit vector.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Space {
    pub(super) id: i64,
    pub(super) dimension: usize,
    pub(super) generation: i64,
}

/// The codes of one space, in memory: what a load of `vec_q_<space>` builds, and what
/// [`Codes::apply`] keeps it equal to as this store writes.
///
/// Rows are in no particular order (appended, swap-removed): nothing a query computes depends
/// on it, since every tie is broken by message id.
#[derive(Debug)]
pub(super) struct Codes {
    /// The space's generation these codes reflect.
    pub(super) generation: i64,
    pub(super) dim: usize,
    pub(super) words: usize,
    pub(super) ids: Vec<i64>,
    /// The row of each id.
    pub(super) rows: HashMap<i64, usize>,
    /// int8 codes, `dim` per vector.
    pub(super) q: Vec<i8>,
    /// Centered sign bits, `words` per vector.
    pub(super) bits: Vec<u64>,
    /// The sum of the int8 codes, per component (exact: the center follows every write).
    pub(super) sums: Vec<i64>,
    /// The mean of the int8 codes, per component.
    pub(super) center: Vec<f32>,
    /// `floor(center)` as a code: an integer code is above the center exactly when it is above
    /// this, so the bits of a row depend on the center only through these.
    pub(super) floors: Vec<i8>,
    /// Float → int8 factor.
    pub(super) scale: f32,
}

/// One change to a space's codes, in the order its transaction made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CodeOp {
    /// The message's code is (now) this one.
    Put(i64, Vec<u8>),
    /// The message has no vector in the space any more.
    Remove(i64),
}

/// What one write transaction did to one space: its generation before and after, and the
/// changes in order.
#[derive(Debug, Default)]
pub(super) struct SpaceDelta {
    pub(super) before: i64,
    pub(super) after: i64,
    pub(super) ops: Vec<CodeOp>,
}

/// The deltas of one transaction, by space id.
pub(super) type Deltas = HashMap<i64, SpaceDelta>;

/// The centered sign bits of one code: bit j set when `v[j] > floors[j]` (the comparison of
/// bytes vectorizes, and equals what [`push_bits`] computes against the float center).
pub(super) fn code_bits(v: &[i8], floors: &[i8], out: &mut [u64]) {
    for ((xs, ts), w) in v.chunks(64).zip(floors.chunks(64)).zip(out) {
        let mut word = 0u64;
        for (k, (x, t)) in xs.iter().zip(ts).enumerate() {
            word |= u64::from(x > t) << k;
        }
        *w = word;
    }
}

impl Codes {
    pub(super) fn new(generation: i64, dim: usize, ids: Vec<i64>, q: Vec<i8>, scale: f32) -> Self {
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
    pub(super) fn set_center(&mut self) {
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
    pub(super) fn fill_bits(&mut self) {
        let n = self.ids.len();
        self.bits.clear();
        self.bits.resize(n * self.words, 0);
        for (v, out) in self.q.chunks_exact(self.dim).zip(self.bits.chunks_exact_mut(self.words)) {
            code_bits(v, &self.floors, out);
        }
    }

    /// Bytes held for codes and bits (what [`MAX_CODE_CACHE_BYTES`] bounds).
    pub(super) fn bytes(&self) -> usize {
        self.ids.len().saturating_mul(self.dim + self.words * 8)
    }

    pub(super) fn add_row(&mut self, row: usize, sign: i64) {
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
    pub(super) fn apply(&mut self, ops: &[CodeOp]) {
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
    pub(super) fn candidates(&self, unit: &[f32], k: usize, full_scan_bytes: usize) -> Vec<i64> {
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
pub(super) fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum()
}

/// Appends the sign bits of `v - center` as `words` little-endian words.
pub(super) fn push_bits(
    v: impl Iterator<Item = f32>,
    center: &[f32],
    words: usize,
    out: &mut Vec<u64>,
) {
    let start = out.len();
    out.resize(start + words, 0);
    for (j, (x, c)) in v.zip(center).enumerate() {
        if x > *c {
            out[start + j / 64] |= 1 << (j % 64);
        }
    }
}

pub(super) fn normalized(id: i64, v: &[f32]) -> Result<Vec<f32>, VectorError> {
    let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if !norm.is_finite() || norm == 0.0 || v.iter().any(|x| !x.is_finite()) {
        return Err(VectorError::BadVector(id));
    }
    #[allow(clippy::cast_possible_truncation)]
    let inv = (1.0 / norm) as f32;
    Ok(v.iter().map(|x| x * inv).collect())
}

pub(super) fn float_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A vector checked against its space: its id, its stored float form and the unit vector.
pub(super) fn vector_row(
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
pub(super) fn q_scale_for(max_abs: f32) -> f32 {
    if max_abs > 0.0 && max_abs.is_finite() { 127.0 / (max_abs * Q_HEADROOM) } else { 127.0 }
}

pub(super) fn max_abs<'a>(vectors: impl Iterator<Item = &'a [f32]>) -> f32 {
    vectors.flat_map(|v| v.iter()).fold(0f32, |m, x| m.max(x.abs()))
}

/// The int8 code of a unit vector (clipped at ±127).
pub(super) fn quantize(unit: &[f32], scale: f32) -> Vec<u8> {
    unit.iter()
        .map(|x| {
            #[allow(clippy::cast_possible_truncation)]
            let q = (x * scale).round().clamp(-127.0, 127.0) as i8;
            q.to_ne_bytes()[0]
        })
        .collect()
}
