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
    fn grant_fields(&self) -> GrantFields {
        GrantFields::new(&["state.station", "state.platform", "event.platform"], &["state.eta"])
    }
}

fn engine(dir: &std::path::Path) -> (Arc<Scripted>, Watches) {
    let a = Arc::new(Scripted::default());
    *a.state.lock().unwrap() = json!({"platform": null, "station": "Roma", "eta": 0});
    let w = Watches::open(dir, &Limits::default(), &[a.clone() as Arc<dyn WatchAdapter>]).unwrap();
    (a, w)
}

/// A person's approval of `d` in `home`'s approval store, as the executor's token.
fn approve(home: &std::path::Path, d: &WatchDefinition) -> crate::approval::ApprovedInput {
    crate::testing::approved_watch(home, d, 1_000)
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
    // A grant without constraints on its required fields is malformed; a well-formed one
    // needs a person's approval first.
    assert_eq!(
        code(json!([{"id": "a", "event": "x", "grants": [{"tool": "mail.send"}]}])),
        "WATCH_INVALID"
    );
    assert_eq!(
        code(json!([{"id": "a", "event": "x", "grants": [mail_grant()]}])),
        "WATCH_NEEDS_APPROVAL"
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

/// A `mail.send` grant: exact recipient and subject, a templated body.
fn mail_grant() -> Value {
    json!({"tool": "mail.send", "constraints": {"fields": {
        "to": {"kind": "exact", "value": ["sister@example.com"]},
        "subject": {"kind": "exact", "value": "On my way"},
        "body": {"kind": "template", "template": "Arriving at {{state.station}}, platform {{event.platform}}."}
    }}})
}

/// A one-shot `time` source (the continuation's child watches need one).
struct Clock;

impl WatchAdapter for Clock {
    fn source(&self) -> &str {
        "time"
    }
    fn snapshot(&self, r: &str, now: i64) -> Result<Value, SourceError> {
        let at = crate::time::parse_instant(r).map_err(|_| SourceError("bad instant".into()))?;
        Ok(json!({"at": at, "reached": now >= at}))
    }
    fn events(&self, prev: &Value, cur: &Value, now: i64) -> Vec<DomainEvent> {
        if cur["reached"] != true || prev["reached"] == true {
            return Vec::new();
        }
        vec![DomainEvent {
            key: format!("time.reached:{}", cur["at"]),
            kind: "time.reached".into(),
            at: now,
            data: json!({"at": cur["at"]}),
            previous: None,
            current: Some(cur.clone()),
            fallback_text: "time".into(),
        }]
    }
    fn default_expiry(&self, s: &Value, created: i64) -> i64 {
        s["at"].as_i64().unwrap_or(created) + 3_600
    }
    fn is_terminal(&self, s: &Value) -> bool {
        s["reached"] == true
    }
}

fn granted_engine(dir: &std::path::Path) -> (Arc<Scripted>, Watches) {
    let a = Arc::new(Scripted::default());
    *a.state.lock().unwrap() = json!({"platform": null, "station": "Roma", "eta": 100_000});
    let adapters = [a.clone() as Arc<dyn WatchAdapter>, Arc::new(Clock) as Arc<dyn WatchAdapter>];
    (a, Watches::open(dir, &Limits::default(), &adapters).unwrap())
}

#[test]
fn grants_are_checked_against_the_registry_at_creation() {
    let dir = tempfile::tempdir().unwrap();
    let (_a, w) = granted_engine(dir.path());
    let with = |grant: Value| {
        w.create_approved(
            &approve(
                dir.path(),
                &def(json!([{"id": "g", "event": "x.platform", "grants": [grant]}])),
            ),
            1_000,
        )
    };
    let denied = |grant: Value| with(grant).unwrap_err().to_string();
    let mut g = mail_grant();
    g["tool"] = json!("shell.run");
    assert!(denied(g).contains("only registered capabilities"));
    let mut g = mail_grant();
    g["constraints"]["fields"]["reply_to"] = json!({"kind": "exact", "value": "x@y"});
    assert!(denied(g).contains("reply_to is not one of"));
    let mut g = mail_grant();
    g["constraints"]["fields"].as_object_mut().unwrap().remove("subject");
    assert!(denied(g).contains("required field subject needs a constraint"));
    let mut g = mail_grant();
    g["constraints"]["fields"]["body"]["template"] = json!("{{state.secret_token}}");
    assert!(denied(g).contains("not a registered field"));
    let mut g = mail_grant();
    g["constraints"]["deny_extra_fields"] = json!(false);
    assert!(denied(g).contains("always denied"));
    let mut g = mail_grant();
    g["max_invocations"] = json!(5);
    assert!(denied(g).contains("max_invocations"));
    let g = json!({"tool": "calendar.create_event", "constraints": {"fields": {
        "title": {"kind": "exact", "value": "Pick up"},
        "start": {"kind": "relative_time", "field": "state.station", "minutes": 0},
        "end": {"kind": "relative_time", "field": "state.eta", "minutes": 30}}}});
    assert!(denied(g).contains("not a registered time"));
    let bad_cont = def(json!([{"id": "c", "event": "x.platform",
        "continuation": {"outcomes": ["busy"], "after_minutes": 1, "max_attempts": 3}}]));
    assert!(w.create(&bad_cont, 1_000).unwrap_err().to_string().contains("needs a grant"));
    assert_eq!(w.list(&WatchQuery::default()).unwrap().len(), 0, "nothing was stored");
    // Well-formed: one watch per approval, however often it is activated.
    let approved = approve(
        dir.path(),
        &def(json!([{"id": "g", "event": "x.platform", "grants": [mail_grant()]}])),
    );
    let a = w.create_approved(&approved, 1_000).unwrap();
    let b = w.create_approved(&approved, 1_000).unwrap();
    assert_eq!((a.id, a.approval_id, a.attempt), (b.id, Some(approved.approval_id()), 1));
    assert_eq!(w.list(&WatchQuery::default()).unwrap().len(), 1);
}

/// Counts what ran.
#[derive(Default)]
struct Executor {
    ran: Mutex<Vec<(String, Value)>>,
    outcome: Mutex<Option<String>>,
}

impl ActionExecutor for Executor {
    fn execute(&self, tool: &str, arguments: &Value) -> ActionResult {
        self.ran.lock().unwrap().push((tool.to_owned(), arguments.clone()));
        ActionResult {
            status: ActionStatus::Succeeded,
            outcome: self.outcome.lock().unwrap().clone(),
            error: None,
        }
    }
}

#[test]
fn the_second_guard_checks_every_argument_and_a_claim_never_runs_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (a, w) = granted_engine(dir.path());
    let watch = w
        .create_approved(
            &approve(
                dir.path(),
                &def(json!([
                    {"id": "mail", "event": "x.platform", "where": {"platform": "7"}, "once": true,
                     "grants": [mail_grant()]},
                    {"id": "cal", "event": "x.arrived", "grants": [{"tool": "calendar.create_event",
                      "constraints": {"fields": {
                        "title": {"kind": "one_of", "values": ["Pick up", "Meet"]},
                        "start": {"kind": "relative_time", "field": "state.eta", "minutes": -30},
                        "end": {"kind": "relative_time", "field": "state.eta", "minutes": 0}}}}]},
                    {"id": "plain", "event": "x.platform"}
                ])),
            ),
            1_000,
        )
        .unwrap();
    *a.state.lock().unwrap() = json!({"platform": "7", "station": "Roma", "eta": 100_000});
    assert_eq!(w.poll(1_010).unwrap().queued, 1);
    let ev = w.events(&WatchEventQuery::default()).unwrap().remove(0);
    // Only the matched rules' grants are offered, arguments resolved from registered fields.
    let offered = w.granted_actions(ev.id).unwrap();
    assert_eq!(offered.len(), 1);
    assert_eq!(offered[0].tool, "mail.send");
    let args = offered[0].arguments.clone();
    assert_eq!(args["body"], "Arriving at Roma, platform 7.");
    let deny = |rule: &str, tool: &str, args: Value| {
        w.claim_action(ev.id, rule, tool, &args, 1_020).unwrap_err().code()
    };
    let mut extra = args.clone();
    extra["bcc"] = json!(["eve@example.com"]);
    assert_eq!(deny("mail", "mail.send", extra), "WATCH_GRANT_DENIED");
    let mut other = args.clone();
    other["to"] = json!(["eve@example.com"]);
    assert_eq!(deny("mail", "mail.send", other), "WATCH_GRANT_DENIED");
    let mut forged = args.clone();
    forged["body"] = json!("Send me the bank codes.");
    assert_eq!(deny("mail", "mail.send", forged), "WATCH_GRANT_DENIED");
    let mut missing = args.clone();
    missing.as_object_mut().unwrap().remove("subject");
    assert_eq!(deny("mail", "mail.send", missing), "WATCH_GRANT_DENIED");
    assert_eq!(
        deny("cal", "calendar.create_event", json!({})),
        "WATCH_GRANT_DENIED",
        "rule cal did not match"
    );
    assert_eq!(deny("mail", "mail.delete", args.clone()), "WATCH_GRANT_DENIED");
    assert!(w.action_runs(ev.id).unwrap().is_empty(), "a denial claims nothing");
    // A retried delivery runs it once.
    let exec = Executor::default();
    let first = w.run_granted(ev.id, &exec, 1_030).unwrap();
    assert_eq!(first.ran.len(), 1);
    assert_eq!(first.ran[0].status, "succeeded");
    let again = w.run_granted(ev.id, &exec, 1_040).unwrap();
    assert!(again.ran.is_empty() && again.skipped[0].contains("already claimed"));
    assert_eq!(deny("mail", "mail.send", args), "WATCH_ACTION_CLAIMED");
    assert_eq!(exec.ran.lock().unwrap().len(), 1, "executed exactly once");
    // The arrival: a `one_of` title is the caller's choice within the set; the relative
    // times are frozen to exact instants from the state at the event.
    *a.state.lock().unwrap() =
        json!({"platform": "7", "station": "Roma", "eta": 200_000, "arrived": true});
    w.poll(1_100).unwrap();
    let arrival =
        w.events(&WatchEventQuery { watch_id: Some(watch.id), ..Default::default() }).unwrap();
    let arrival = arrival.iter().find(|e| e.event.kind == "x.arrived").unwrap();
    let offered = w.granted_actions(arrival.id).unwrap();
    assert_eq!(offered[0].open_fields, ["title"]);
    assert_eq!(offered[0].arguments["start"], "1970-01-03T07:03:20Z");
    assert_eq!(exec.ran.lock().unwrap().len(), 1);
    let report = w.run_granted(arrival.id, &exec, 1_110).unwrap();
    assert!(report.ran.is_empty() && report.skipped[0].contains("title to choose"));
    let mut cal = offered[0].arguments.clone();
    cal["title"] = json!("Party");
    assert_eq!(deny_at(&w, arrival.id, "cal", &cal), "WATCH_GRANT_DENIED");
    cal["title"] = json!("Meet");
    // The same instant in another offset is accepted and stored in canonical form.
    cal["end"] = json!("1970-01-03T08:33:20+01:00");
    let claim = w.claim_action(arrival.id, "cal", "calendar.create_event", &cal, 1_120).unwrap();
    assert_eq!(claim.arguments["end"], "1970-01-03T07:33:20Z");
    assert_eq!(claim.action_key, format!("{}:cal:calendar.create_event", arrival.id));
}

fn deny_at(w: &Watches, event: i64, rule: &str, args: &Value) -> &'static str {
    w.claim_action(event, rule, "calendar.create_event", args, 1_200).unwrap_err().code()
}

