//! `time`: one-shot `time.reached` at the instant the resource names (RFC 3339 with an
//! explicit offset). The snapshot is whether the instant has passed; the watch completes when
//! it has.

use serde_json::{Value, json};
use steward_core::{
    time::{CivilTime, parse_instant},
    watch::{DomainEvent, GrantFields, SourceError, WatchAdapter},
};

/// How long after its instant a time watch is kept if nobody polled (seconds).
/// Fixed (not a setting).
pub const TIME_WATCH_GRACE_SECS: i64 = 3_600;

/// The `time` source.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimeAdapter;

fn instant(r: &str) -> Result<i64, String> {
    parse_instant(r)
        .map_err(|_| format!("{r:?} is not an RFC 3339 instant with an explicit offset"))
}

impl WatchAdapter for TimeAdapter {
    fn source(&self) -> &str {
        "time"
    }

    fn check_ref(&self, resource_ref: &str) -> Result<(), String> {
        instant(resource_ref).map(|_| ())
    }

    fn grant_fields(&self) -> GrantFields {
        GrantFields::new(&["event.at"], &["state.at"])
    }

    fn snapshot(&self, resource_ref: &str, now: i64) -> Result<Value, SourceError> {
        let at = instant(resource_ref).map_err(SourceError)?;
        Ok(json!({"at": at, "reached": now >= at}))
    }

    fn events(&self, previous: &Value, current: &Value, now: i64) -> Vec<DomainEvent> {
        if current["reached"] != true || previous["reached"] == true {
            return Vec::new();
        }
        let at = current["at"].as_i64().unwrap_or(now);
        let when = CivilTime::from_unix(at).rfc3339();
        vec![DomainEvent {
            key: format!("time.reached:{at}"),
            kind: "time.reached".to_owned(),
            at: now,
            data: json!({"at": when}),
            previous: Some(previous.clone()),
            current: Some(current.clone()),
            fallback_text: format!("It is {when}."),
        }]
    }

    fn default_expiry(&self, snapshot: &Value, created_at: i64) -> i64 {
        snapshot["at"].as_i64().unwrap_or(created_at) + TIME_WATCH_GRACE_SECS
    }

    fn is_terminal(&self, snapshot: &Value) -> bool {
        snapshot["reached"] == true
    }

    fn urgency(&self, snapshot: &Value) -> Option<u64> {
        // Poll right at the instant when it is close.
        let at = snapshot["at"].as_i64()?;
        let now = steward_core::time::now_secs();
        (at > now && at - now < 60).then(|| u64::try_from(at - now).unwrap_or(5))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use steward_core::{
        Limits, StewardError as _,
        watch::{WatchAdapter, WatchDefinition, WatchEventQuery, Watches},
    };

    use super::*;

    #[test]
    fn fires_once_after_a_restart_and_completes() {
        let dir = tempfile::tempdir().unwrap();
        let adapters: Vec<Arc<dyn WatchAdapter>> = vec![Arc::new(TimeAdapter)];
        let open = || Watches::open(dir.path(), &Limits::default(), &adapters).unwrap();
        let w = open();
        let def: WatchDefinition = serde_json::from_value(json!({
            "source": "time", "resource_ref": "1970-01-01T01:00:00+01:00",
            "instruction": "remind me", "rules": [{"id": "r", "event": "time.reached"}]
        }))
        .unwrap();
        // 01:00+01:00 is 0 UTC: created at -100.
        let watch = w.create(&def, -100).unwrap();
        assert_eq!(watch.expires_at, TIME_WATCH_GRACE_SECS);
        assert_eq!(w.poll(-1).unwrap().queued, 0);
        drop(w);
        let w = open();
        let r = w.poll(30).unwrap();
        assert_eq!((r.queued, r.completed), (1, 1));
        assert_eq!(w.poll(40).unwrap().queued, 0);
        let events = w.events(&WatchEventQuery::default()).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event.data["at"], "1970-01-01T00:00:00Z");
        // A past instant at creation is already true: never replayed.
        let past = w.create(&def, 100).unwrap();
        assert_eq!(w.poll(200).unwrap().queued, 0);
        assert_eq!(w.get(past.id).unwrap().status, "completed");
        let mut bad = def;
        bad.resource_ref = "tomorrow".into();
        assert_eq!(w.create(&bad, 0).unwrap_err().code(), "WATCH_BAD_RESOURCE");
        bad.resource_ref = "2026-12-24T18:00:00".into();
        assert_eq!(w.create(&bad, 0).unwrap_err().code(), "WATCH_BAD_RESOURCE");
    }
}
