"""Watches from Python: create, poll with an explicit clock (what a replay does), events, stop,
and typed errors for bad definitions."""

import datetime

import pytest

import steward


def instant(seconds_from_now):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds_from_now)
    return t.replace(microsecond=0).isoformat()


def test_a_time_watch_fires_once_when_polled_past_its_instant(tmp_path):
    s = steward.Steward(tmp_path / "home")
    w = s.create_watch({
        "source": "time", "resource_ref": instant(120), "instruction": "call mum",
        "rules": [{"id": "ring", "event": "time.reached", "once": True}],
    })
    assert w["status"] == "active"
    assert s.poll_watches()["queued"] == 0
    now = int(datetime.datetime.now(datetime.timezone.utc).timestamp())
    report = s.poll_watches(now=now + 180)
    assert (report["queued"], report["completed"]) == (1, 1)
    assert s.poll_watches(now=now + 240)["queued"] == 0
    events = s.watch_events(pending=True)
    assert [e["event"]["type"] for e in events] == ["time.reached"]
    assert events[0]["matched_rules"] == ["ring"]
    assert s.watches(status="completed")[0]["id"] == w["id"]
    assert s.stop_watch(w["id"])["status"] == "completed"


def test_bad_definitions_are_typed_errors(tmp_path):
    s = steward.Steward(tmp_path / "home")
    with pytest.raises(steward.InvalidInputError) as e:
        s.create_watch({"source": "time"})
    assert e.value.code == "WATCH_INVALID"
    with pytest.raises(steward.InvalidInputError) as e:
        s.create_watch({"source": "moon", "resource_ref": "x", "instruction": "i",
                        "rules": [{"id": "a", "event": "e"}]})
    assert e.value.code == "WATCH_UNKNOWN_SOURCE"
    with pytest.raises(steward.InvalidInputError) as e:
        s.create_watch({"source": "time", "resource_ref": instant(60), "instruction": "i",
                        "rules": [{"id": "a", "event": "time.reached", "grants": [{"tool": "mail.send"}]}]})
    assert e.value.code == "WATCH_INVALID"
    grant = {"tool": "mail.send", "constraints": {"fields": {
        "to": {"kind": "exact", "value": ["a@b.c"]}, "subject": {"kind": "exact", "value": "s"},
        "body": {"kind": "exact", "value": "b"}}}}
    with pytest.raises(steward.InvalidInputError) as e:
        s.create_watch({"source": "time", "resource_ref": instant(60), "instruction": "i",
                        "rules": [{"id": "a", "event": "time.reached", "grants": [grant]}]})
    assert e.value.code == "WATCH_NEEDS_APPROVAL"
    with pytest.raises(steward.NotFoundError) as e:
        s.stop_watch(42)
    assert e.value.code == "WATCH_NOT_FOUND"
    with pytest.raises(steward.InvalidInputError):
        s.watches(limit=0)
    assert s.watches() == []


def test_a_watch_with_grants_needs_a_person_and_then_starts(tmp_path):
    s = steward.Steward(tmp_path / "home")
    grant = {"tool": "mail.send", "constraints": {"fields": {
        "to": {"kind": "exact", "value": ["sister@example.com"]},
        "subject": {"kind": "exact", "value": "On my way"},
        "body": {"kind": "template", "template": "It is {{event.at}}."}}}}
    definition = {"source": "time", "resource_ref": instant(3600), "instruction": "mail her",
                  "rules": [{"id": "m", "event": "time.reached", "once": True, "grants": [grant]}]}
    card = s.propose_watch(definition)
    assert card["outcome"] == "needs_approval"
    assert card["tool"] == "watch.create_agent"
    assert "may mail.send" in card["summary"]
    assert s.watches() == []
    with pytest.raises(steward.DeniedError) as e:
        s.create_approved_watch(card["id"])
    assert e.value.code == "APPROVAL_NOT_APPROVED"
    with pytest.raises(steward.InvalidInputError):
        s.human("agent:python")
    ada = s.human("ada")
    assert ada.person == "ada"
    decided = ada.approve(card["id"], note="fine")
    assert decided["status"] == "approved"
    [w] = s.watches()
    assert w["approval_id"] == card["id"]
    assert s.create_approved_watch(card["id"])["id"] == w["id"]
    # A denied one starts nothing.
    other = s.propose_watch(definition)
    assert ada.deny(other["id"])["status"] == "denied"
    assert len(s.watches()) == 1
    # Without grants it simply starts.
    plain = dict(definition, rules=[{"id": "p", "event": "time.reached"}])
    assert s.propose_watch(plain)["outcome"] == "started"


def test_a_subscription_sends_the_state_then_events_and_resumes_from_a_cursor(tmp_path):
    import time
    s = steward.Steward(tmp_path / "home")
    sub = s.subscribe()
    state = sub.snapshot()
    assert state is not None and "cursor" in state
    start = sub.cursor
    now = int(time.time())
    w = s.create_watch({"source": "time", "resource_ref": instant(60), "instruction": "ring",
                        "rules": [{"id": "ring", "event": "time.reached", "once": True}]})
    assert s.poll_watches(now + 61)["queued"] == 1
    events = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(e.get("type") == "watch" for e in events):
        events += sub.next(timeout=1.0)
    watch_events = [e for e in events if e.get("type") == "watch"]
    assert len(watch_events) == 1, events
    assert watch_events[0]["watch_id"] == w["id"]
    assert sub.cursor == events[-1]["cursor"] != start
    # Resuming from the cursor: nothing old again, and no snapshot.
    again = s.subscribe(after=sub.cursor)
    assert again.snapshot() is None
    assert [e for e in again.next(timeout=0.5) if e.get("type") == "watch"] == []
    # From the start cursor the watch event is replayed, through the iterator too.
    replay = s.subscribe(after=start)
    first = next(e for e in replay if e.get("type") == "watch")
    assert first["watch_id"] == w["id"]
    with pytest.raises(steward.InvalidInputError):
        s.subscribe(after="not-a-cursor")
    with pytest.raises(steward.InvalidInputError):
        sub.next(timeout=120)
