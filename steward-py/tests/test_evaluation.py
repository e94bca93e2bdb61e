"""Replay and evaluation from Python: policy replay and retrieval scoring, both done by the core."""

import json
import pickle

import pytest

import steward

RECORDS = [
    {"tool": "mail.search", "input": {"query": "invoice"}, "expected": "allow"},
    {"tool": "mail.send", "input": {"to": ["bob@example.org"], "subject": "s", "body": "b"},
     "expected": "gate:confirm"},
    {"tool": "mail.delete", "input": {"message_ids": [1]}, "expected": "allow"},
    {"tool": "printer.print", "input": {"file": "a.pdf"}},
]


def test_replay_from_dicts_and_from_jsonl_agree(tmp_path):
    s = steward.Steward(tmp_path / "home")
    result = s.replay.policy(RECORDS)
    assert isinstance(result, steward.PolicyReplay)
    assert (result.total, result.compared, result.matched) == (4, 3, 2)
    assert result.differences == [2]
    assert [o.decision for o in result.outcomes] == ["allow", "gate", "gate", "gate"]
    assert all(isinstance(o, steward.ReplayOutcome) for o in result.outcomes)
    assert result.outcomes[3].matches is None
    assert result.outcomes[2].matches is False and result.outcomes[2].expected == "allow"
    assert result.outcomes[1].detail == {"decision": "gate", "level": "confirm"}
    assert result.outcomes[1].level == "confirm"
    jsonl = "\n".join(json.dumps(r) for r in RECORDS)
    assert s.replay.policy(jsonl) == result
    assert s.replay.policy(RECORDS[:1]) != result


def test_replay_results_are_plain_objects_for_a_notebook(tmp_path):
    s = steward.Steward(tmp_path / "home")
    result = s.replay.policy(RECORDS)
    # to_dict is JSON-ready, nested all the way down, and a row per outcome for a DataFrame.
    d = result.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["outcomes"][1] == result.outcomes[1].to_dict()
    assert set(d["outcomes"][0]) == {
        "index", "tool", "decision", "level", "detail", "expected", "matches"}
    rows = [o.to_dict() for o in result.outcomes]
    assert [r["index"] for r in rows] == [0, 1, 2, 3]
    # Pickled and restored whole (a notebook caches results between runs).
    again = pickle.loads(pickle.dumps(result))
    assert again == result and again.to_dict() == d
    assert pickle.loads(pickle.dumps(result.outcomes[2])) == result.outcomes[2]
    assert "differences=[2]" in repr(result)
    assert repr(result.outcomes[0]).startswith("ReplayOutcome(index=0, tool='mail.search'")
    # Read-only: a result is a record of what happened.
    with pytest.raises(AttributeError):
        result.total = 5  # type: ignore[misc]


def test_bad_records_raise_typed_errors(tmp_path):
    s = steward.Steward(tmp_path / "home")
    with pytest.raises(steward.InvalidInputError) as e:
        s.replay.policy('{"tool": "mail.search", "input": {}}\n{oops')
    assert e.value.code == "REPLAY_BAD_RECORD"
    with pytest.raises(steward.InvalidInputError) as e:
        s.replay.policy([{"tool": "mail.send", "input": {}, "expected": "maybe"}])
    assert e.value.code == "REPLAY_BAD_RECORD"
    with pytest.raises(TypeError):
        s.replay.policy(42)


def test_retrieval_evaluation_scores_labeled_queries(tmp_path):
    cur = tmp_path / "Maildir" / "cur"
    cur.mkdir(parents=True)
    (cur / "1:2,S").write_bytes(
        b"From: a@example.org\nSubject: Train tickets to Milan\nMessage-ID: <trip@x>\n\nPlatform 7.\n")
    (cur / "2:2,S").write_bytes(
        b"From: b@example.org\nSubject: Dinner on Friday\nMessage-ID: <dinner@x>\n\nAt eight.\n")
    s = steward.Steward(tmp_path / "home")
    s.index_maildir(tmp_path / "Maildir", account="py")
    result = s.eval.retrieval([
        {"kind": "exact", "request": {"text": "train milan"}, "expected": ["trip@x"]},
        {"kind": "miss", "request": {"text": "board minutes"}, "expected": ["<dinner@x>"], "k": 3},
    ])
    assert isinstance(result, steward.RetrievalEval)
    assert result.by_kind["exact"].mrr == 1.0
    assert result.by_kind["exact"].recall == 1.0
    assert result.by_kind["miss"].recall == 0.0
    assert result.overall.cases == 2 and result.overall.mrr == 0.5
    assert [c.k for c in result.cases] == [10, 3]
    assert result.cases[0].hit_ranks == [1] and result.cases[1].hit_ranks == []
    d = result.to_dict()
    assert d["by_kind"]["miss"] == result.by_kind["miss"].to_dict()
    assert [c.to_dict() for c in result.cases] == d["cases"]
    assert json.loads(json.dumps(d)) == d
    assert pickle.loads(pickle.dumps(result)) == result
    assert pickle.loads(pickle.dumps(result.overall)) == result.overall
    assert "cases=2" in repr(result)
    with pytest.raises(steward.InvalidInputError) as e:
        s.eval.retrieval([{"request": {"text": "x"}, "expected": []}])
    assert e.value.code == "EVAL_BAD_CASE"
    # The short name of the class is the same class.
    assert isinstance(e.value, steward.InvalidInput)
