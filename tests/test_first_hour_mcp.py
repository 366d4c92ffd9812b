"""The MCP server's first-hour edges: the protocol's own errors, and refusals in MCP words.

- A call to a tool the server does not have is the protocol's invalid-params error (-32602),
  as the specification asks, not a tool result flagged isError.
- A JSON-RPC batch (an array) is an invalid request (-32600), not a dump of the SDK's
  validation errors.
- A 2026-07-28 request without its ``MCP-Protocol-Version`` header is told that header is
  missing (-32020, the 2026-07-28 header error), not "Missing session ID".
- Refusals name what an MCP client sees: the prompt's ``user`` argument (not the tools'
  ``user_id``), "this token" when a token binds the user, the ``add_note`` tool (not the
  Python method).
- The handshake versions the server accepts (four) and the stateless one.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import types
from mcp.shared.exceptions import MCPError
from mcp_clients import MODERN, MODES, OLD, in_process, over_http

from memkeeper import MemoryStore, logs
from memkeeper.config import Config
from memkeeper.config.mcp import McpSection
from memkeeper.mcp.auth import Principal
from memkeeper.mcp.http import HttpServer, plan
from memkeeper.mcp.server import build_server, fixed_principal

ALICE = "alice-Zq3v9TnQ2rWx8LmP4kYs"
ADMIN = "admin-Lf6Gq1Wz8Ks4Jt2Yx7Pv"
ACCEPT = {"Accept": "application/json, text/event-stream", "content-type": "application/json"}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, MemoryStore, io.StringIO]]:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(
        f'[[tokens]]\ntoken = "{ALICE}"\nuser = "alice"\n\n'
        f'[[tokens]]\ntoken = "{ADMIN}"\nadmin = true\n',
        encoding="utf-8",
    )
    tokens.chmod(0o600)
    log = io.StringIO()
    logs.configure(level="info", fmt="json", stream=log)
    config = Config(mcp=McpSection(token_file=str(tokens)))
    store = MemoryStore(tmp_path / "memory.db", config=config, actor="mcp")
    server = HttpServer(store, plan("127.0.0.1:0", config))
    server.start()
    try:
        yield server.url, store, log
    finally:
        server.stop()
        store.close()
        logs.configure(level="warning", fmt="console")


def _post(url: str, body: Any, **headers: str) -> httpx.Response:
    sent = {**ACCEPT, "Authorization": f"Bearer {ALICE}", **headers}
    return httpx.post(url, content=json.dumps(body).encode(), headers=sent)


# -- an unknown tool ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_an_unknown_tool_is_the_protocols_invalid_params_error(tmp_path: Path, mode: str) -> None:
    store = MemoryStore(tmp_path / "memory.db", actor="mcp")
    server = build_server(store, fixed_principal(Principal("alice")))

    async def go() -> None:
        async with in_process(server, "agent", mode) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("erase_everything", {})
            assert caught.value.error.code == types.INVALID_PARAMS == -32602
            assert "no tool named 'erase_everything'" in caught.value.error.message
            found = await client.call_tool("recall", {"key": "city"})  # the server goes on
            assert found.structured_content == {"found": False, "memory": None}

    try:
        anyio.run(go)
    finally:
        store.close()


def test_an_unknown_tool_over_http_is_a_json_rpc_error(
    served: tuple[str, MemoryStore, io.StringIO],
) -> None:
    url, _store, _log = served
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "nope", "arguments": {}, "_meta": ENVELOPE},
    }
    response = _post(
        url,
        body,
        **{"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "nope"},
    )
    answer = response.json()
    assert "result" not in answer
    assert answer["id"] == 7 and answer["error"]["code"] == -32602
    assert "no tool named 'nope'" in answer["error"]["message"]

    async def sdk() -> None:
        async with over_http(url, ALICE, "agent", OLD) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("nope", {})
            assert caught.value.error.code == -32602

    anyio.run(sdk)


# -- a batch ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}, {}],
    ids=["2026-07-28", "no-version-header"],
)
def test_a_batch_is_an_invalid_request(
    served: tuple[str, MemoryStore, io.StringIO], headers: dict[str, str]
) -> None:
    url, _store, log = served
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": ENVELOPE}}
    response = _post(url, [listing, {**listing, "id": 2}], **headers)
    assert response.status_code == 400
    answer = response.json()
    assert answer["id"] is None and answer["error"]["code"] == -32600
    assert "batch" in answer["error"]["message"]
    assert "validation error" not in response.text.lower()
    assert "Traceback" not in log.getvalue()


# -- a 2026-07-28 request without its header ----------------------------------------------------


@pytest.mark.parametrize("method", ["tools/list", "server/discover", "tools/call"])
def test_a_2026_request_without_its_version_header_is_told_so(
    served: tuple[str, MemoryStore, io.StringIO], method: str
) -> None:
    url, store, _log = served
    params: dict[str, Any] = {"_meta": ENVELOPE}
    if method == "tools/call":
        params.update(name="remember", arguments={"key": "city", "value": "Oslo"})
    response = _post(url, {"jsonrpc": "2.0", "id": "r1", "method": method, "params": params})
    assert response.status_code == 400
    answer = response.json()
    assert answer["id"] == "r1" and answer["error"]["code"] == -32020
    message = answer["error"]["message"]
    assert "missing MCP-Protocol-Version header" in message and "2026-07-28" in message
    assert "session ID" not in message
    assert store.list_memories() == []
    # With the header, the same request is served.
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call":
        headers["Mcp-Name"] = "remember"
    assert (
        "result"
        in _post(
            url, {"jsonrpc": "2.0", "id": 2, "method": method, "params": params}, **headers
        ).json()
    )


def _initialize(version: str) -> dict[str, object]:
    """A raw ``initialize`` request asking for protocol ``version``."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }


