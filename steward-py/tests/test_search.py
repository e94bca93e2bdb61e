"""Search from Python, and the binding's behaviour under threads and pickling: core calls release
the GIL, one handle serves several threads, results and errors survive pickle."""

import pathlib
import pickle
import threading
import time

import pytest

import steward


def write_maildir(root: pathlib.Path, n: int) -> pathlib.Path:
    cur = root / "Maildir" / "cur"
    cur.mkdir(parents=True)
    for i in range(n):
        sender = "ada@example.org" if i % 2 else "bob@example.org"
        subject = f"invoice {i}" if i % 10 == 0 else f"note {i}"
        body = f"paragraph {i} about the quarterly numbers\n" * 20
        (cur / f"{i}:2,S").write_bytes(
            f"From: {sender}\nSubject: {subject}\nMessage-ID: <{i}@x>\n"
            f"Date: Mon, 1 Jun 2026 10:{i % 60:02d}:00 +0000\n\n{body}".encode())
    return root / "Maildir"


def test_search_by_text_sender_and_order_with_typed_errors(tmp_path):
    s = steward.Steward(tmp_path / "home")
    s.index_maildir(write_maildir(tmp_path, 40), account="py")
    page = s.search(text="invoice", limit=10)
    subjects = sorted(m["subject"] for m in page["messages"])
    assert subjects == ["invoice 0", "invoice 10", "invoice 20", "invoice 30"]
    assert page["page"]["next_offset"] is None
    ada = s.search(**{"from": "ada@example.org"}, limit=100)
    assert len(ada["messages"]) == 20
    assert all(m["from"]["address"] == "ada@example.org" for m in ada["messages"])
    first = s.search(sort="date", limit=5)
    assert len(first["messages"]) == 5 and first["page"]["next_offset"] == 5
    for kwargs, cls, code in [
        ({"limit": 0}, steward.InvalidInputError, "LIMIT_OUT_OF_RANGE"),
        ({"colour": "red"}, steward.InvalidInputError, "INVALID_SEARCH_PARAMS"),
        ({"limit": "ten"}, steward.InvalidInputError, "INVALID_SEARCH_PARAMS"),
        ({"role": "nope"}, steward.InvalidInputError, "INVALID_ROLE"),
        ({"account": "nobody"}, steward.NotFoundError, "ACCOUNT_NOT_FOUND"),
    ]:
        with pytest.raises(cls) as e:
            s.search(**kwargs)
        assert e.value.code == code, kwargs


def test_core_calls_release_the_gil(tmp_path):
    md = write_maildir(tmp_path, 1500)
    s = steward.Steward(tmp_path / "home")
    span = {}

    def index():
        span["start"] = time.perf_counter()
        span["summary"] = s.index_maildir(md, account="py")
        span["end"] = time.perf_counter()

    worker = threading.Thread(target=index)
    samples = []
    worker.start()
    while worker.is_alive():
        samples.append(time.perf_counter())
    worker.join()
    assert span["summary"]["added"] == 1500
    # While the core call ran, this thread kept running Python: the GIL was released. (A
    # count of loop turns inside the call, not its duration: a core call holding the GIL
    # would leave this loop no turn until it returned.)
    during = [t for t in samples if span["start"] < t < span["end"]]
    assert len(during) > 1000, (len(during), span["end"] - span["start"])


def test_one_handle_serves_many_threads(tmp_path):
    s = steward.Steward(tmp_path / "home")
    s.index_maildir(write_maildir(tmp_path, 200), account="py")
    expected = [s.search(text=f"note {i}", limit=3) for i in range(1, 9)]
    results = [None] * 8
    errors = []

    def run(i):
        try:
            for _ in range(20):
                results[i] = s.search(text=f"note {i + 1}", limit=3)
        except Exception as e:  # noqa: BLE001 - the test reports it
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert results == expected


def test_results_and_errors_survive_pickle(tmp_path):
    s = steward.Steward(tmp_path / "home")
    s.index_maildir(write_maildir(tmp_path, 10), account="py")
    page = s.search(text="invoice")
    assert pickle.loads(pickle.dumps(page)) == page
    with pytest.raises(steward.InvalidInputError) as e:
        s.search(limit=0)
    again = pickle.loads(pickle.dumps(e.value))
    assert isinstance(again, steward.InvalidInputError)
    assert isinstance(again, steward.StewardError)
    assert (again.code, again.kind, str(again)) == (e.value.code, e.value.kind, str(e.value))
    # A handle owns open stores: it is not picklable, and says so.
    with pytest.raises(TypeError):
        pickle.dumps(s)


def test_async_calls_are_awaitable_concurrent_typed_and_survive_fork(tmp_path):
    import asyncio
    import os

    home = tmp_path / "home"
    s = steward.Steward(home)
    s.index_maildir(write_maildir(tmp_path, 40), account="py")

    async def main():
        pages = await asyncio.gather(*(s.search_async(text="invoice", limit=10) for _ in range(8)))
        assert all(sorted(m["subject"] for m in p["messages"])
                   == ["invoice 0", "invoice 10", "invoice 20", "invoice 30"] for p in pages)
        with pytest.raises(steward.InvalidInputError) as e:
            await s.search_async(limit=0)
        assert e.value.code == "LIMIT_OUT_OF_RANGE"
        report = await s.poll_watches_async()
        assert report["checked"] == 0
        # The loop keeps running while a call is in flight.
        ticks = 0
        call = asyncio.ensure_future(s.search_async(text="quarterly", limit=50))
        while not call.done():
            ticks += 1
            await asyncio.sleep(0)
        assert len(call.result()["messages"]) == 40 and ticks > 0

    asyncio.run(main())
    # Outside a running loop there is nothing to await on.
    with pytest.raises(RuntimeError):
        s.search_async(text="invoice")
    # A forked child awaits as well as its parent (no runtime was left behind by the calls).
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            child = steward.Steward(home)

            async def search_in_child():
                return await child.search_async(text="invoice", limit=10)

            page = asyncio.run(search_in_child())
            code = 0 if len(page["messages"]) == 4 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
