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


def test_a_person_reads_and_changes_the_policy_and_replay_follows(tmp_path):
    s = steward.Steward(tmp_path / "home")
    before = s.policy()
    assert before["current"]["version"] == 0 and before["history"] == []
    assert {"mail.send", "mail.search"} <= {t["name"] for t in before["tools"]}
    send = [{"tool": "mail.send", "input": {"to": ["b@x.org"], "subject": "s", "body": "b"}}]
    assert s.replay.policy(send).outcomes[0].level == "confirm"

    ada = s.human("ada")
    v1 = ada.set_tool_rule("mail.send", "secure", expect_version=0)
    assert (v1["version"], v1["changed_by"]) == (1, "ada")
    assert s.replay.policy(send).outcomes[0].level == "secure"
    v2 = ada.set_policy({"change": "deny_namespace", "prefix": "shell"})
    assert v2["version"] == 2
    shell = s.replay.policy([{"tool": "shell.run", "input": {"cmd": "ls"}}]).outcomes[0]
    assert shell.decision == "deny"

    # A stale version, a malformed change and an unknown level change nothing.
    with pytest.raises(steward.ConflictError) as e:
        ada.set_tool_rule("mail.send", "confirm", expect_version=1)
    assert e.value.code == "POLICY_VERSION_CONFLICT"
    with pytest.raises(steward.InvalidInputError) as e:
        ada.set_policy({"change": "grant_everything"})
    assert e.value.code == "PY_INVALID_ARGUMENT"
    with pytest.raises(steward.InvalidInputError):
        ada.set_tool_rule("mail.send", "whenever")
    after = s.policy(history=5)
    assert after["current"]["version"] == 2
    assert [v["version"] for v in after["history"]] == [1], "the built-in version 0 is not stored"
    with pytest.raises(steward.InvalidInputError):
        s.policy(history=10_000)
    # Each change is audited under the person's name.
    rows = s.audit({"event_type": "policy.changed"})
    assert [r["actor"] for r in rows] == ["ada", "ada"]
