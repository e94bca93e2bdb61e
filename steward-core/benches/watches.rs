//! The watch engine at scale: one poll cycle over 10,000 active watches of an in-process
//! source (a tenth of them change per cycle), and the rate of enqueue + delivery.
//! `cargo bench -p steward-core --bench watches` (`STEWARD_BENCH_WATCHES` overrides the count).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use serde_json::{Value, json};
use steward_core::{
    Limits,
    watch::{
        Delivery, DeliveryError, DomainEvent, QueuedEvent, SourceError, WatchAdapter,
        WatchDefinition, WatchEventQuery, Watches,
    },
};

/// Every resource `r<N>` is at stage `cycle` when `N % 10 == cycle % 10`, so a tenth of the
/// watches change per cycle.
struct Counter {
    cycle: AtomicU64,
}

impl WatchAdapter for Counter {
    fn source(&self) -> &str {
        "counter"
    }
    fn snapshot(&self, r: &str, _now: i64) -> Result<Value, SourceError> {
        let n: u64 = r[1..].parse().unwrap_or(0);
        let c = self.cycle.load(Ordering::Relaxed);
        let stage = c / 10 + u64::from(n % 10 < c % 10);
        Ok(json!({"stage": stage}))
    }
    fn events(&self, prev: &Value, cur: &Value, now: i64) -> Vec<DomainEvent> {
        if prev["stage"] == cur["stage"] {
            return Vec::new();
        }
        vec![DomainEvent {
            key: format!("stage:{}", cur["stage"]),
            kind: "stage.reached".into(),
            at: now,
            data: json!({"stage": cur["stage"]}),
            previous: None,
            current: None,
            fallback_text: "moved".into(),
        }]
    }
    fn default_expiry(&self, _s: &Value, created: i64) -> i64 {
        created + 1_000_000
    }
    fn is_terminal(&self, _s: &Value) -> bool {
        false
    }
}

struct Sink;

impl Delivery for Sink {
    fn compose(&self, e: &QueuedEvent) -> Result<String, String> {
        Ok(e.event.fallback_text.clone())
    }
    fn send(&self, _e: &QueuedEvent, _text: &str) -> Result<(), DeliveryError> {
        Ok(())
    }
}

fn main() {
    let n: u64 =
        std::env::var("STEWARD_BENCH_WATCHES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let dir = tempfile::tempdir().unwrap();
    let counter = Arc::new(Counter { cycle: AtomicU64::new(0) });
    let w =
        Watches::open(dir.path(), &Limits::default(), &[counter.clone() as Arc<dyn WatchAdapter>])
            .unwrap();
    let started = Instant::now();
    for i in 0..n {
        let def: WatchDefinition = serde_json::from_value(json!({
            "source": "counter", "resource_ref": format!("r{i}"), "instruction": "each stage",
            "rules": [{"id": "each", "event": "stage.reached"}]
        }))
        .unwrap();
        w.create(&def, 1_000).unwrap();
    }
    let create = started.elapsed();
    let mut polls = Vec::new();
    let mut queued = 0;
    for cycle in 1..=5 {
        counter.cycle.store(cycle, Ordering::Relaxed);
        let t = Instant::now();
        let r = w.poll(1_000 + cycle as i64 * 45).unwrap();
        polls.push(t.elapsed().as_secs_f64() * 1e3);
        queued += r.queued;
        assert_eq!(r.checked as u64, n);
    }
    let per_cycle = queued / 5;
    // Every watch changes at once: n events queued in one cycle.
    counter.cycle.store(100, Ordering::Relaxed);
    let t = Instant::now();
    let burst = w.poll(2_000).unwrap().queued;
    let enqueue = t.elapsed();
    queued += burst;
    let t = Instant::now();
    let mut delivered = 0;
    loop {
        let r = w.deliver(&Sink, 20, 2_000).unwrap();
        if r.delivered == 0 {
            break;
        }
        delivered += r.delivered;
    }
    let deliver = t.elapsed();
    assert_eq!(delivered, queued);
    let pending = w.events(&WatchEventQuery { pending: true, ..Default::default() }).unwrap();
    assert!(pending.is_empty());
    let mut sorted = polls.clone();
    sorted.sort_by(f64::total_cmp);
    println!("| measure | value | target |");
    println!("|---|---|---|");
    println!(
        "| create {n} watches (one transaction each) | {:.2} s, {:.0} /s | |",
        create.as_secs_f64(),
        n as f64 / create.as_secs_f64()
    );
    println!(
        "| one poll cycle, {n} active, {} events queued per cycle | p50 {:.0} ms (max {:.0} ms) | ≤ 1,000 ms |",
        per_cycle, sorted[2], sorted[4]
    );
    println!(
        "| a cycle where all {n} change: {burst} events queued | {:.0} ms, {:.0} events/s | |",
        enqueue.as_secs_f64() * 1e3,
        burst as f64 / enqueue.as_secs_f64()
    );
    println!(
        "| deliver {delivered} events in batches of 20 | {:.0} events/s | |",
        delivered as f64 / deliver.as_secs_f64()
    );
    println!(
        "| enqueue + deliver, the burst and the backlog | {:.0} events/s | ≥ 5,000 /s |",
        delivered as f64 / (enqueue + deliver).as_secs_f64()
    );
}
