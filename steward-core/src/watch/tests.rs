//! Engine tests with a scripted in-process adapter and an injected clock.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;
use crate::Limits;

/// A source whose state the test sets; `fail` makes the next snapshots fail.
#[derive(Default)]
struct Scripted {
    state: Mutex<Value>,
    fail: Mutex<bool>,
}

impl WatchAdapter for Scripted {
    fn source(&self) -> &str {
        "scripted"
    }
    fn snapshot(&self, _r: &str, _now: i64) -> Result<Value, SourceError> {
        if *self.fail.lock().unwrap() {
            return Err(SourceError("503 from the source".into()));
        }
        Ok(self.state.lock().unwrap().clone())
    }
    fn events(&self, prev: &Value, cur: &Value, now: i64) -> Vec<DomainEvent> {
        let mut out = Vec::new();
        if prev["platform"] != cur["platform"] && !cur["platform"].is_null() {
            out.push(DomainEvent {
                key: format!("platform:{}", cur["platform"]),
                kind: "x.platform".into(),
                at: now,
                data: json!({"platform": cur["platform"], "where": {"station": cur["station"]}}),
                previous: Some(prev.clone()),
                current: Some(cur.clone()),
                fallback_text: format!("platform {}", cur["platform"]),
            });
        }
        if cur["arrived"] == true && prev["arrived"] != true {
            out.push(DomainEvent {
                key: "arrived".into(),
                kind: "x.arrived".into(),
                at: now,
                data: json!({}),
                previous: None,
                current: None,
                fallback_text: "arrived".into(),
            });
        }
        out
    }
    fn default_expiry(&self, _s: &Value, created: i64) -> i64 {
        created + 8 * 3600
    }
    fn is_terminal(&self, s: &Value) -> bool {
        s["arrived"] == true
    }
}

fn engine(dir: &std::path::Path) -> (Arc<Scripted>, Watches) {
    let a = Arc::new(Scripted::default());
    *a.state.lock().unwrap() = json!({"platform": null, "station": "Roma", "eta": 0});
    let w = Watches::open(dir, &Limits::default(), &[a.clone() as Arc<dyn WatchAdapter>]).unwrap();
    (a, w)
}

fn def(rules: Value) -> WatchDefinition {
    serde_json::from_value(json!({
        "source": "scripted", "resource_ref": "r1", "instruction": "tell me", "rules": rules
    }))
    .unwrap()
}

fn queued(w: &Watches) -> Vec<(String, Vec<String>)> {
    w.events(&WatchEventQuery { limit: Some(100), ..Default::default() })
        .unwrap()
        .into_iter()
        .map(|e| (e.event.kind, e.matched_rules))
        .collect()
}

#[test]
fn events_match_once_where_and_survive_reopen_without_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let (a, w) = engine(dir.path());
    // Already true at creation is not replayed.
    *a.state.lock().unwrap() = json!({"platform": "6", "station": "Roma"});
    let watch = w
        .create(
            &def(json!([
                {"id": "any", "event": "x.platform"},
                {"id": "first", "event": "x.platform", "once": true},
                {"id": "roma7", "event": "x.platform", "where": {"platform": "7", "where.station": "Roma"}},
                {"id": "end", "event": "x.arrived"}
            ])),
            1_000,
        )
        .unwrap();
    assert_eq!(w.poll(1_010).unwrap().queued, 0, "nothing changed since creation");
    *a.state.lock().unwrap() = json!({"platform": "7", "station": "Roma"});
    let r = w.poll(1_020).unwrap();
    assert_eq!((r.checked, r.queued), (1, 1));
    assert_eq!(
        queued(&w),
        [("x.platform".into(), vec!["any".into(), "first".into(), "roma7".into()])]
    );
    // After a restart (a new engine over the same file), polling goes on from the stored
    // snapshot.
    drop(w);
    let (a2, w) = engine(dir.path());
    *a2.state.lock().unwrap() = json!({"platform": "8", "station": "Roma"});
    w.poll(1_030).unwrap();
    // `first` took part already: it never matches again, `roma7`'s filter fails.
    assert_eq!(queued(&w)[1], ("x.platform".into(), vec!["any".into()]));
    // A source failure keeps the previous snapshot and records the error.
    *a2.fail.lock().unwrap() = true;
    let r = w.poll(1_040).unwrap();
    assert_eq!((r.failed, r.queued), (1, 0));
    let got = w.get(watch.id).unwrap();
    assert_eq!(got.snapshot["platform"], "8");
    assert_eq!(got.last_error.as_deref(), Some("503 from the source"));
    *a2.fail.lock().unwrap() = false;
    // Terminal: the arrival is queued, then the watch completes; later polls skip it.
    *a2.state.lock().unwrap() = json!({"platform": "8", "station": "Roma", "arrived": true});
    let r = w.poll(1_050).unwrap();
    assert_eq!((r.queued, r.completed), (1, 1));
    assert_eq!(w.get(watch.id).unwrap().status, "completed");
    assert_eq!(w.get(watch.id).unwrap().last_error, None);
    assert_eq!(w.poll(1_060).unwrap().checked, 0);
    assert_eq!(queued(&w).len(), 3);
    // Stop is idempotent and never revives a final state.
    assert_eq!(w.stop(watch.id, 1_070).unwrap().status, "completed");
}

