//! The [`WatchAdapter`] contract.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::no_panic;
use crate::watch::{DomainEvent, WatchAdapter};

/// A fixture timeline for [`watch_adapter_contract`].
#[derive(Debug, Clone, Copy)]
pub struct WatchAdapterExpectations<'a> {
    /// What [`WatchAdapter::source`] says.
    pub source: &'a str,
    /// A resource the adapter accepts and can snapshot along [`Self::timeline`].
    pub resource_ref: &'a str,
    /// Instants (Unix seconds, increasing) at which the resource is snapshotted; before each,
    /// the suite calls the test's `world` with the instant so it can move its fake world.
    pub timeline: &'a [i64],
    /// Event types that must appear somewhere along the timeline.
    pub kinds: &'a [&'a str],
    /// Whether the last snapshot is terminal (the watch would complete).
    pub ends_terminal: bool,
    /// References `check_ref` must refuse (they cannot be snapshotted either).
    pub refused_refs: &'a [&'a str],
    /// References that pass or fail `check_ref` but whose snapshot fails (the source is down,
    /// has no data, answers garbage, the resource does not exist).
    pub failing_refs: &'a [&'a str],
}

fn keys(events: &[DomainEvent]) -> Vec<(String, String)> {
    events.iter().map(|e| (e.key.clone(), e.kind.clone())).collect()
}

/// Checks `adapter` against the [`WatchAdapter`] contract along a fixture timeline:
///
/// - `source()` is the expected name; `check_ref` accepts the resource and refuses the refused
///   references with a reason;
/// - a snapshot of a refused or failing reference is a `SourceError` with a message, never a
///   panic (the engine keeps the previous snapshot);
/// - along the timeline every snapshot succeeds; no change means no events: `events(s, s)` is
///   empty, and so are the events between two snapshots of an unchanged world;
/// - each transition's events have distinct, non-empty keys, a type and a fallback text, and
///   the same transition gives the same keys and types whenever it is observed (`now` later);
/// - `is_terminal` is monotone (once terminal, always terminal) and ends as expected; the
///   expected event types all appear;
/// - `default_expiry` at creation is after the creation instant, and the same when asked again;
/// - values the adapter did not produce (`null`, `{}`, `[]`, a string, a number) never make
///   `events`, `is_terminal`, `default_expiry` or `urgency` panic, and still get an expiry
///   after creation.
///
/// # Panics
/// Naming the clause the adapter breaks.
pub fn watch_adapter_contract(
    adapter: &dyn WatchAdapter,
    expect: &WatchAdapterExpectations<'_>,
    world: &mut dyn FnMut(i64),
) {
    assert!(!expect.source.is_empty(), "name the source");
    assert_eq!(adapter.source(), expect.source, "source()");
    let timeline = expect.timeline;
    assert!(timeline.len() >= 2, "a timeline needs at least two instants");
    assert!(timeline.windows(2).all(|w| w[0] < w[1]), "the timeline must increase");
    let t0 = timeline[0];

    let resource = expect.resource_ref;
    if let Err(why) = no_panic("check_ref", || adapter.check_ref(resource)) {
        panic!("check_ref refused the fixture resource {resource:?}: {why}");
    }
    for r in expect.refused_refs {
        match no_panic("check_ref", || adapter.check_ref(r)) {
            Ok(()) => panic!("check_ref must refuse {r:?}"),
            Err(why) => assert!(!why.trim().is_empty(), "check_ref refused {r:?} without a reason"),
        }
    }

    world(t0);
    for r in expect.refused_refs.iter().chain(expect.failing_refs) {
        match no_panic("snapshot of a bad resource", || adapter.snapshot(r, t0)) {
            Ok(v) => panic!("the snapshot of {r:?} must be a SourceError, got {v}"),
            Err(e) => assert!(!e.0.trim().is_empty(), "the SourceError of {r:?} says nothing"),
        }
    }

    // The timeline.
    let mut snapshots: Vec<Value> = Vec::with_capacity(timeline.len());
    let mut seen_kinds = BTreeSet::new();
    let mut terminal_at: Option<usize> = None;
    for (i, &t) in timeline.iter().enumerate() {
        world(t);
        let take = || {
            no_panic("snapshot", || adapter.snapshot(resource, t))
                .unwrap_or_else(|e| panic!("the snapshot of {resource:?} at {t} failed: {e}"))
        };
        let current = take();
        let again = take();
        let events =
            |p: &Value, c: &Value, now: i64| no_panic("events", || adapter.events(p, c, now));
        assert!(events(&current, &current, t).is_empty(), "events(s, s) at {t} must be empty");
        assert!(
            events(&current, &again, t).is_empty(),
            "two snapshots of an unchanged world at {t} must give no events"
        );
        let terminal = no_panic("is_terminal", || adapter.is_terminal(&current));
        match terminal_at {
            Some(at) => assert!(
                terminal,
                "is_terminal must be monotone: terminal at {} but not at {t}",
                timeline[at]
            ),
            None if terminal => terminal_at = Some(i),
            None => {}
        }
        let _ = no_panic("urgency", || adapter.urgency(&current));
        if let Some(previous) = snapshots.last() {
            let now = events(previous, &current, t);
            let mut distinct = BTreeSet::new();
            for e in &now {
                assert!(!e.key.is_empty(), "an event without a key at {t}: {e:?}");
                assert!(!e.kind.is_empty(), "an event without a type at {t}: {e:?}");
                assert!(!e.fallback_text.trim().is_empty(), "an event without a text: {e:?}");
                assert!(distinct.insert(e.key.clone()), "key {} twice in one transition", e.key);
                seen_kinds.insert(e.kind.clone());
            }
            let later = events(previous, &current, t + 3_600);
            assert_eq!(
                keys(&later),
                keys(&now),
                "the same transition seen later must have the same keys and types"
            );
            let from_again = events(previous, &again, t);
            assert_eq!(
                keys(&from_again),
                keys(&now),
                "the same transition from a second snapshot must have the same keys"
            );
        }
        snapshots.push(current);
    }
    let last = no_panic("is_terminal", || adapter.is_terminal(&snapshots[snapshots.len() - 1]));
    assert_eq!(last, expect.ends_terminal, "is_terminal of the last snapshot");
    for kind in expect.kinds {
        assert!(
            seen_kinds.contains(*kind),
            "{kind} never appeared along the timeline (saw {seen_kinds:?})"
        );
    }

    // The expiry of a watch created at the first instant.
    let first = &snapshots[0];
    let expiry = no_panic("default_expiry", || adapter.default_expiry(first, t0));
    assert!(expiry > t0, "default_expiry {expiry} must be after the creation at {t0}");
    assert_eq!(
        no_panic("default_expiry", || adapter.default_expiry(first, t0)),
        expiry,
        "default_expiry must be a function of its inputs"
    );

    // Values the adapter did not make.
    for junk in [Value::Null, json!({}), json!([]), json!("snapshot"), json!(42)] {
        let _ = no_panic("events on a foreign value", || adapter.events(&junk, first, t0));
        let _ = no_panic("events on a foreign value", || adapter.events(first, &junk, t0));
        let _ = no_panic("events on a foreign value", || adapter.events(&junk, &junk, t0));
        let _ = no_panic("is_terminal on a foreign value", || adapter.is_terminal(&junk));
        let _ = no_panic("urgency on a foreign value", || adapter.urgency(&junk));
        let expiry =
            no_panic("default_expiry on a foreign value", || adapter.default_expiry(&junk, t0));
        assert!(expiry > t0, "default_expiry of {junk} must still be after the creation");
    }
}