def test_the_handshake_still_needs_no_header(
    served: tuple[str, MemoryStore, io.StringIO],
) -> None:
    url, _store, _log = served
    response = _post(url, _initialize(OLD))
    assert response.status_code == 200 and response.headers.get("mcp-session-id")


# -- the protocol versions accepted ---------------------------------------------------------------

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_every_handshake_version_is_accepted_as_asked(
    served: tuple[str, MemoryStore, io.StringIO], version: str
) -> None:
    url, _store, _log = served
    response = _post(url, _initialize(version))
    text = response.text
    payload = text[text.index("{") :] if not text.startswith("{") else text
    answer = json.loads(payload.splitlines()[0])
    assert answer["result"]["protocolVersion"] == version


def test_the_stateless_version_is_discovered(
    served: tuple[str, MemoryStore, io.StringIO],
) -> None:
    url, _store, _log = served
    response = _post(
        url,
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": ENVELOPE}},
        **{"MCP-Protocol-Version": MODERN, "Mcp-Method": "server/discover"},
    )
    assert MODERN in json.dumps(response.json()["result"])


# -- refusals in MCP words ------------------------------------------------------------------------


def _prompt(url: str, token: str, arguments: dict[str, str]) -> MCPError:
    async def go() -> MCPError:
        async with over_http(url, token, "agent", MODERN) as client:
            with pytest.raises(MCPError) as caught:
                await client.get_prompt("memory_context", arguments)
            return caught.value

    return anyio.run(go)


def test_the_prompt_refusal_names_its_user_argument_and_the_token(
    served: tuple[str, MemoryStore, io.StringIO],
) -> None:
    url, _store, _log = served
    refused = _prompt(url, ALICE, {"user": "bob"})
    assert refused.error.code == -32602
    assert refused.error.message == (
        "this token acts for user 'alice' only: it cannot act for another user (leave user out)"
    )
    refused = _prompt(url, ADMIN, {})
    assert refused.error.message == "an admin token acts for the user named in user: give user"


def test_a_tool_refusal_names_the_token_over_http_and_the_server_otherwise(
    served: tuple[str, MemoryStore, io.StringIO], tmp_path: Path
) -> None:
    url, _store, _log = served

    async def over_token() -> str:
        async with over_http(url, ALICE, "agent", MODERN) as client:
            result = await client.call_tool("recall", {"key": "city", "user_id": "bob"})
            assert result.is_error
            return result.content[0].text  # type: ignore[union-attr]

    assert anyio.run(over_token) == (
        "this token acts for user 'alice' only: it cannot act for another user (leave user_id out)"
    )
    store = MemoryStore(tmp_path / "stdio.db", actor="mcp")
    server = build_server(store, fixed_principal(Principal("alice")))  # stdio's --user

    async def over_stdio_like() -> str:
        async with in_process(server, "agent", MODERN) as client:
            result = await client.call_tool("recall", {"key": "city", "user_id": "bob"})
            return result.content[0].text  # type: ignore[union-attr]

    try:
        assert anyio.run(over_stdio_like).startswith("this server acts for user 'alice' only")
    finally:
        store.close()


def test_remember_of_a_note_names_the_add_note_tool(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "memory.db", actor="mcp")
    server = build_server(store, fixed_principal(Principal("alice")))

    async def go() -> str:
        async with in_process(server, "agent", MODERN) as client:
            result = await client.call_tool(
                "remember", {"key": "k", "value": "call Bob", "kind": "note"}
            )
            assert result.is_error
            return result.content[0].text  # type: ignore[union-attr]

    try:
        text = anyio.run(go)
    finally:
        store.close()
    assert "use the add_note tool" in text and "add_note()" not in text


def test_over_stdio_a_batch_or_a_broken_line_is_answered_and_the_server_goes_on(
    tmp_path: Path,
) -> None:
    """The SDK's stdio transport dropped such a line without a word: the client waited for
    ever. Each now gets the protocol's error (id null), and the next request is served."""
    import os
    import subprocess
    import sys
    import threading

    listing = {"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"_meta": ENVELOPE}}
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMKEEPER_")}
    env["HOME"] = str(tmp_path)
    server = subprocess.Popen(
        [sys.executable, "-m", "memkeeper", "--db", str(tmp_path / "m.db"), "mcp", "--user", "ann"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert server.stdin is not None and server.stdout is not None
    answers = []
    watchdog = threading.Timer(60, server.kill)  # an unanswered line fails, never hangs
    watchdog.start()
    try:
        # Each line waits for its answer: the end of input ends the session.
        for line in (json.dumps([listing]), "{not json", json.dumps(listing)):
            server.stdin.write(line + "\n")
            server.stdin.flush()
            answers.append(json.loads(server.stdout.readline()))
        server.stdin.close()
        assert server.wait(timeout=60) == 0
    finally:
        watchdog.cancel()
        server.kill()
        server.wait(timeout=10)
    assert [a.get("error", {}).get("code") for a in answers[:2]] == [-32600, -32700]
    assert "batch" in answers[0]["error"]["message"] and answers[0]["id"] is None
    assert answers[2]["id"] == 9 and "tools" in answers[2]["result"]
