"""Memory from Python: an import lands in the inbox (recall never reads it), a person accepts,
edits or rejects; a rejected fact is not proposed again; forget hands back a receipt."""

import pytest

import steward


def test_review_search_and_forget(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "MEMORY.md").write_text(
        "- Ada keeps her spare keys with Bruno.\n- Ada's piano lesson is on Thursdays.\n"
    )
    s = steward.Steward(tmp_path / "home")
    ada = s.human("ada")
    report = ada.import_memory(vault)
    assert report["added"] == 2
    inbox = s.memory_inbox()
    assert [p["note"]["meta"]["proposed_by"] for p in inbox] == ["import", "import"]
    assert s.memory_search("spare keys") == []
    assert s.memory_counts() == {"proposals": 2, "notes": 0, "promotion": {}}
    keys = next(p for p in inbox if "keys" in p["note"]["body"])["note"]["meta"]["id"]
    piano = next(p for p in inbox if "piano" in p["note"]["body"])["note"]["meta"]["id"]

    note = ada.accept_memory(keys, edit={"text": "Ada's spare keys are with Bruno.", "kind": "place"})
    assert note["meta"]["review"]["decision"] == "edited"
    hits = s.memory_search("spare keys", kinds=["place"])
    assert [h["note"]["meta"]["id"] for h in hits] == [keys]
    assert s.memory_search("spare keys", kinds=["person"]) == []
    with pytest.raises(steward.InvalidInputError):
        s.memory_search("spare keys", kinds=["rumour"])

    with pytest.raises(steward.InvalidInputError):
        ada.reject_memory(piano, reason="lessons ended")
    assert ada.reject_memory(piano, reason="outdated")["reason"] == "rejected: outdated"
    (vault / "MEMORY.md").write_text("- Ada's piano lesson is on Thursdays!\n")
    again = ada.import_memory(vault)
    assert (again["added"], again["suppressed"]) == (0, 1)
    assert s.memory_inbox() == []

    with pytest.raises(steward.InvalidInputError):
        ada.forget_memory()
    receipt = ada.forget_memory(id=keys)
    assert [n["id"] for n in receipt["notes"]] == [keys]
    with pytest.raises(steward.NotFoundError) as e:
        s.memory_note(keys)
    assert e.value.code == "MEMORY_NOT_FOUND"
    with pytest.raises(steward.InvalidInputError):
        s.human("agent:steward")
