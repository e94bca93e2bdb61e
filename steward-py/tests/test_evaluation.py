"""Replay and evaluation from Python: policy replay and retrieval scoring, both done by the core."""

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


def test_retrieval_evaluation_scores_labeled_queries(tmp_path):
    cur = tmp_path / "Maildir" / "cur"
    cur.mkdir(parents=True)
    (cur / "1:2,S").write_bytes(
        b"From: a@example.org\nSubject: Train tickets to Milan\nMessage-ID: <trip@x>\n\nPlatform 7.\n")
    (cur / "2:2,S").write_bytes(
        b"From: b@example.org\nSubject: Dinner on Friday\nMessage-ID: <dinner@x>\n\nAt eight.\n")
    s = steward.Steward(tmp_path / "home")
    s.index_maildir(tmp_path / "Maildir", account="py")
    result = s.eval_retrieval([
        {"kind": "exact", "request": {"text": "train milan"}, "expected": ["trip@x"]},
        {"kind": "miss", "request": {"text": "board minutes"}, "expected": ["<dinner@x>"], "k": 3},
    ])
    assert result["by_kind"]["exact"]["mrr"] == 1.0
    assert result["by_kind"]["miss"]["recall"] == 0.0
    assert result["overall"]["cases"] == 2
    assert [c["k"] for c in result["cases"]] == [10, 3]
    with pytest.raises(steward.InvalidInputError) as e:
        s.eval_retrieval([{"request": {"text": "x"}, "expected": []}])
    assert e.value.code == "EVAL_BAD_CASE"
