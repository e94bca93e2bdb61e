"""Chat with the agent from Python: a turn through the core's runner (tool calls run through the
policy, results go back to the model), its events by `for` and `async for`, an approval pause a
person resolves, cancellation, and typed errors that change nothing. The model's side is a
loopback server in the OpenAI wire format answering from a script."""

import asyncio
import json
import pathlib
import sys

import pytest

import steward

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "support"))
from chat_server import answer, config_toml, serve  # noqa: E402


def home_with_mail(tmp_path, url):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(config_toml(url))
    maildir = tmp_path / "Maildir"
    steward.demo_maildir(maildir, messages=40)
    s = steward.Steward(home)
    s.index_maildir(maildir)
    return s


def kinds(events):
    return [e["event"]["type"] for e in events]


def test_a_turn_runs_a_read_tool_and_answers(tmp_path):
    replies = [(200, answer("scripted", "", [("c1", "mail.search", '{"query": "invoice"}')])),
               (200, answer("scripted", "Two invoices arrived this month.", usage=(30, 7)))]
    with serve(replies) as (url, seen):
        s = home_with_mail(tmp_path, url)
        run = s.chat("Which invoices came in?")
        events = list(run)
        result = run.wait(timeout=30)
    assert kinds(events)[0] == "turn_started" and kinds(events)[-1] == "turn_ended"
    assert "tool_proposed" in kinds(events) and "tool_finished" in kinds(events)
    assert all(e["run_id"] == run.run_id for e in events)
    finished = next(e["event"] for e in events if e["event"]["type"] == "tool_finished")
    assert finished["status"] == "ran"
    assert result["end_reason"] == "completed" and result["text"] == "Two invoices arrived this month."
    assert result["usage"]["model_calls"] == 2 and result["usage"]["tool_calls"] == 1
    assert result["usage"]["input_tokens"] == 12 + 30
    # The model saw the tool's result, labelled as data, in its second request.
    assert len(seen) == 2
    # The call went back in the OpenAI wire format (type + function), as servers require.
    asked = next(m for m in seen[1]["body"]["messages"] if m.get("tool_calls"))["tool_calls"]
    assert [(c["type"], c["function"]["name"]) for c in asked] == [("function", "mail.search")]
    tool_msgs = [m for m in seen[1]["body"]["messages"] if m["role"] == "tool"]
    assert len(tool_msgs) == 1 and tool_msgs[0]["tool_call_id"] == "c1"
    # The chat keeps the exchange; the run is recorded.
    msgs = s.chat_messages(run.chat_id)
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "assistant"]
    assert [c["status"] for c in s.chat_tool_calls(run.chat_id)] == ["ran"]
    assert run.record()["status"] == "ended"
    assert run.result() == result


def test_events_by_async_for_and_turn_sync_in_the_same_chat(tmp_path):
    replies = [(200, answer("scripted", "Hello.")), (200, answer("scripted", "Again."))]
    with serve(replies) as (url, seen):
        s = home_with_mail(tmp_path, url)
        chat = s.create_chat()["id"]

        async def follow():
            run = s.chat("hi", chat=chat)
            return [e async for e in run]

        events = asyncio.run(follow())
        result = s.turn_sync("once more", chat=chat, timeout=60)
    assert kinds(events)[0] == "turn_started" and kinds(events)[-1] == "turn_ended"
    deltas = "".join(e["event"]["text"] for e in events if e["event"]["type"] == "text_delta")
    assert deltas == "Hello."
    assert result["text"] == "Again." and result["chat_id"] == chat
    # The second request carried the first exchange: one chat, one history.
    assert [m["content"] for m in seen[1]["body"]["messages"] if m["role"] == "user"] == \
        ["hi", "once more"]
    assert [c["id"] for c in s.chats()] == [chat]