#[test]
fn time_triggers_absolute_after_restart_relative_not_stale() {
    let dir = tempfile::tempdir().unwrap();
    let (a, w) = engine(dir.path());
    *a.state.lock().unwrap() = json!({"eta": 10_000});
    let watch = w
        .create(
            &def(json!([
                {"id": "abs", "trigger": {"kind": "time_reached", "after_minutes": 10}},
                {"id": "rel", "trigger": {"kind": "before_time", "field": "eta", "minutes": 30}}
            ])),
            1_000,
        )
        .unwrap();
    // after_minutes is frozen at creation.
    assert_eq!(
        watch.rules[0].trigger,
        Some(Trigger::TimeReached { at: Some("1970-01-01T00:26:40Z".into()), after_minutes: None })
    );
    assert_eq!(w.poll(1_599).unwrap().queued, 0);
    // The host was down past the instant: the absolute trigger still fires (once).
    drop(w);
    let (a, w) = engine(dir.path());
    *a.state.lock().unwrap() = json!({"eta": 10_000});
    assert_eq!(w.poll(5_000).unwrap().queued, 1);
    assert_eq!(w.poll(5_100).unwrap().queued, 0);
    // The ETA moves later: the relative deadline moves with it.
    *a.state.lock().unwrap() = json!({"eta": 12_000});
    assert_eq!(w.poll(8_300).unwrap().queued, 0, "10,200 is 30 min before the new ETA");
    // A window that passed while nobody polled does not fire late.
    assert_eq!(w.poll(10_200 + RELATIVE_GRACE_SECS).unwrap().queued, 0);
    let kinds: Vec<String> = queued(&w).into_iter().map(|(k, _)| k).collect();
    assert_eq!(kinds, ["time.reached"]);
    // In its window it fires, once.
    let dir2 = tempfile::tempdir().unwrap();
    let (a, w) = engine(dir2.path());
    *a.state.lock().unwrap() = json!({"eta": 10_000_000});
    w.create(
        &def(json!([{"id": "rel", "trigger": {"kind": "before_time", "field": "eta", "minutes": 30}}])),
        10_000_000 - 7_200,
    )
    .unwrap();
    assert_eq!(w.poll(10_000_000 - 1_800 + 10).unwrap().queued, 1);
    assert_eq!(w.poll(10_000_000 - 1_800 + 60).unwrap().queued, 0);
    let _ = watch;
}

