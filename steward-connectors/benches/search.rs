//! Retrieval benchmark: for each size (default 50,000 and 100,000 messages) it indexes the
//! generated Maildir (mirror + BM25 + trigram, one `sync_mail` call) beside `notmuch new` on the
//! same Maildir, stores 384-d and 1,024-d vectors for every message, then measures warm p50/p95
//! and first-query latencies in process, and whole-process `steward search --json` against
//! `notmuch search` for the same word, sender and date queries. Prints Markdown tables.
//!
//! `scripts/bench search` (builds the `steward` binary, installs notmuch). Environment:
//! `STEWARD_BENCH_SIZES` (default `50000,100000`), `STEWARD_BENCH_DIR` (default
//! `target/bench-data`), `STEWARD_BIN` (default `target/release/steward`).

mod common;

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::Arc,
    time::Instant,
};

use common::dir_size;
use steward_connectors::mail::{
    MaildirSource,
    demo::{DemoOptions, generate_maildir},
};
use steward_core::{
    Steward,
    index::{EmbedError, Embedder},
    mirror::SyncOptions,
    search::SearchRequest,
    time::parse_date,
};

const WARM_ITERATIONS: usize = 200;
const PROCESS_RUNS: usize = 5;

/// Unit vectors from a fixed generator (what matters here is the scan, not the semantics).
fn vector(seed: u64, dim: usize) -> Vec<f32> {
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

/// Returns one precomputed query vector (the bench measures retrieval, not a model).
struct Fixed(Vec<f32>);

impl Embedder for Fixed {
    fn model(&self) -> &str {
        "bench"
    }
    fn dimension(&self) -> Option<usize> {
        Some(self.0.len())
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|_| self.0.clone()).collect())
    }
    fn max_distance(&self) -> f32 {
        2.0
    }
}

fn percentiles(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    (at(0.5), at(0.95))
}

fn ms(s: f64) -> String {
    if s < 0.01 { format!("{:.2} ms", s * 1e3) } else { format!("{:.1} ms", s * 1e3) }
}

fn time_each(n: usize, mut f: impl FnMut(usize)) -> (f64, f64) {
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        f(i);
        v.push(t.elapsed().as_secs_f64());
    }
    percentiles(v)
}

fn ensure_maildir(base: &Path, messages: usize) -> PathBuf {
    let maildir = base.join(format!("maildir-v2-{messages}"));
    if !maildir.join(".complete").exists() {
        let _ = std::fs::remove_dir_all(&maildir);
        let mut opts = DemoOptions::new(messages);
        opts.gmail_copies = false;
        generate_maildir(&maildir, &opts).expect("generate");
        std::fs::write(maildir.join(".complete"), b"").expect("marker");
    }
    maildir
}

fn notmuch_config(base: &Path, maildir: &Path) -> PathBuf {
    let cfg = base.join("notmuch-search-config");
    std::fs::write(
        &cfg,
        format!("[database]\npath={}\n[user]\nname=Bench\nprimary_email=bench@example.org\n[new]\ntags=unread;inbox;\n[maildir]\nsynchronize_flags=true\n", maildir.display()),
    )
    .expect("notmuch config");
    cfg
}

fn has_notmuch() -> bool {
    Command::new("notmuch").arg("--version").output().is_ok()
}

fn median_process(cmd: &mut dyn FnMut() -> Command) -> f64 {
    let mut v = Vec::new();
    for _ in 0..PROCESS_RUNS {
        let t = Instant::now();
        let out = cmd().output().expect("spawn");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        v.push(t.elapsed().as_secs_f64());
    }
    percentiles(v).0
}

