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
fn recall(s: &VectorStore, dim: usize, vector_of: &dyn Fn(u64) -> Vec<f32>, full: usize) -> f64 {
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
            c.query_row("SELECT count(*) FROM sqlite_master WHERE name LIKE 'vec_b_%'", [], |r| {
                r.get(0)
            })
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
    let embedded = s.embed_states().unwrap().values().filter(|e| e.embedded_at.is_some()).count();
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
