"""An MCP client built with the official Python SDK (`mcp` on PyPI) driving Steward's MCP face.

Usage: mcp_client.py stdio|http
Environment: STEWARD_BIN, STEWARD_HOME_DIR (and, for http, MCP_URL and MCP_TOKEN).

Runs one scenario and prints one JSON object of what it saw; the Rust test asserts on it (and
on what the SMTP sink received). A person's decisions are made with the `steward` command, as
a person would, between the client's calls.
"""

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError
from mcp.types import Implementation

STEWARD = os.environ["STEWARD_BIN"]
HOME = os.environ["STEWARD_HOME_DIR"]


def person(verb: str, approval_id: int) -> None:
    """A person decides in Steward (never the client)."""
    subprocess.run(
        [STEWARD, "--home", HOME, "approvals", verb, str(approval_id), "--as", "Ada"],
        check=True,
        capture_output=True,
    )


async def protocol_error(session: ClientSession, name: str, args: dict[str, Any]) -> Any:
    try:
        result = await session.call_tool(name, args)
    except McpError as e:
        return {"code": e.error.code, "message": e.error.message}
    return {"no_error": result.model_dump(mode="json")}


async def scenario(session: ClientSession) -> dict[str, Any]:
    out: dict[str, Any] = {}
    init = await session.initialize()
    out["server"] = init.serverInfo.name
    listed = await session.list_tools()
    out["tools"] = {
        t.name: (t.annotations.model_dump(mode="json") if t.annotations else None)
        for t in listed.tools
    }
    found = await session.call_tool("mail.search", {"query": "", "limit": 2})
    out["search"] = {
        "is_error": found.isError,
        "structured": found.structuredContent,
        "text": found.content[0].text if found.content else "",
    }
    mail = {"to": ["bob@example.org"], "subject": "From an MCP client", "body": "Hello Bob."}
    first = await session.call_tool("mail.send", mail)
    out["first"] = first.structuredContent
    waiting = await session.call_tool("mail.send", mail)
    out["waiting"] = waiting.structuredContent
    person("approve", first.structuredContent["approval_id"])
    second = await session.call_tool("mail.send", mail)
    out["second"] = {"is_error": second.isError, "structured": second.structuredContent}
    third = await session.call_tool("mail.send", mail)
    out["third"] = {"is_error": third.isError, "structured": third.structuredContent}
    other = {"to": ["eve@example.org"], "subject": "Not this", "body": "No."}
    asked = await session.call_tool("mail.send", other)
    person("deny", asked.structuredContent["approval_id"])
    denied = await session.call_tool("mail.send", other)
    out["denied"] = {
        "is_error": denied.isError,
        "text": denied.content[0].text if denied.content else "",
    }
    # A client that follows progress may wait for the person: told the request at once, it
    # gets the result when they approve (here, as soon as it is told).
    progress: list[str] = []
    decided = asyncio.Event()

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")
        if not decided.is_set() and message and "#" in message:
            decided.set()
            approval_id = int(message.split("#", 1)[1].split(" ", 1)[0])
            await asyncio.to_thread(person, "approve", approval_id)

    wait_mail = {"to": ["carol@example.org"], "subject": "Waited for", "body": "Hello Carol."}
    waited = await session.call_tool("mail.send", wait_mail, progress_callback=on_progress)
    out["waited"] = {
        "is_error": waited.isError,
        "structured": waited.structuredContent,
        "progress": progress,
    }
    resources = await session.list_resources()
    out["resources"] = [{"uri": str(r.uri), "name": r.name} for r in resources.resources]
    templates = await session.list_resource_templates()
    out["templates"] = [t.uriTemplate for t in templates.resourceTemplates]
    read = await session.read_resource(resources.resources[0].uri)
    out["read"] = read.contents[0].text
    try:
        await session.read_resource("steward://mail/message/not-a-number")
        out["bad_resource"] = "no error"
    except McpError as e:
        out["bad_resource"] = {"code": e.error.code, "message": e.error.message}
    out["unknown_tool"] = await protocol_error(session, "mail.nope", {})
    out["bad_input"] = await protocol_error(session, "mail.search", {"bogus": 1})
    out["oversized"] = await protocol_error(
        session, "mail.search", {"query": "x" * 300_000, "limit": 1}
    )
    return out


async def main(mode: str) -> None:
    client = Implementation(name="pytest-mcp", version="1.0")
    if mode == "stdio":
        params = StdioServerParameters(
            command=STEWARD, args=["--home", HOME, "mcp"], env=dict(os.environ)
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, client_info=client) as session:
                out = await scenario(session)
    else:
        headers = {"Authorization": f"Bearer {os.environ['MCP_TOKEN']}"}
        async with streamablehttp_client(os.environ["MCP_URL"], headers=headers) as (
            read,
            write,
            _,
        ):
            async with ClientSession(read, write, client_info=client) as session:
                out = await scenario(session)
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