fn bench_size(base: &Path, messages: usize) {
    let maildir = ensure_maildir(base, messages);
    let home = base.join(format!("search-home-{messages}"));
    let _ = std::fs::remove_dir_all(&home);

    // Indexing everything: mirror + tantivy BM25 + trigram, in one call. A first, untimed run
    // into a scratch home warms the OS cache with the Maildir (as it is for notmuch after it).
    let opts = SyncOptions { account: Some("bench".into()), cancel: None };
    {
        let scratch = base.join("search-warmup");
        let _ = std::fs::remove_dir_all(&scratch);
        let s = Steward::builder().home(&scratch).open().expect("open");
        s.sync_mail(&MaildirSource::new(&maildir), &opts, &mut |_| {}).expect("warm-up");
        drop(s);
        let _ = std::fs::remove_dir_all(&scratch);
    }
    let steward = Steward::builder().home(&home).open().expect("open");
    let t = Instant::now();
    let summary =
        steward.sync_mail(&MaildirSource::new(&maildir), &opts, &mut |_| {}).expect("sync");
    let index_secs = t.elapsed().as_secs_f64();
    let steward_bytes = dir_size(&home);
    let live = summary.added;

    let cfg = notmuch_config(base, &maildir);
    let notmuch = if has_notmuch() {
        let _ = std::fs::remove_dir_all(maildir.join(".notmuch"));
        let t = Instant::now();
        let out = Command::new("notmuch")
            .arg(format!("--config={}", cfg.display()))
            .arg("new")
            .output()
            .expect("notmuch new");
        assert!(out.status.success());
        Some((t.elapsed().as_secs_f64(), dir_size(&maildir.join(".notmuch"))))
    } else {
        None
    };

    // Vectors: every message in a 384-d and a 1,024-d space.
    let mut ids = Vec::new();
    steward
        .mirror()
        .for_each_indexable(&mut |d| {
            ids.push(d.id);
            Ok(())
        })
        .expect("ids");
    let t = Instant::now();
    for dim in [384usize, 1024] {
        for chunk in ids.chunks(1024) {
            let batch: Vec<(i64, Vec<f32>)> =
                chunk.iter().map(|id| (*id, vector(*id as u64, dim))).collect();
            steward.vectors().expect("vectors").upsert("bench", dim, &batch).expect("vectors");
        }
    }
    let vector_secs = t.elapsed().as_secs_f64();
    let vector_bytes = dir_size(&home.join("index/vectors.db"));
    drop(steward);

    // First queries after open (a fresh handle: cold caches inside the process, warm OS cache).
    let query_vec = vector(0xdead_beef, 1024);
    let t = Instant::now();
    let steward = Steward::builder().home(&home).open().expect("open");
    let first_lexical = {
        let page = steward.search(&SearchRequest { limit: 12, ..SearchRequest::text("bonifico") });
        assert!(!page.expect("search").messages.is_empty());
        t.elapsed().as_secs_f64()
    };
    let t = Instant::now();
    steward.vectors().expect("vectors").knn("bench", &query_vec, 50).expect("knn");
    let first_knn = t.elapsed().as_secs_f64();
    drop(steward);
    let hybrid =
        Steward::builder().home(&home).embedder(Arc::new(Fixed(query_vec))).open().expect("open");
    let steward = &hybrid;

    let words = [
        "bonifico",
        "invoice",
        "technician",
        "passport",
        "certificazione",
        "planimetria",
        "quarter",
        "famiglia",
        "booking",
        "scadenza",
    ];
    let phrases = [
        "bonifico risulta",
        "booking reference",
        "signed copy",
        "carta d'identit",
        "technician will",
        "planimetria catastale",
        "passport and",
        "end of the quarter",
    ];
    let mut rows: Vec<(String, (f64, f64), usize)> = Vec::new();
    let mut run = |name: &str, f: &mut dyn FnMut(usize) -> usize| {
        let mut hits = 0;
        let lat = time_each(WARM_ITERATIONS, |i| hits = f(i));
        rows.push((name.to_owned(), lat, hits));
    };
    let search = |r: SearchRequest| steward.search(&r).expect("search").messages.len();
    // The lexical row runs without the embedder; the hybrid row with it.
    let lexical_only = Steward::builder().home(&home).open().expect("open");
    run("lexical top-12 with summaries", &mut |i| {
        lexical_only
            .search(&SearchRequest { limit: 12, ..SearchRequest::text(words[i % words.len()]) })
            .expect("lexical")
            .messages
            .len()
    });
    run("body substring top-12", &mut |i| {
        search(SearchRequest {
            body_contains: Some(phrases[i % phrases.len()].into()),
            limit: 12,
            ..SearchRequest::default()
        })
    });
    run("absent substring", &mut |_| {
        search(SearchRequest {
            body_contains: Some("zzqx nothing here".into()),
            limit: 12,
            ..SearchRequest::default()
        })
    });
    run("newest unread 20", &mut |_| {
        search(SearchRequest { unread: Some(true), limit: 20, ..SearchRequest::default() })
    });
    let (after, before) = (parse_date("2025-06-01").ok(), parse_date("2025-09-01").ok());
    run("date range + sender", &mut |_| {
        search(SearchRequest {
            from: Some("rossi".into()),
            after,
            before,
            limit: 12,
            ..SearchRequest::default()
        })
    });
    for dim in [384usize, 1024] {
        let q = vector(7, dim);
        run(&format!("KNN top-50, {dim}-d"), &mut |_| {
            steward.vectors().expect("vectors").knn("bench", &q, 50).expect("knn").len()
        });
    }
    run("hybrid top-12, precomputed 1,024-d query", &mut |i| {
        search(SearchRequest { limit: 12, ..SearchRequest::text(words[i % words.len()]) })
    });

    println!();
    println!("### {messages} messages");
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    let rate = |s: f64| live as f64 / s;
    println!(
        "| index everything (mirror + BM25 + trigram), one `sync_mail` | {:.1} s, **{:.0} messages/s** |",
        index_secs,
        rate(index_secs)
    );
    if let Some((secs, bytes)) = notmuch {
        println!(
            "| `notmuch new`, same Maildir | {:.1} s, {:.0} messages/s → steward is **{:.1}×** |",
            secs,
            rate(secs),
            secs / index_secs
        );
        println!(
            "| on disk: steward home (mirror, blobs, indexes) vs notmuch database | {:.0} MB vs {:.0} MB |",
            steward_bytes as f64 / 1e6,
            bytes as f64 / 1e6
        );
    } else {
        println!("| on disk: steward home | {:.0} MB |", steward_bytes as f64 / 1e6);
    }
    println!(
        "| vectors stored (384-d and 1,024-d for every message) | {:.1} s, vectors.db {:.0} MB |",
        vector_secs,
        vector_bytes as f64 / 1e6
    );
    println!("| first lexical query after open (open included) | {} |", ms(first_lexical));
    println!("| first KNN 1,024-d after open (loads the codes) | {} |", ms(first_knn));
    println!();
    println!("| warm query ({WARM_ITERATIONS} runs) | p50 | p95 | results |");
    println!("|---|---|---|---|");
    for (name, (p50, p95), hits) in &rows {
        println!("| {name} | {} | {} | {hits} |", ms(*p50), ms(*p95));
    }

    if has_notmuch() {
        let bin = std::env::var_os("STEWARD_BIN").map_or_else(
            || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/steward"),
            PathBuf::from,
        );
        println!();
        println!(
            "| whole process, median of {PROCESS_RUNS} | steward search --json | notmuch search | ratio |"
        );
        println!("|---|---|---|---|");
        let cases: [(&str, Vec<&str>, Vec<&str>); 3] = [
            ("word", vec!["bonifico"], vec!["bonifico"]),
            ("sender", vec!["--from", "rossi"], vec!["from:rossi"]),
            (
                "date range",
                vec!["--after", "2025-06-01", "--before", "2025-07-01"],
                vec!["date:2025-06-01..2025-06-30"],
            ),
        ];
        for (name, ours, theirs) in cases {
            let s = median_process(&mut || {
                let mut c = Command::new(&bin);
                c.arg("--home").arg(&home).arg("search").args(&ours).arg("--json");
                c
            });
            let n = median_process(&mut || {
                let mut c = Command::new("notmuch");
                c.arg(format!("--config={}", cfg.display()))
                    .args(["search", "--format=json", "--limit=8"])
                    .args(&theirs);
                c
            });
            println!("| {name} | {} | {} | {:.2} |", ms(s), ms(n), s / n);
        }
        let _ = std::fs::remove_dir_all(maildir.join(".notmuch"));
    }
}

fn main() {
    let sizes: Vec<usize> = std::env::var("STEWARD_BENCH_SIZES")
        .unwrap_or_else(|_| "50000,100000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let base = std::env::var_os("STEWARD_BENCH_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench-data"),
        PathBuf::from,
    );
    println!("machine: {} cores", std::thread::available_parallelism().map_or(0, |n| n.get()));
    for n in sizes {
        bench_size(&base, n);
    }
}