#[test]
fn expiry_is_a_lifecycle_event_and_bad_definitions_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let (_a, w) = engine(dir.path());
    let mut d = def(json!([{"id": "p", "event": "x.platform"}]));
    d.expires_at = Some("1970-01-01T01:00:00+00:00".into());
    let watch = w.create(&d, 1_000).unwrap();
    assert_eq!(watch.expires_at, 3_600);
    let r = w.poll(3_600).unwrap();
    assert_eq!((r.expired, r.checked), (1, 0));
    assert_eq!(w.get(watch.id).unwrap().status, "expired");
    assert_eq!(queued(&w), [("watch.expired".into(), vec![])]);
    assert_eq!(w.stop(watch.id, 4_000).unwrap().status, "expired");

    let code = |rules: Value| w.create(&def(rules), 1_000).unwrap_err().code();
    assert_eq!(code(json!([])), "WATCH_INVALID");
    assert_eq!(
        code(json!([{"id": "a", "event": "x"}, {"id": "a", "event": "y"}])),
        "WATCH_INVALID"
    );
    assert_eq!(code(json!([{"id": "a"}])), "WATCH_INVALID");
    assert_eq!(
        code(
            json!([{"id": "a", "event": "x", "trigger": {"kind": "time_reached", "after_minutes": 1}}])
        ),
        "WATCH_INVALID"
    );
    assert_eq!(
        code(
            json!([{"id": "a", "trigger": {"kind": "time_reached", "at": "2026-12-24T18:00:00"}}])
        ),
        "WATCH_INVALID"
    );
    assert_eq!(
        code(json!([{"id": "a", "event": "x", "grants": [{"tool": "mail.send"}]}])),
        "WATCH_GRANTS_UNSUPPORTED"
    );
    let mut other = def(json!([{"id": "a", "event": "x"}]));
    other.source = "nope".into();
    assert_eq!(w.create(&other, 1_000).unwrap_err().code(), "WATCH_UNKNOWN_SOURCE");
    assert_eq!(w.stop(999, 1).unwrap_err().code(), "WATCH_NOT_FOUND");
    assert_eq!(
        w.list(&WatchQuery { limit: Some(0), ..Default::default() }).unwrap_err().code(),
        "WATCH_INVALID"
    );
}

/// A delivery whose composer fails the first `compose_failures` times and whose channel is
/// busy or failing on demand; records what was sent.
#[derive(Default)]
struct Recorder {
    compose_failures: Mutex<usize>,
    busy: Mutex<bool>,
    sent: Mutex<Vec<(i64, String)>>,
}

impl Delivery for Recorder {
    fn compose(&self, e: &QueuedEvent) -> Result<String, String> {
        let mut n = self.compose_failures.lock().unwrap();
        if *n > 0 {
            *n -= 1;
            return Err("model timeout".into());
        }
        Ok(format!("composed: {}", e.event.kind))
    }
    fn send(&self, e: &QueuedEvent, text: &str) -> Result<(), DeliveryError> {
        if *self.busy.lock().unwrap() {
            return Err(DeliveryError::Busy);
        }
        self.sent.lock().unwrap().push((e.id, text.to_owned()));
        Ok(())
    }
}

#[test]
fn delivery_oldest_first_stored_text_fallback_and_busy() {
    let dir = tempfile::tempdir().unwrap();
    let (a, w) = engine(dir.path());
    w.create(&def(json!([{"id": "p", "event": "x.platform"}])), 1_000).unwrap();
    for p in ["1", "2", "3"] {
        *a.state.lock().unwrap() = json!({"platform": p});
        w.poll(1_100).unwrap();
    }
    let d = Recorder::default();
    // Two composition failures, then the fallback text is used for that event.
    *d.compose_failures.lock().unwrap() = 2;
    for at in [1_200, 1_210] {
        let r = w.deliver(&d, 1, at).unwrap();
        assert_eq!((r.failed, r.delivered), (1, 0));
    }
    assert_eq!(w.deliver(&d, 1, 1_220).unwrap().delivered, 1);
    // Busy: nothing sent and no attempt counted, but the composed text is kept for the retry.
    *d.busy.lock().unwrap() = true;
    assert_eq!(w.deliver(&d, 20, 1_300).unwrap().busy, 1, "the pass ends at a busy channel");
    let pending = w.events(&WatchEventQuery { pending: true, ..Default::default() }).unwrap();
    assert!(
        pending.iter().all(|e| e.attempts == 0 && e.notification.is_some()),
        "the batch's texts were composed and stored before sending"
    );
    *d.busy.lock().unwrap() = false;
    // Composing again would fail: the stored texts go out without it.
    *d.compose_failures.lock().unwrap() = 5;
    let r = w.deliver(&d, 20, 1_320).unwrap();
    assert_eq!((r.delivered, r.failed), (2, 0));
    let sent = d.sent.lock().unwrap().clone();
    assert_eq!(sent[0].1, "platform \"1\"", "the third try used the fallback text");
    assert_eq!(sent[1].1, "composed: x.platform");
    assert!(sent.windows(2).all(|p| p[0].0 < p[1].0), "oldest first");
    assert_eq!(w.deliver(&d, 20, 1_400).unwrap(), DeliveryReport::default(), "nothing sent twice");
}
