//! A seeded simulation of the watch engine: deterministic time, random faults — source errors,
//! duplicate snapshots, clock jumps (backwards too), busy and failing delivery channels, failing
//! notification composers, and crashes (the engine dropped and reopened between any two steps)
//! — over 10,000 seeds (`STEWARD_WATCH_SEEDS` overrides). For every seed: no event key is
//! queued twice, no transition is lost, no event is delivered twice, and events are delivered
//! in queue order. A failing seed is printed and replays exactly with `STEWARD_WATCH_SEED=N`.
//!
//! Granted actions ride along: one rule grants a call at every stage, run after delivery with
//! crashes between claim and execution and between execution and its record. For every seed:
//! no action runs twice, no action runs without a claim, and the journal of claims only moves
//! forward (`claimed → succeeded`, never back, never lost). The clock starts just before the
//! Europe/Rome autumn changeover (2026-10-25 01:00 UTC) and jumps back an hour at random.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use steward_core::{
    Limits,
    watch::{
        ActionResult, ActionStatus, Capability, CapabilityRegistry, Delivery, DeliveryError,
        DomainEvent, GrantFields, QueuedEvent, SourceError, WatchAdapter, WatchDefinition,
        WatchError, WatchEventQuery, Watches,
    },
};

/// xorshift64*: small, deterministic, good enough to pick faults.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// A resource that moves through numbered stages; every stage passed is one event, so a
/// transition seen late (after failed polls) is still reported, and nothing may be lost.
#[derive(Default)]
struct Stages {
    stage: Mutex<u64>,
    failing: Mutex<bool>,
}

const LAST_STAGE: u64 = 6;

impl WatchAdapter for Stages {
    fn source(&self) -> &str {
        "stages"
    }
    fn snapshot(&self, _r: &str, _now: i64) -> Result<Value, SourceError> {
        if *self.failing.lock().unwrap() {
            return Err(SourceError("HTTP 503".into()));
        }
        Ok(json!({"stage": *self.stage.lock().unwrap()}))
    }
    fn events(&self, prev: &Value, cur: &Value, now: i64) -> Vec<DomainEvent> {
        let (a, b) = (prev["stage"].as_u64().unwrap_or(0), cur["stage"].as_u64().unwrap_or(0));
        (a + 1..=b)
            .map(|s| DomainEvent {
                key: format!("stage:{s}"),
                kind: "stage.reached".into(),
                at: now,
                data: json!({"stage": s}),
                previous: None,
                current: None,
                fallback_text: format!("stage {s}"),
            })
            .collect()
    }
    fn default_expiry(&self, _s: &Value, created: i64) -> i64 {
        created + 1_000_000
    }
    fn is_terminal(&self, s: &Value) -> bool {
        s["stage"].as_u64() == Some(LAST_STAGE)
    }
    fn grant_fields(&self) -> GrantFields {
        GrantFields::new(&["event.stage"], &[])
    }
}

/// The capability the simulation grants.
fn capabilities() -> CapabilityRegistry {
    let mut caps = CapabilityRegistry::empty();
    caps.register(Capability::new("voice.call", &["number", "message"], &["number"], 10))
        .expect("a valid capability");
    caps
}

/// A channel that is sometimes busy or failing, and a composer that sometimes fails; records
/// every send.
struct Channel {
    rng: Mutex<Rng>,
    sent: Mutex<Vec<i64>>,
}

impl Delivery for Channel {
    fn compose(&self, e: &QueuedEvent) -> Result<String, String> {
        if self.rng.lock().unwrap().chance(30) {
            return Err("model timeout".into());
        }
        Ok(format!("composed {}", e.event_key))
    }
    fn send(&self, e: &QueuedEvent, _text: &str) -> Result<(), DeliveryError> {
        let mut rng = self.rng.lock().unwrap();
        if rng.chance(15) {
            return Err(DeliveryError::Busy);
        }
        if rng.chance(15) {
            return Err(DeliveryError::Failed("push 502".into()));
        }
        self.sent.lock().unwrap().push(e.id);
        Ok(())
    }
}

