"""Policy replay from Python: recorded calls decided by the core, nothing executed."""

import json

import pytest

import steward

RECORDS = [
    {"tool": "mail.search", "input": {"query": "invoice"}, "expected": "allow"},
    {"tool": "mail.send", "input": {"to": ["bob@example.org"], "subject": "s", "body": "b"},
     "expected": "gate:confirm"},
    {"tool": "mail.delete", "input": {"message_ids": [1]}, "expected": "allow"},
    {"tool": "shell.run", "input": {"cmd": "ls"}},
]


def test_replay_from_dicts_and_from_jsonl_agree(tmp_path):
    s = steward.Steward(tmp_path / "home")
    result = s.replay_policy(RECORDS)
    assert (result["total"], result["compared"], result["matched"]) == (4, 3, 2)
    assert result["differences"] == [2]
    assert [o["decision"] for o in result["outcomes"]] == ["allow", "gate", "gate", "gate"]
    assert result["outcomes"][3]["matches"] is None
    assert result["outcomes"][1]["detail"] == {"decision": "gate", "level": "confirm"}
    jsonl = "\n".join(json.dumps(r) for r in RECORDS)
    assert s.replay_policy(jsonl) == result


def test_bad_records_raise_typed_errors(tmp_path):
    s = steward.Steward(tmp_path / "home")
    with pytest.raises(steward.InvalidInputError) as e:
        s.replay_policy('{"tool": "mail.search", "input": {}}\n{oops')
    assert e.value.code == "REPLAY_BAD_RECORD"
    with pytest.raises(steward.InvalidInputError) as e:
        s.replay_policy([{"tool": "mail.send", "input": {}, "expected": "maybe"}])
    assert e.value.code == "REPLAY_BAD_RECORD"
    with pytest.raises(TypeError):
        s.replay_policy(42)
