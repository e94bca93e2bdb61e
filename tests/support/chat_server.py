"""A loopback server speaking the OpenAI chat-completions wire format, answering from a script,
for the Python tests of chat access (the Rust tests use steward_connectors::testing::models).
No chat-model server installs from the package registries (llama-cpp-python, which a local GGUF
model needs, has no wheels there), so the model's side is scripted here; everything on Steward's
side of the wire is real."""

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator


def answer(model: str, content: str, tool_calls: list[tuple[str, str, str]] = (),
           usage: tuple[int, int] = (12, 5)) -> dict[str, Any]:
    """A chat.completion body as OpenAI-compatible servers send it."""
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in tool_calls]
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                      "total_tokens": usage[0] + usage[1]}}


def config_toml(url: str) -> str:
    """A home's config.toml whose chat tier (tier-3) is the scripted server at `url`."""
    return f"""
[llm.targets.scripted]
base_url = "{url}"
model = "scripted"
tools = true
[llm.tiers]
tier-3 = ["scripted"]
"""


@contextlib.contextmanager
def serve(replies: list[tuple[Any, ...]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Serves `replies` (status, JSON body[, seconds to hold the answer back]) in order, then
    500s; yields the base URL and the list the received requests are appended to (`path`,
    `headers`, `body`)."""
    received: list[dict[str, Any]] = []
    script = list(replies)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the http.server name)
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"null")
            with lock:
                received.append({"path": self.path, "headers": dict(self.headers), "body": body})
                status, reply, *hold = script.pop(0) if script else (500, {"error": "script ended"})
            if hold:
                time.sleep(hold[0])
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", received
    finally:
        server.shutdown()
        server.server_close()
