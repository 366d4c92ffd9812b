"""Issue 19 item 5: the fast path for stateless ``tools/call`` (memkeeper.mcp.fast_call)
answers exactly as the SDK does, and only the requests it may answer.

Two real HTTP servers, one with the fast path and one without (every request through the
SDK), over two copies of one database with a fixed clock, are sent the same requests in the
same order: every tool, refused calls (bad arguments, another user's user_id, an unknown
tool), and envelopes the SDK rejects or reads differently (no client info, bad client info,
no capabilities, a mismatched Mcp-Name or Mcp-Method, a boolean id, an extra key, a wrong
Accept or Content-Type, a foreign Host, a notification). Status, content type and the
parsed body must agree (new memories' random ids aside), and the fast server must have
answered exactly the requests marked fast.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from memkeeper import MemoryStore
from memkeeper.clock import fixed
from memkeeper.config import Config
from memkeeper.mcp.http import HttpServer, plan

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "fast-agent", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
HEX_ID = re.compile(r"^[0-9a-f]{16}$")


def _seed(path: Path) -> str:
    with MemoryStore(path, config=Config(), clock=fixed(NOW)) as store:
        store.remember("al", "city", "Turin", namespace="")
        store.add_note("al", "Ordered the new laptop for the garden office")
        store.append_message("al", "s1", "user", "hello there")
        return store.remember("al", "tea", "green").id


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[HttpServer, HttpServer, str]]:
    first = tmp_path / "sdk.db"
    kept = _seed(first)
    second = tmp_path / "fast.db"
    shutil.copy(first, second)
    servers, stores = [], []
    for path, fast in ((first, False), (second, True)):
        store = MemoryStore(path, config=Config(), clock=fixed(NOW), actor="mcp")
        how = dataclasses.replace(
            plan("127.0.0.1:0", Config(), no_auth=True, user="al"), fast_calls=fast
        )
        server = HttpServer(store, how)
        server.start()
        servers.append(server)
        stores.append(store)
    try:
        yield servers[0], servers[1], kept
    finally:
        for server, store in zip(servers, stores, strict=True):
            server.stop()
            store.close()


def _body(name: Any, arguments: Any = None, meta: Any = META, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "_meta": meta}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params, **extra}


def _headers(name: str, **changes: str | None) -> dict[str, str]:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    for key, value in changes.items():
        header = key.replace("_", "-")
        if value is None:
            headers.pop(header, None)
        else:
            headers[header] = value
    return headers


def _requests(kept: str) -> list[tuple[str, bool, Any, dict[str, str]]]:
    """(what, answered by the fast path, body, headers)."""
    calls = [
        ("remember", {"key": "city", "value": "Milan", "source": "stated"}),
        ("remember", {"key": "city", "value": "Milan"}),
        ("recall", {"key": "city"}),
        ("recall", {"key": "nothing here"}),
        ("search", {"query": "laptop garden"}),
        ("search", {"query": "tea", "limit": 2, "kinds": ["fact"]}),
        ("add_note", {"text": "Decided on the blue paint \u00e9t\u00e9"}),
        ("context", {"query": "laptop"}),
        ("append_message", {"session_id": "s1", "role": "assistant", "content": "hi"}),
        ("record_episode", {"task_name": "setup", "status": "done"}),
        ("explain", {"memory_id": kept}),
        ("list_memories", {}),
        ("episodes", {}),
        ("history", {"session_id": "s1"}),
        ("forget", {"key": "tea"}),
        ("recall", {"key": 3}),
        ("recall", {"key": "city", "colour": "red"}),
        ("remember", {"key": "city"}),
        ("recall", {"key": "city", "user_id": "bob"}),
        ("explain", {"memory_id": "0000000000000000"}),
    ]
    requests = [(f"{name} {args}", True, _body(name, args), _headers(name)) for name, args in calls]
    no_info = {k: v for k, v in META.items() if not k.endswith("clientInfo")}
    no_caps = {k: v for k, v in META.items() if not k.endswith("clientCapabilities")}
    bad_info = {**META, "io.modelcontextprotocol/clientInfo": {"name": 3}}
    recall = {"key": "city"}
    requests += [
        ("no arguments", True, _body("list_memories"), _headers("list_memories")),
        ("string id", True, {**_body("recall", recall), "id": "x-1"}, _headers("recall")),
        ("no client info", True, _body("recall", recall, no_info), _headers("recall")),
        ("bad client info", False, _body("recall", recall, bad_info), _headers("recall")),
        ("no capabilities", False, _body("recall", recall, no_caps), _headers("recall")),
        ("unknown tool", False, _body("nope", {}), _headers("nope")),
        ("arguments a list", False, _body("recall", [1]), _headers("recall")),
        ("Mcp-Name differs", False, _body("recall", recall), _headers("search")),
        ("no Mcp-Name", False, _body("recall", recall), _headers("recall", Mcp_Name=None)),
        ("Mcp-Method differs", False, _body("recall", recall), _headers("recall", Mcp_Method="x")),
        ("boolean id", False, {**_body("recall", recall), "id": True}, _headers("recall")),
        ("extra key", False, _body("recall", recall, extra=1), _headers("recall")),
        (
            "accept SSE only",
            False,
            _body("recall", recall),
            _headers("recall", Accept="text/event-stream"),
        ),
        (
            "text body",
            False,
            _body("recall", recall),
            _headers("recall", Content_Type="text/plain"),
        ),
        (
            "foreign host",
            False,
            _body("recall", recall),
            _headers("recall", Host="evil.example:80"),
        ),
        (
            "foreign origin",
            False,
            _body("recall", recall),
            _headers("recall", Origin="http://evil.example"),
        ),
        (
            "version differs",
            False,
            _body("recall", recall),
            _headers("recall", MCP_Protocol_Version="2099-01-01"),
        ),
        (
            "notification",
            False,
            {k: v for k, v in _body("recall", recall).items() if k != "id"},
            _headers("recall"),
        ),
    ]
    return requests


def _normal(value: Any) -> Any:
    """``value`` with new memories' random ids masked and JSON text content parsed. Lists
    and lines are sorted: with one fixed time, entries tie and their ids (random) order
    them, differently in each copy."""
    if isinstance(value, dict):
        return {key: _normal(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return sorted((_normal(item) for item in value), key=json.dumps)
    if isinstance(value, str):
        if HEX_ID.match(value):
            return "<id>"
        if value.startswith("{"):
            try:
                return _normal(json.loads(value))
            except ValueError:
                return value
        return sorted(value.splitlines())
    return value


def _send(server: HttpServer, body: Any, headers: dict[str, str]) -> tuple[int, str, Any]:
    response = httpx.post(server.url, content=json.dumps(body).encode(), headers=headers)
    try:
        parsed = response.json()
    except ValueError:
        parsed = response.text
    return response.status_code, response.headers.get("content-type", ""), parsed


def test_the_fast_path_answers_as_the_sdk_and_only_what_it_may(
    pair: tuple[HttpServer, HttpServer, str],
) -> None:
    sdk, fast, kept = pair
    assert sdk.app.state.fast is None
    counter = fast.app.state.fast
    for what, expect_fast, body, headers in _requests(kept):
        before = counter.answered
        want = _send(sdk, body, headers)
        got = _send(fast, body, headers)
        assert (counter.answered - before == 1) is expect_fast, what
        assert _normal(got) == _normal(want), what
    assert counter.answered == 23


def test_the_fast_answer_is_the_sdks_byte_for_byte(
    pair: tuple[HttpServer, HttpServer, str],
) -> None:
    """Reads answer alike on both copies, so their bytes can be compared as they are."""
    sdk, fast, kept = pair
    for name, arguments in (("recall", {"key": "city"}), ("explain", {"memory_id": kept})):
        body = json.dumps(_body(name, arguments)).encode()
        responses = [
            httpx.post(server.url, content=body, headers=_headers(name)) for server in (sdk, fast)
        ]
        assert responses[0].content == responses[1].content
        assert [r.headers.get("content-type") for r in responses] == ["application/json"] * 2
        assert responses[0].headers["content-length"] == responses[1].headers["content-length"]
