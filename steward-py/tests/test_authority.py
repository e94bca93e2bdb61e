"""Approvals, the write journal and the audit trail read from Python; the error hierarchy."""

import pathlib
import subprocess

import pytest

import steward

STEWARD = pathlib.Path(__file__).resolve().parents[2] / "target" / "debug" / "steward"


def test_error_classes_form_one_hierarchy():
    for cls in (steward.InvalidInputError, steward.NotFoundError, steward.DeniedError,
                steward.ConflictError, steward.UnavailableError, steward.CorruptError):
        assert issubclass(cls, steward.StewardError)


def test_reads_of_approvals_journal_and_audit(tmp_path):
    home = tmp_path / "home"
    s = steward.Steward(home)
    assert s.approvals() == []
    assert s.write_operations() == []
    with pytest.raises(steward.NotFoundError) as e:
        s.approval(999)
    assert e.value.code == "APPROVAL_NOT_FOUND"
    with pytest.raises(steward.NotFoundError) as e:
        s.write_operation(1)
    assert e.value.code == "JOURNAL_NOT_FOUND"
    with pytest.raises(steward.InvalidInputError) as e:
        s.write_operations(state="sent")
    assert e.value.code == "JOURNAL_INVALID"
    with pytest.raises(steward.InvalidInputError) as e:
        s.write_operations(limit=1000)
    assert e.value.code == "JOURNAL_INVALID"
    with pytest.raises(steward.InvalidInputError) as e:
        s.audit({"risk": "extreme"})
    assert e.value.code == "AUDIT_BAD_RISK"
    with pytest.raises(steward.InvalidInputError) as e:
        s.audit({"colour": "red"})
    assert e.value.code == "AUDIT_BAD_QUERY"

    # A person changes the policy with the command; Python sees the audited change.
    assert STEWARD.exists(), f"{STEWARD} is built by cargo test before pytest runs"
    subprocess.run([STEWARD, "--home", home, "policy", "set", "mail.send", "secure", "--as", "ada"],
                   check=True, capture_output=True)
    rows = s.audit({"event_type": "policy.changed"})
    assert len(rows) == 1 and rows[0]["actor"] == "ada" and rows[0]["risk"] == "high"
    replay = s.replay.policy([{"tool": "mail.send", "input": {"to": ["b@x.org"], "subject": "s",
                                                              "body": "b"}}])
    assert replay.policy_version == 1 and replay.outcomes[0].level == "secure"