def test_awaits_cancelled_by_timeouts_lose_no_event(tmp_path):
    # The model holds its answers back; meanwhile every `anext` is cut short by a timeout,
    # which cancels its future. The events still all arrive, once each, in order.
    replies = [(200, answer("scripted", "", [("c1", "mail.search", '{"query": "x"}')]), 0.6),
               (200, answer("scripted", "Done."), 0.6)]
    with serve(replies) as (url, _seen):
        s = home_with_mail(tmp_path, url)

        async def follow():
            run = s.chat("search")
            it = run.__aiter__()
            got, timeouts = [], 0
            while True:
                try:
                    got.append(await asyncio.wait_for(it.__anext__(), 0.05))
                except asyncio.TimeoutError:
                    timeouts += 1
                except StopAsyncIteration:
                    return run, got, timeouts

        run, got, timeouts = asyncio.run(follow())
        everything = list(s.run(run.run_id))
    assert timeouts > 0, "the test cut some awaits short"
    assert [e["seq"] for e in got] == [e["seq"] for e in everything]
    assert kinds(got)[0] == "turn_started" and kinds(got)[-1] == "turn_ended"


def test_an_approval_pause_is_resolved_by_a_person_and_nothing_runs_after_a_denial(tmp_path):
    watch = {"source": "time", "resource_ref": "2099-01-01T00:00:00Z",
             "instruction": "remind me", "rules": [{"id": "r", "event": "time.reached"}]}
    replies = [(200, answer("scripted", "", [("w1", "watches.propose", json.dumps(watch))])),
               (200, answer("scripted", "Understood, no reminder."))]
    with serve(replies) as (url, seen):
        s = home_with_mail(tmp_path, url)
        ada = s.human("ada")
        ada.set_tool_rule("watches.propose", "confirm")
        first = s.turn_sync("Remind me on new year 2099", timeout=60)
        assert first["end_reason"] == "awaiting_approval"
        assert len(first["approvals"]) == 1 and len(seen) == 1
        ada.deny(first["approvals"][0], note="not now")
        s.resolve_decided()
        resumed = s.chat_run(first["chat_id"])
        assert resumed is not None and resumed.run_id != first["run_id"]
        second = resumed.wait(timeout=60)
    assert second["end_reason"] == "completed" and second["approvals"] == []
    told = [m for m in seen[1]["body"]["messages"] if m["role"] == "tool"]
    assert len(told) == 1 and "declined" in told[0]["content"] and "not now" in told[0]["content"]
    assert s.watches() == [], "a denied proposal created nothing"
    assert [c["status"] for c in s.chat_tool_calls(first["chat_id"])] == ["declined"]


def test_bad_input_is_typed_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("STEWARD_LLM_BASE_URL", raising=False)
    plain = steward.Steward(tmp_path / "plain")
    with pytest.raises(steward.ConflictError) as e:
        plain.chat("hello")
    assert e.value.code == "AGENT_NO_MODEL"
    assert plain.chats() == [], "a message that cannot run leaves no empty chat"
    with serve([]) as (url, seen):
        s = home_with_mail(tmp_path, url)
        with pytest.raises(steward.InvalidInputError) as e:
            s.chat("   ")
        assert e.value.code == "AGENT_INVALID_INPUT"
        with pytest.raises(steward.NotFoundError) as e:
            s.chat("hello", chat="chat_missing")
        assert e.value.code == "CHAT_NOT_FOUND"
        with pytest.raises(steward.NotFoundError):
            s.run("run_missing")
        with pytest.raises(steward.InvalidInputError):
            s.turn_sync("hello", timeout=-1)
        assert s.cancel_run("run_missing") is False
        assert seen == [], "nothing reached the model"
    chat = s.create_chat()["id"]
    assert s.rename_chat(chat, "Plans")["title"] == "Plans"
    s.delete_chat(chat)
    with pytest.raises(steward.NotFoundError):
        s.get_chat(chat)


def test_a_cancelled_run_runs_no_tool_and_ends_cancelled(tmp_path):
    # The model's answer (a tool call) is held back while the run is cancelled.
    replies = [(200, answer("scripted", "", [("c1", "mail.search", '{"query": "x"}')]), 1.0),
               (200, answer("scripted", "never asked"))]
    with serve(replies) as (url, seen):
        s = home_with_mail(tmp_path, url)
        run = s.chat("search something")
        assert run.cancel() is True
        result = run.wait(timeout=60)
        assert run.cancel() is False, "an ended run cannot be cancelled again"
    assert result["end_reason"] == "cancelled"
    assert len(seen) <= 1, "no model call after the cancel"
    assert all(c["status"] != "ran" for c in s.chat_tool_calls(run.chat_id)), "no tool ran"