#[test]
fn a_continuation_inherits_grants_and_context_exactly_and_stops_at_max_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let (a, w) = granted_engine(dir.path());
    let parent = w
        .create_approved(
            &approve(dir.path(), &def(json!([{"id": "mail", "event": "x.platform", "once": true, "grants": [mail_grant()],
                "continuation": {"outcomes": ["not_answered"], "after_minutes": 2, "max_attempts": 2}}]))),
            1_000,
        )
        .unwrap();
    *a.state.lock().unwrap() = json!({"platform": "3", "station": "Milano", "eta": 100_000});
    w.poll(1_010).unwrap();
    let exec = Executor::default();
    *exec.outcome.lock().unwrap() = Some("not_answered".into());
    let ev = w.events(&WatchEventQuery::default()).unwrap().remove(0);
    let run = w.run_granted(ev.id, &exec, 1_020).unwrap().ran.remove(0);
    let child_id = run.child_watch_id.expect("a child watch was scheduled");
    let child = w.get(child_id).unwrap();
    assert_eq!(
        (child.source.as_str(), child.parent_id, child.attempt),
        ("time", Some(parent.id), 2)
    );
    assert_eq!(child.approval_id, parent.approval_id);
    assert!(parent.approval_id.is_some());
    assert_eq!(child.rules[0].grants, parent.rules[0].grants, "exactly the parent's grants");
    assert_eq!(child.rules[0].continuation, parent.rules[0].continuation);
    assert_eq!(child.resource_ref, "1970-01-01T00:19:00Z", "finished at 1,020 + 2 minutes");
    // Finishing twice changes nothing.
    let done = ActionResult { status: ActionStatus::Failed, outcome: None, error: None };
    assert_eq!(w.finish_action(run.id, &done, 1_030).unwrap_err().code(), "WATCH_ACTION_CLAIMED");
    // The parent's state moves on; the child still speaks of the parent's event.
    *a.state.lock().unwrap() = json!({"platform": "9", "station": "Torino", "eta": 100_000});
    w.poll(1_140).unwrap();
    let child_ev = w
        .events(&WatchEventQuery { watch_id: Some(child_id), ..Default::default() })
        .unwrap()
        .remove(0);
    let offered = w.granted_actions(child_ev.id).unwrap();
    assert_eq!(offered[0].arguments["body"], "Arriving at Milano, platform 3.");
    let mut wider = offered[0].arguments.clone();
    wider["cc"] = json!(["friend@example.com"]);
    assert_eq!(
        w.claim_action(child_ev.id, "mail", "mail.send", &wider, 1_150).unwrap_err().code(),
        "WATCH_GRANT_DENIED"
    );
    // The second attempt is the last one: no grandchild, whatever the outcome.
    let run2 = w.run_granted(child_ev.id, &exec, 1_160).unwrap().ran.remove(0);
    assert_eq!(run2.child_watch_id, None);
    assert_eq!(exec.ran.lock().unwrap().len(), 2);
    assert_eq!(
        w.list(&WatchQuery { limit: Some(100), ..Default::default() }).unwrap().len(),
        2,
        "parent and one child"
    );
    // Without a `time` source the outcome is still recorded; only the follow-up is missing.
    let dir2 = tempfile::tempdir().unwrap();
    let (a2, w2) = engine(dir2.path());
    w2.create_approved(&approve(dir2.path(), &def(json!([{"id": "mail", "event": "x.platform", "once": true, "grants": [mail_grant()],
            "continuation": {"outcomes": ["not_answered"], "after_minutes": 2, "max_attempts": 2}}]))), 1_000)
    .unwrap();
    *a2.state.lock().unwrap() = json!({"platform": "3", "station": "Milano", "eta": 100_000});
    w2.poll(1_010).unwrap();
    let ev = w2.events(&WatchEventQuery::default()).unwrap().remove(0);
    let run = w2.run_granted(ev.id, &exec, 1_020).unwrap().ran.remove(0);
    assert_eq!((run.status.as_str(), run.child_watch_id), ("succeeded", None));
}