fn run(seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let source = Arc::new(Stages::default());
    let adapters: Vec<Arc<dyn WatchAdapter>> = vec![source.clone()];
    let open = || {
        Watches::open(dir.path(), &Limits::default(), &adapters)
            .map(|w| w.with_capabilities(capabilities()))
            .map_err(|e| e.to_string())
    };
    let mut engine = open()?;
    let def: WatchDefinition = serde_json::from_value(json!({
        "source": "stages", "resource_ref": "r", "instruction": "tell me each stage",
        "rules": [
            {"id": "each", "event": "stage.reached"},
            {"id": "first", "event": "stage.reached", "once": true},
            {"id": "third", "event": "stage.reached", "where": {"stage": 3}},
            {"id": "call", "event": "stage.reached", "grants": [{"tool": "voice.call",
                "constraints": {"fields": {
                    "number": {"kind": "exact", "value": "+390000000"},
                    "message": {"kind": "template", "template": "Stage {{event.stage}}"}}}}]}
        ]
    }))
    .map_err(|e| e.to_string())?;
    // 2026-10-25T00:30:00Z: half an hour before Europe/Rome falls back.
    let mut now: i64 = 1_792_888_200;
    let approved = steward_core::testing::approved_watch(dir.path(), &def, now);
    engine.create_approved(&approved, now).map_err(|e| e.to_string())?;
    // action key → times executed; run id → the furthest status seen.
    let mut executed: std::collections::BTreeMap<String, u32> = Default::default();
    let mut journal: std::collections::BTreeMap<i64, steward_core::watch::ActionRunStatus> =
        Default::default();
    let mut handled = std::collections::BTreeSet::new();
    let channel =
        Channel { rng: Mutex::new(Rng(seed ^ 0xdead_beef | 1)), sent: Mutex::new(Vec::new()) };
    for _ in 0..40 {
        // The world moves (or not).
        if rng.chance(40) {
            let mut s = source.stage.lock().unwrap();
            *s = (*s + 1 + rng.next() % 2).min(LAST_STAGE);
        }
        *source.failing.lock().unwrap() = rng.chance(25);
        // The clock: forward, a big jump, or backwards (NTP, a DST-confused host).
        now += match rng.next() % 10 {
            0 => -3_600,
            1 => 7_200,
            _ => 45,
        };
        if rng.chance(10) {
            drop(engine);
            engine = open()?;
        }
        engine.poll(now).map_err(|e| e.to_string())?;
        if rng.chance(10) {
            drop(engine);
            engine = open()?;
        }
        engine.deliver(&channel, 1 + (rng.next() % 20) as usize, now).map_err(|e| e.to_string())?;
        // The delivered events' granted actions, with crashes around the call.
        let delivered = engine
            .events(&WatchEventQuery { limit: Some(100), ..Default::default() })
            .map_err(|e| e.to_string())?;
        let mut crashed = false;
        for ev in delivered.iter().filter(|e| e.status == "delivered") {
            // A retried delivery handler comes back to an event now and then.
            if !handled.insert(ev.id) && !rng.chance(20) {
                continue;
            }
            let Some(a) = engine.granted_actions(ev.id).map_err(|e| e.to_string())?.pop() else {
                continue;
            };
            let claim = match engine.claim_action(ev.id, &a.rule_id, &a.tool, &a.arguments, now) {
                Ok(c) => c,
                Err(WatchError::AlreadyClaimed(_)) => continue,
                Err(e) => return Err(format!("claim refused: {e}")),
            };
            if rng.chance(10) {
                drop(engine); // crashed after the claim, before the call
                engine = open()?;
                crashed = true;
                continue;
            }
            *executed.entry(claim.action_key.clone()).or_default() += 1;
            if rng.chance(10) {
                drop(engine); // crashed after the call, before its record
                engine = open()?;
                crashed = true;
                continue;
            }
            let ok = ActionResult { status: ActionStatus::Succeeded, outcome: None, error: None };
            engine.finish_action(claim.run_id, &ok, now).map_err(|e| e.to_string())?;
        }
        if crashed {
            check_journal(&engine, &delivered, &mut journal)?;
        }
    }
    // Let the world finish and everything drain.
    *source.stage.lock().unwrap() = LAST_STAGE;
    *source.failing.lock().unwrap() = false;
    engine.poll(now + 45).map_err(|e| e.to_string())?;
    let mut rounds = 0;
    loop {
        let pending = engine
            .events(&WatchEventQuery { pending: true, limit: Some(100), ..Default::default() })
            .map_err(|e| e.to_string())?;
        if pending.is_empty() || rounds > 500 {
            break;
        }
        rounds += 1;
        engine.deliver(&channel, 20, now + 90).map_err(|e| e.to_string())?;
    }
    let all = engine
        .events(&WatchEventQuery { limit: Some(100), ..Default::default() })
        .map_err(|e| e.to_string())?;
    let stages: Vec<u64> =
        all.iter().map(|e| e.event.data["stage"].as_u64().unwrap_or(0)).collect();
    let want: Vec<u64> = (1..=LAST_STAGE).collect();
    if stages != want {
        return Err(format!("queued stages {stages:?}, expected each of {want:?} once, in order"));
    }
    let with = |rule: &str| -> Vec<u64> {
        all.iter()
            .filter(|e| e.matched_rules.iter().any(|r| r == rule))
            .map(|e| e.event.data["stage"].as_u64().unwrap_or(0))
            .collect()
    };
    if with("first") != [1] {
        return Err(format!("the once rule matched stages {:?}", with("first")));
    }
    if with("third") != [3] {
        return Err(format!("the where rule matched stages {:?}", with("third")));
    }
    let sent = channel.sent.lock().unwrap().clone();
    let delivered: Vec<i64> =
        all.iter().filter(|e| e.status == "delivered").map(|e| e.id).collect();
    let failed = all.iter().filter(|e| e.status == "failed").count();
    let mut unique = sent.clone();
    unique.dedup();
    if unique.len() != sent.len() {
        return Err(format!("an event was delivered twice: {sent:?}"));
    }
    if sent != delivered {
        return Err(format!("sent {sent:?} but the queue says delivered {delivered:?}"));
    }
    if sent.windows(2).any(|w| w[0] > w[1]) {
        return Err(format!("delivered out of order: {sent:?}"));
    }
    check_journal(&engine, &all, &mut journal)?;
    if let Some((key, n)) = executed.iter().find(|(_, n)| **n > 1) {
        return Err(format!("action {key} ran {n} times"));
    }
    for key in executed.keys() {
        if !all.iter().any(|e| key.starts_with(&format!("{}:", e.id))) {
            return Err(format!("action {key} ran for no queued event"));
        }
    }
    if journal.len() < executed.len() {
        return Err(format!("{} actions ran but {} claims exist", executed.len(), journal.len()));
    }
    if sent.len() + failed != all.len() {
        return Err(format!(
            "{} events neither delivered nor given up",
            all.len() - sent.len() - failed
        ));
    }
    Ok(())
}

