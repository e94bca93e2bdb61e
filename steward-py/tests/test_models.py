"""Chat models from Python: one request through the core's client (routing by capability,
fallback, the usage ledger), against a loopback server in the OpenAI wire format; typed errors."""

import pathlib
import sys

import pytest

import steward

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "support"))
from chat_server import answer, serve  # noqa: E402

TOOLS = [{"name": "mail.search", "description": "Search the mail.",
          "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}]


def request(**extra):
    return {"capability": "tier-4",
            "messages": [{"role": "system", "content": "You are Steward."},
                         {"role": "user", "content": "Which platform does my train leave from?"}],
            "attribution": {"service": "notebook", "action": "replay.turn"}, **extra}


def test_a_request_falls_back_and_returns_the_tool_call_without_running_it(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    with serve([(503, {"error": {"message": "overloaded"}})]) as (down, down_seen), \
            serve([(200, answer("local-small", "", [("call_1", "mail.search",
                                                          '{"text": "platform"}')]))]) as (up, seen):
        (home / "config.toml").write_text(f"""
[llm]
tier_numbering = "design"
[llm.targets.first]
base_url = "{down}"
model = "big"
tools = true
[llm.targets.second]
base_url = "{up}"
model = "local-small"
tools = true
[llm.tiers]
tier-4 = ["first", "second"]
""")
        s = steward.Steward(home)
        out = s.complete(request(tools=TOOLS, max_tokens=64))
    assert out["tool_calls"] == [{"id": "call_1", "name": "mail.search",
                                  "arguments": '{"text": "platform"}'}]
    assert (out["target"], out["model"], out["attempts"]) == ("second", "local-small", 2)
    assert out["usage"]["input"] == 12 and out["usage"]["output"] == 5
    # What went on the wire: the conversation and the tools, in the OpenAI format, to each.
    assert len(down_seen) == 1 and len(seen) == 1
    body = seen[0]["body"]
    assert seen[0]["path"] == "/v1/chat/completions"
    assert body["model"] == "local-small" and body["max_tokens"] == 64
    assert body["messages"][1]["content"] == "Which platform does my train leave from?"
    assert body["tools"][0]["function"]["name"] == "mail.search"
    # One ledger row for the request, attributed; the failed attempt did not count twice.
    usage = s.usage("all")
    assert usage["total"]["requests"] == 1 and usage["total"]["attempts"] == 2
    assert [g["key"] for g in usage["by_action"]] == ["replay.turn"]


def test_bad_requests_and_missing_models_are_typed_and_send_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("STEWARD_LLM_BASE_URL", raising=False)
    s = steward.Steward(tmp_path / "plain")
    with pytest.raises(steward.UnavailableError) as e:
        s.complete(request())
    assert e.value.code == "LLM_NOT_CONFIGURED"

    with serve([(200, answer("m", "never sent"))]) as (url, seen):
        monkeypatch.setenv("STEWARD_LLM_BASE_URL", url)
        monkeypatch.setenv("STEWARD_LLM_MODEL", "m")
        s = steward.Steward(tmp_path / "home")
        for bad in (request(capability="gpt-9"), request(model="x"), {"messages": []},
                    request(messages=[])):
            with pytest.raises(steward.InvalidInputError) as e:
                s.complete(bad)
            assert e.value.code == "LLM_INVALID_REQUEST", bad
        assert seen == [], "nothing reached the model"
        assert s.complete(request())["content"] == "never sent"


def test_requests_run_concurrently_on_asyncio(tmp_path, monkeypatch):
    import asyncio

    replies = [(200, answer("m", f"answer {i}")) for i in range(4)]
    with serve(replies) as (url, seen):
        monkeypatch.setenv("STEWARD_LLM_BASE_URL", url)
        monkeypatch.setenv("STEWARD_LLM_MODEL", "m")
        s = steward.Steward(tmp_path / "home")

        async def main():
            return await asyncio.gather(*(s.complete_async(request()) for _ in range(4)))

        answers = asyncio.run(main())
        assert sorted(a["content"] for a in answers) == [f"answer {i}" for i in range(4)]
        assert len(seen) == 4

        async def bad():
            with pytest.raises(steward.InvalidInputError) as e:
                await s.complete_async(request(capability="gpt-9"))
            return e.value.code

        assert asyncio.run(bad()) == "LLM_INVALID_REQUEST"
        assert len(seen) == 4, "a bad request sends nothing"
    assert s.usage("all")["total"]["requests"] == 4