/// A source whose snapshots block until the test opens its gate; counts calls.
struct Gated {
    name: &'static str,
    open: Mutex<bool>,
    wake: std::sync::Condvar,
    calls: std::sync::atomic::AtomicUsize,
}

impl Gated {
    fn new(name: &'static str, open: bool) -> Arc<Self> {
        Arc::new(Self {
            name,
            open: Mutex::new(open),
            wake: std::sync::Condvar::new(),
            calls: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    fn release(&self) {
        *self.open.lock().unwrap() = true;
        self.wake.notify_all();
    }

    fn calls(&self) -> usize {
        self.calls.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl WatchAdapter for Gated {
    fn source(&self) -> &str {
        self.name
    }
    fn snapshot(&self, r: &str, _now: i64) -> Result<Value, SourceError> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.wake.wait(open).unwrap();
        }
        Ok(json!({"resource": r}))
    }
    fn events(&self, _prev: &Value, _cur: &Value, _now: i64) -> Vec<DomainEvent> {
        Vec::new()
    }
    fn default_expiry(&self, _s: &Value, created: i64) -> i64 {
        created + 8 * 3600
    }
    fn is_terminal(&self, _s: &Value) -> bool {
        false
    }
}

#[test]
fn a_hanging_source_stalls_neither_the_other_sources_nor_the_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let (stuck, quick) = (Gated::new("stuck", true), Gated::new("quick", true));
    let adapters: Vec<Arc<dyn WatchAdapter>> = vec![stuck.clone(), quick.clone()];
    let w = Watches::open(dir.path(), &Limits::default(), &adapters).unwrap();
    let mk = |source: &str, r: &str| -> WatchDefinition {
        serde_json::from_value(json!({
            "source": source, "resource_ref": r, "instruction": "tell me",
            "rules": [{"id": "any", "event": "never"}]
        }))
        .unwrap()
    };
    for r in ["s1", "s2", "s3"] {
        w.create(&mk("stuck", r), 1_000).unwrap();
    }
    for r in ["q1", "q2"] {
        w.create(&mk("quick", r), 1_000).unwrap();
    }
    // Creation took one snapshot each; from here the stuck source hangs.
    *stuck.open.lock().unwrap() = false;
    let (stuck_before, quick_before) = (stuck.calls(), quick.calls());
    let budget = |ms: u64| PollBudget {
        deadline: Some(std::time::Instant::now() + std::time::Duration::from_millis(ms)),
        per_source: 2,
    };
    let r = w.poll_within(1_060, &budget(300)).unwrap();
    assert_eq!((r.checked, r.deferred, r.failed), (2, 3, 0), "{r:?}");
    assert_eq!(quick.calls() - quick_before, 2);
    // Two workers (the per-source bound) are stuck in a snapshot each; nobody took the third.
    assert_eq!(stuck.calls() - stuck_before, 2);
    let health = w.list(&WatchQuery::default()).unwrap();
    let deferred: Vec<_> = health.iter().filter(|s| s.last_error.is_some()).collect();
    assert_eq!(deferred.len(), 3, "each deferred watch says why: {health:?}");
    assert!(deferred[0].last_error.as_deref().unwrap().contains("time budget"));

    // Next cycle: both stuck workers still hang, so the source gets none and is not asked
    // again (no thread pile-up); the quick source is polled as usual.
    let r = w.poll_within(1_120, &budget(300)).unwrap();
    assert_eq!((r.checked, r.deferred), (2, 3), "{r:?}");
    assert_eq!(stuck.calls() - stuck_before, 2, "a source with every worker stuck is skipped");

    // The source recovers: the stuck calls return, their workers end, the next cycle asks it.
    stuck.release();
    let mut cycles = 0;
    let r = loop {
        cycles += 1;
        let r = w.poll_within(1_180, &budget(2_000)).unwrap();
        if r.checked == 5 || cycles == 200 {
            break r;
        }
        // Let the released workers end before the next cycle counts them.
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert_eq!((r.checked, r.deferred, r.failed), (5, 0, 0), "{r:?}");
    assert!(w.list(&WatchQuery::default()).unwrap().iter().all(|s| s.last_error.is_none()));
}

#[test]
fn states_are_enums_and_a_state_no_version_wrote_is_a_damaged_row() {
    let dir = tempfile::tempdir().unwrap();
    let (_a, w) = engine(dir.path());
    let id = w.create(&def(json!([{"id": "p", "event": "x.platform"}])), 1_000).unwrap().id;
    assert_eq!(w.get(id).unwrap().status, WatchStatus::Active);
    assert_eq!(serde_json::to_value(w.get(id).unwrap().status).unwrap(), "active");
    let q = |s: &str| WatchQuery { status: Some(s.parse().unwrap()), ..WatchQuery::default() };
    assert_eq!(w.list(&q("active")).unwrap().len(), 1);
    assert_eq!(w.list(&q("stopped")).unwrap().len(), 0);
    let bad = "paused".parse::<WatchStatus>().unwrap_err();
    assert_eq!(WatchError::from(bad).code(), "WATCH_INVALID");
    // The table's CHECK refuses it; a damaged file does not ask.
    let c = rusqlite::Connection::open(dir.path().join("watches.db")).unwrap();
    c.pragma_update(None, "ignore_check_constraints", true).unwrap();
    c.execute("UPDATE watches SET status = 'paused' WHERE id = ?1", [id]).unwrap();
    drop(c);
    let e = w.get(id).unwrap_err();
    assert_eq!(e.code(), "WATCH_CORRUPT", "{e}");
}

#[test]
fn only_an_approved_watch_request_starts_a_watch_from_a_token() {
    use crate::approval::{Approvals, HumanAuthority, NewApproval, Resolution};
    let dir = tempfile::tempdir().unwrap();
    let (_a, w) = granted_engine(dir.path());
    // A person approved something else (a mail): its token does not start a watch.
    let approvals = Approvals::open(dir.path(), &Limits::default()).unwrap();
    let mail = approvals
        .request(
            &NewApproval {
                chat: None,
                requested_by: "agent:test".into(),
                tool: "mail.send".into(),
                input: json!({"to": ["a@example.org"], "subject": "s", "body": "b"}),
                summary: "Send s".into(),
                level: crate::policy::Level::Confirm,
                timeout_secs: None,
                taint: None,
            },
            None,
            1_000,
        )
        .unwrap();
    let person = HumanAuthority::new("ada").unwrap();
    approvals.resolve(mail.id, &Resolution::Approve, None, &person, None, None, 1_000).unwrap();
    let token = approvals.authorize_approved(mail.id).unwrap();
    let e = w.create_approved(&token, 1_000).unwrap_err();
    assert_eq!(e.code(), "WATCH_INVALID", "{e}");
    assert!(w.list(&WatchQuery::default()).unwrap().is_empty(), "nothing started");
}
