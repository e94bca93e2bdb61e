//! Documents, in-process, against the design's table (`steward-design.txt`, "Document
//! Extraction, Cache And Search"): an uncached read of a text PDF (pdf.js's 14-page
//! tracemonkey paper and Tika's 41-page protected report, from `corpora/documents`), a cached
//! read of a 6,000-character window, a warm search inside a document of about 1,284 passages,
//! `files.find` over 200,000 paths, and indexing every document of a root of about 1,000
//! mixed documents (the corpus copied over), with the process's peak RSS.
//!
//! Needs `STEWARD_CORPORA` (or `../shared/corpora`). `STEWARD_BENCH_DIR` (default
//! `target/bench-data`) keeps the generated trees between runs.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

const RUNS: usize = 200;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn warm<T>(label: &str, mut f: impl FnMut() -> T) {
    std::hint::black_box(f());
    let mut t = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let start = Instant::now();
        std::hint::black_box(f());
        t.push(start.elapsed());
    }
    t.sort();
    println!(
        "{label:<52} p50 {:>7.3} ms  p95 {:>7.3} ms",
        ms(percentile(&t, 0.5)),
        ms(percentile(&t, 0.95))
    );
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// A home sharing `root`.
fn home(dir: &Path, root: &Path) -> steward_core::Steward {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!("[files]\nroots = [{:?}]\n", root.canonicalize().unwrap()),
    )
    .unwrap();
    steward_connectors::home::open(Some(home)).unwrap()
}

fn corpora() -> PathBuf {
    std::env::var_os("STEWARD_CORPORA")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("../../shared/corpora")).filter(|p| p.exists()))
        .or_else(|| Some(PathBuf::from("../shared/corpora")).filter(|p| p.exists()))
        .expect("STEWARD_CORPORA: the corpora with documents/")
        .join("documents")
}

fn main() {
    let docs = corpora();
    let data = PathBuf::from(
        std::env::var("STEWARD_BENCH_DIR").unwrap_or_else(|_| "target/bench-data".into()),
    );
    let tmp = tempfile::tempdir().unwrap();

    // Uncached reads: a fresh home (empty cache) each time.
    for (name, rel) in [
        ("tracemonkey.pdf (14 pages)", "pdfjs/pdf/tracemonkey.pdf"),
        ("testPDF_protected.pdf (41 pages)", "tika/pdf/testPDF_protected.pdf"),
    ] {
        let mut t = Vec::new();
        for i in 0..7 {
            let d = tmp.path().join(format!("u{i}-{}", rel.replace('/', "_")));
            let root = d.join("share");
            std::fs::create_dir_all(&root).unwrap();
            let file = root.join(Path::new(rel).file_name().unwrap());
            std::fs::copy(docs.join(rel), &file).unwrap();
            let s = home(&d, &root);
            let start = Instant::now();
            let w = s.read_doc(&file, None, None, None).unwrap();
            t.push(start.elapsed());
            assert!(!w.info.from_cache);
        }
        t.sort();
        println!(
            "uncached read (extract + cache), {name:<32} median {:>7.1} ms",
            ms(t[t.len() / 2])
        );
    }

    // Cached read of a window.
    let d = tmp.path().join("cached");
    let root = d.join("share");
    std::fs::create_dir_all(&root).unwrap();
    let pdf = root.join("tracemonkey.pdf");
    std::fs::copy(docs.join("pdfjs/pdf/tracemonkey.pdf"), &pdf).unwrap();
    // About 1,284 passages: the paper's text 30 times over, as one text file.
    let text = {
        let s0 = home(&d, &root);
        let w = s0.read_doc(&pdf, None, None, Some(12_000)).unwrap();
        let mut all = String::new();
        let mut cursor = None;
        loop {
            let w = s0.read_doc(&pdf, cursor.as_deref(), None, Some(12_000)).unwrap();
            all.push_str(&w.text);
            match w.next_cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        drop(w);
        (0..30).map(|i| format!("part {i}\n{all}\n")).collect::<String>()
    };
    let big = root.join("big.txt");
    std::fs::write(&big, &text).unwrap();
    let s = home(&d, &root);
    warm("cached read, 6,000-char window of tracemonkey.pdf", || {
        s.read_doc(&pdf, None, None, None).unwrap()
    });
    warm("cached read, last window of tracemonkey.pdf (page 14)", || {
        s.read_doc(&pdf, None, Some(14), None).unwrap()
    });
    let h = s.search_doc(&big, "trace tree nested loop", Some(5)).unwrap();
    println!("(big.txt: {} chars, {} passages)", text.chars().count(), h.chunks);
    warm(&format!("search inside one document, {} passages, warm", h.chunks), || {
        s.search_doc(&big, "trace tree nested loop", Some(5)).unwrap()
    });

    // files.find over 200,000 paths.
    let tree = data.join("files-200k");
    if !tree.join(".done").exists() {
        for i in 0..200_000u32 {
            let dir = tree.join(format!("d{:03}/e{:02}", i % 500, (i / 500) % 40));
            if i < 20_000 {
                std::fs::create_dir_all(&dir).unwrap();
            }
            let ext = ["pdf", "txt", "docx", "jpg", "md"][(i % 5) as usize];
            std::fs::write(dir.join(format!("file {i} invoice-{}.{ext}", i % 97)), b"").unwrap();
        }
        std::fs::write(tree.join(".done"), b"").unwrap();
    }
    let d2 = tmp.path().join("find");
    std::fs::create_dir_all(&d2).unwrap();
    let s2 = home(&d2, &tree);
    let start = Instant::now();
    let r = s2.index_files().unwrap();
    println!("index_files over {} paths: {:.0} ms", r.files, ms(start.elapsed()));
    let q = steward_core::files::FileQuery {
        name: Some("invoice-42".into()),
        extension: Some("pdf".into()),
        ..Default::default()
    };
    warm(&format!("files.find name+ext over {} paths, warm", r.files), || {
        s2.find_files(&q).unwrap()
    });

    // Index ~1,000 mixed documents (the corpus copied 8 times).
    let mixed = data.join("docs-1000");
    if !mixed.join(".done").exists() {
        let mut n = 0;
        for copy in 0..8 {
            for e in walk(&docs) {
                if e.components().any(|c| c.as_os_str() == "expected" || c.as_os_str() == "hostile")
                {
                    continue;
                }
                let rel = e.strip_prefix(&docs).unwrap().to_string_lossy().replace('/', "_");
                std::fs::create_dir_all(mixed.join(format!("c{copy}"))).unwrap();
                // Each copy differs by a byte appended to text files, the rest are the same bytes.
                std::fs::copy(&e, mixed.join(format!("c{copy}/{rel}"))).unwrap();
                n += 1;
            }
        }
        std::fs::write(mixed.join(".done"), n.to_string()).unwrap();
    }
    let d3 = tmp.path().join("mixed");
    std::fs::create_dir_all(&d3).unwrap();
    let s3 = home(&d3, &mixed);
    s3.index_files().unwrap();
    let start = Instant::now();
    let r = s3.index_docs(None, &mut |_| {}).unwrap();
    println!(
        "index_docs: {} documents ({} indexed, {} without text) in {:.1} s, {} passages; peak RSS {:.0} MiB",
        r.documents,
        r.indexed,
        r.failed_total,
        start.elapsed().as_secs_f64(),
        r.chunks,
        peak_rss_mib()
    );
    warm("search across the indexed documents, warm", || {
        s3.search_docs("trace tree", Some(10)).unwrap()
    });
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if !p.to_string_lossy().contains("LICENSE")
                && !p.to_string_lossy().contains("NOTICE")
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
