//! KNN top-50 over a vector space: the warm latency of `VectorStore::knn` (centered sign bits →
//! int8 → exact floats) and of sqlite-vec's exact float scan, and the recall@50 of the first
//! against the second, and the first query of a freshly opened store (which loads the codes).
//!
//! `cargo bench -p steward-core --bench vectors`. Spaces: `STEWARD_BENCH_VECTORS` vectors
//! (default 100,000) at 384-d and 1,024-d, shaped like a sentence model's output (a strong
//! shared direction, 400 topics, an individual part; uniform random vectors would flatter any
//! binary code). `STEWARD_BENCH_REAL_VECTORS=<file>` adds a space of real embeddings: raw
//! little-endian f32, `STEWARD_BENCH_REAL_DIM` per vector (default 384); the queries are held
//! out from the file's last 50 vectors.

use std::time::Instant;

use steward_core::{Limits, index::VectorStore};

const K: usize = 50;
const QUERIES: usize = 50;

fn pseudo(seed: u64, dim: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..dim)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % 20_001) as f32 / 10_000.0 - 1.0
        })
        .collect()
}

fn shaped(dim: usize) -> impl Fn(u64) -> Vec<f32> {
    let common = pseudo(7, dim);
    let topics: Vec<Vec<f32>> = (0..400).map(|t| pseudo(500 + t, dim)).collect();
    move |seed| {
        let (t, own) = (&topics[(seed % 400) as usize], pseudo(seed + 1_000_000, dim));
        (0..dim).map(|j| 1.8 * common[j] + 0.8 * t[j] + 0.5 * own[j]).collect()
    }
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn run(label: &str, dir: &std::path::Path, model: &str, queries: &[Vec<f32>]) {
    // The first query of a fresh handle loads the codes (warm OS cache, cold process cache).
    let store = VectorStore::open(dir, &Limits::default()).expect("open");
    let t = Instant::now();
    store.knn(model, &queries[0], K).expect("knn");
    let first = t.elapsed().as_secs_f64() * 1e3;
    let (mut fast, mut exact, mut hit, mut total) = (Vec::new(), Vec::new(), 0, 0);
    for q in queries {
        let t = Instant::now();
        let f = store.knn(model, q, K).expect("knn");
        fast.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let e = store.knn_exact(model, q, K).expect("exact");
        exact.push(t.elapsed().as_secs_f64() * 1e3);
        hit += e.iter().filter(|x| f.iter().any(|y| y.id == x.id)).count();
        total += e.len();
    }
    println!(
        "| {label} | {first:.0} ms | {:.2} / {:.2} ms | {:.1} / {:.1} ms | {:.3} |",
        percentile(fast.clone(), 0.5),
        percentile(fast, 0.95),
        percentile(exact.clone(), 0.5),
        percentile(exact, 0.95),
        hit as f64 / total as f64
    );
}

fn fill(store: &VectorStore, model: &str, dim: usize, n: usize, v: &dyn Fn(u64) -> Vec<f32>) {
    let t = Instant::now();
    let ids: Vec<i64> = (1..=n as i64).collect();
    for chunk in ids.chunks(1024) {
        let batch: Vec<(i64, Vec<f32>)> = chunk.iter().map(|i| (*i, v(*i as u64))).collect();
        store.upsert(model, dim, &batch).expect("upsert");
    }
    eprintln!("{model}: {n} × {dim} stored in {:.1} s", t.elapsed().as_secs_f64());
}

fn main() {
    let n: usize =
        std::env::var("STEWARD_BENCH_VECTORS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = VectorStore::open(dir.path(), &Limits::default()).expect("open");
    println!(
        "| space | first knn after open | knn p50 / p95 | sqlite-vec exact p50 / p95 | recall@50 |"
    );
    println!("|---|---|---|---|---|");
    for dim in [384, 1024] {
        let model = format!("shaped-{dim}");
        let v = shaped(dim);
        fill(&store, &model, dim, n, &v);
        let queries: Vec<Vec<f32>> = (0..QUERIES as u64).map(|s| v(10_000_000 + s)).collect();
        run(&format!("{n} × {dim}, shaped"), dir.path(), &model, &queries);
    }
    if let Ok(path) = std::env::var("STEWARD_BENCH_REAL_VECTORS") {
        let dim: usize = std::env::var("STEWARD_BENCH_REAL_DIM")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(384);
        let raw = std::fs::read(&path).expect("real vectors");
        let all: Vec<Vec<f32>> = raw
            .chunks_exact(4 * dim)
            .map(|c| {
                c.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
            })
            .collect();
        let (stored, queries) = all.split_at(all.len().saturating_sub(QUERIES));
        let stored = stored.to_vec();
        fill(&store, "real", dim, stored.len(), &|i| stored[i as usize - 1].clone());
        run(&format!("{} × {dim}, real", stored.len()), dir.path(), "real", queries);
    }
}
