"""The Python binding end to end: open a home, mirror a Maildir, read counts, typed errors."""

import pathlib

import pytest

import steward


def write_maildir(root: pathlib.Path) -> pathlib.Path:
    cur = root / "Maildir" / "cur"
    cur.mkdir(parents=True)
    (cur / "1:2,S").write_bytes(b"From: a@example.org\nSubject: one\nMessage-ID: <1@x>\n\nhello\n")
    (cur / "2:2,").write_bytes(b"From: b@example.org\nSubject: Re: one\nMessage-ID: <2@x>\nIn-Reply-To: <1@x>\n\nhi\n")
    (cur / "3:2,").write_bytes(b"")
    return root / "Maildir"


def test_index_and_stats(tmp_path):
    md = write_maildir(tmp_path)
    s = steward.Steward(tmp_path / "home")
    assert {i["name"]: i["status"] for i in s.status()["items"]}["ingest"] == "unknown"
    first = s.index_maildir(md, account="py")
    assert first["mode"] == "backfill"
    assert first["added"] == 2
    assert first["error_count"] == 1
    assert first["threads"] == 1
    again = s.index_maildir(md, account="py")
    assert (again["mode"], again["added"], again["updated"]) == ("reconcile", 0, 0)
    stats = s.mirror_stats()
    assert stats == {"messages_live": 2, "messages_deleted": 0, "error_count": 1}
    items = {i["name"]: i for i in s.status()["items"]}
    assert items["store.mirror"]["status"] == "ok" and items["ingest"]["status"] != "unknown"
    assert items["embedder"] == {"name": "embedder", "status": "unknown",
                                 "detail": "not configured: lexical search only"}


def test_errors_are_typed_with_codes(tmp_path):
    s = steward.Steward(tmp_path / "home")
    with pytest.raises(steward.NotFoundError) as e:
        s.index_maildir(tmp_path / "missing")
    assert e.value.code == "MAIL_SOURCE_NOT_FOUND"
    assert e.value.kind == "not_found"
    assert isinstance(e.value, steward.StewardError)
    with pytest.raises(steward.InvalidInputError) as e:
        s.index_maildir(write_maildir(tmp_path), account="   ")
    assert e.value.code == "MIRROR_INVALID_INPUT"


def test_index_async_mirrors_without_holding_the_loop(tmp_path):
    import asyncio

    md = write_maildir(tmp_path)
    s = steward.Steward(tmp_path / "home")

    async def main():
        ticks = 0
        call = asyncio.ensure_future(s.index_maildir_async(md, account="py"))
        while not call.done():
            ticks += 1
            await asyncio.sleep(0)
        with pytest.raises(steward.NotFoundError) as e:
            await s.index_mbox_async(tmp_path / "missing.mbox")
        assert e.value.code == "MAIL_SOURCE_NOT_FOUND"
        with pytest.raises(steward.InvalidInputError):
            await s.index_emlx_async(md, account="   ")
        return call.result(), ticks

    summary, ticks = asyncio.run(main())
    assert (summary["added"], summary["mode"], summary["error_count"]) == (2, "backfill", 1)
    assert len(summary["errors"]) == 1 and ticks > 0
    # The text index is current when the call returns.
    assert [m["subject"] for m in s.search(text="hello")["messages"]] == ["one"]


def test_progress_is_reported_and_an_exception_from_it_stops_the_run(tmp_path):
    maildir = tmp_path / "demo"
    steward.demo_maildir(maildir, messages=1500)  # ~2,400 files: three batches of 1,024
    s = steward.Steward(tmp_path / "home")

    class Stop(Exception):
        pass

    def stop_while_ingesting(report):
        if report["phase"] == "ingesting":
            raise Stop(report["files_done"])

    with pytest.raises(Stop):
        s.index_maildir(maildir, account="demo", progress=stop_while_ingesting)
    partial = s.mirror_stats()["messages_live"]
    assert partial > 0, "the first batch was committed before the callback raised"
    # The run stopped before its next batch; what it committed stays, and a new run finishes.
    reports = []
    summary = s.index_maildir(maildir, account="demo", progress=reports.append)
    assert reports[0]["phase"] == "scanning"
    done = [r["files_done"] for r in reports if r["phase"] == "ingesting"]
    assert done == sorted(done) and done[-1] == reports[-1]["files_total"] > 0
    assert reports[-1]["phase"] == "finishing"
    live = s.mirror_stats()["messages_live"]
    assert partial < live and summary["added"] == live - partial
    with pytest.raises(TypeError):
        s.index_maildir(maildir, account="demo", progress=42)


def test_ctrl_c_stops_a_sync_between_batches(tmp_path):
    import signal

    maildir = tmp_path / "demo"
    steward.demo_maildir(maildir, messages=1500)  # ~2,400 files: three batches of 1,024
    s = steward.Steward(tmp_path / "home")
    seen = []

    def interrupt_once(report):
        seen.append(report["phase"])
        if report["phase"] == "ingesting" and seen.count("ingesting") == 1:
            # Ctrl-C, delivered deterministically: raise_signal sends SIGINT to this thread
            # (the one the reports run on, holding the GIL), so the C handler has run when it
            # returns and the pending signal is seen at the latest by the binding's
            # check_signals() before the next report. os.kill(getpid()) may hand the signal to
            # any thread, at any later time — the run could finish first (the old flake).
            signal.raise_signal(signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        s.index_maildir(maildir, account="demo", progress=interrupt_once)
    assert seen.count("ingesting") == 1, seen
    assert "finishing" not in seen, "the run stopped before its next batch"
    assert 0 < s.mirror_stats()["messages_live"] < 1500


def test_version():
    assert steward.version()