/// Every claim seen before is still there, and its status only moved forward.
fn check_journal(
    engine: &Watches,
    events: &[QueuedEvent],
    journal: &mut std::collections::BTreeMap<i64, steward_core::watch::ActionRunStatus>,
) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for ev in events {
        let runs = engine.action_runs(ev.id).map_err(|e| e.to_string())?;
        if runs.len() > 1 {
            return Err(format!("event {} has {} claims", ev.id, runs.len()));
        }
        for r in runs {
            seen.insert(r.id);
            let before = journal.insert(r.id, r.status);
            if before.is_some_and(|b| b != "claimed" && b != r.status) {
                return Err(format!("run {} moved back to {}", r.id, r.status));
            }
        }
    }
    if let Some(lost) = journal.keys().find(|id| !seen.contains(id)) {
        return Err(format!("claim {lost} disappeared"));
    }
    Ok(())
}

#[test]
fn seeded_simulation_no_duplicate_no_loss() {
    if let Some(seed) = std::env::var("STEWARD_WATCH_SEED").ok().and_then(|s| s.parse().ok()) {
        run(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        return;
    }
    let seeds: u64 =
        std::env::var("STEWARD_WATCH_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let threads =
        std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get) as u64;
    let failures: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    (t..seeds)
                        .step_by(threads as usize)
                        .filter_map(|seed| run(seed).err().map(|e| format!("seed {seed}: {e}")))
                        .take(5)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_default()).collect()
    });
    assert!(
        failures.is_empty(),
        "{}\nreplay one with STEWARD_WATCH_SEED=<seed> cargo test -p steward-core --test watch_simulation",
        failures.join("\n")
    );
}
