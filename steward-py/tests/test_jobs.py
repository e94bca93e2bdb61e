"""The core's background runner from Python: one pass, the status, and a runner working in a
`with` block that stops when the block ends."""

import time

import pytest

import steward

AVAILABLE = [
    "watch-poll",
    "watch-deliver",
    "confirm-writes",
    "approval-expiry",
    "memory-reconcile",
]


def status(s):
    return {j["name"]: j for j in s.jobs_status()}


def test_one_pass_runs_what_can_run_and_says_why_the_rest_cannot(tmp_path):
    s = steward.Steward(tmp_path / "home")
    runs = s.run_jobs()
    assert [r["job"] for r in runs] == AVAILABLE
    assert all(r["outcome"] == "ok" and r["error"] is None for r in runs), runs
    st = status(s)
    assert set(st) == set(AVAILABLE) | {
        "mail-reconcile",
        "mail-embed",
        "send-due",
        "pim-sync",
        "files-index",
        "memory-promote",
    }
    assert "calendar.sources" in st["pim-sync"]["unavailable"]
    assert "files] roots" in st["files-index"]["unavailable"]
    assert "chat model" in st["memory-promote"]["unavailable"]
    assert "SMTP" in st["send-due"]["unavailable"]
    assert "mail.sources" in st["mail-reconcile"]["unavailable"]
    assert all(st[j]["runs"] == 1 and st[j]["last_outcome"] == "ok" for j in AVAILABLE)
    with pytest.raises(steward.UnavailableError) as e:
        s.run_jobs("send-due")
    assert e.value.code == "JOBS_UNAVAILABLE"
    with pytest.raises(steward.InvalidInputError) as e:
        s.run_jobs("send-soon")
    assert e.value.code == "JOBS_UNKNOWN_JOB"
    assert status(s)["send-due"]["runs"] == 0


def test_a_runner_in_a_with_block_runs_each_job_at_start_and_stops_at_the_end(tmp_path):
    s = steward.Steward(tmp_path / "home")
    with s.run_background() as bg:
        assert bg.running
        for _ in range(500):
            st = status(s)
            if all(st[j]["runs"] >= 1 and not st[j]["running"] for j in AVAILABLE):
                break
            time.sleep(0.02)
        with pytest.raises(steward.InvalidInputError):
            bg.wake("send-soon")
    assert not bg.running
    st = status(s)
    # Every available job ran exactly once (their intervals are 30 s and more); none is left
    # running; the jobs that cannot run here never ran.
    assert [st[j]["runs"] for j in AVAILABLE] == [1] * len(AVAILABLE), st
    assert not any(j["running"] for j in st.values())
    assert st["send-due"]["runs"] == 0
    bg.stop()  # a second stop does nothing
