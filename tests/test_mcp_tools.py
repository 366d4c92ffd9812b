"""The MCP server in process (issue 13): the SDK's own client against the server object.

Every tool is called through the SDK 2.x ``Client`` connected to the server object in process,
in the 2026-07-28 mode (no handshake) and in the 2025-06-18 handshake mode (a real MCP
session over memory streams, see ``tests/mcp_clients.py``), and the outcome is checked in
the database and the change log: actor ``mcp:<tool>``, the client's name in the source, no
change at all after a refused call. Also: the tools' schemas and annotations, who may act for
whom, the README's tool table against the server's own list, and that memory commands do not
load the SDK.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import change_rows, dump_databases
from mcp import Client, types
from mcp_clients import MODERN, MODES, in_process

from memkeeper import MemoryStore
from memkeeper.mcp.auth import Principal
from memkeeper.mcp.docs import readme_table, tools_markdown
from memkeeper.mcp.server import build_server, fixed_principal

REPO = Path(__file__).resolve().parents[1]
CLIENT = "test-agent"
TOOLS = [
    "remember",
    "recall",
    "search",
    "forget",
    "add_note",
    "context",
    "append_message",
    "record_episode",
    "explain",
    "list_memories",
    "episodes",
    "history",
]


@asynccontextmanager
async def session(
    store: MemoryStore, principal: Principal, client: str = CLIENT, mode: str = MODERN
) -> AsyncIterator[Client]:
    server = build_server(store, fixed_principal(principal))
    async with in_process(server, client, mode) as client_:
        yield client_


def run(func: Callable[[], Any]) -> Any:
    return anyio.run(func)


def calls(
    store: MemoryStore,
    steps: list[tuple[str, dict[str, Any]]],
    user: str | None = "alice",
    mode: str = MODERN,
) -> list[types.CallToolResult]:
    async def go() -> list[types.CallToolResult]:
        async with session(store, Principal(user), mode=mode) as client:
            return [await client.call_tool(name, args) for name, args in steps]

    return run(go)


def data(result: types.CallToolResult) -> Any:
    assert not result.is_error, result.content
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.loads(text) == result.structured_content
    return result.structured_content


def error(result: types.CallToolResult) -> str:
    assert result.is_error
    [content] = result.content
    return content.text  # type: ignore[union-attr]


pytestmark = pytest.mark.both_backends


@pytest.fixture
def store(db_path: Path | str) -> MemoryStore:
    with MemoryStore(db_path, actor="mcp") as opened:
        yield opened


def test_the_server_lists_every_tool_with_a_schema_and_annotations(store: MemoryStore) -> None:
    async def go() -> list[types.Tool]:
        async with session(store, Principal("alice")) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in run(go)}
    assert list(tools) == TOOLS
    for tool in tools.values():
        assert len(tool.description or "") > 80
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
        assert all(p.get("description") for p in tool.input_schema["properties"].values())
        assert tool.annotations is not None and tool.annotations.open_world_hint is False
    reads = {name for name, tool in tools.items() if tool.annotations.read_only_hint}
    assert reads == {
        "recall",
        "search",
        "context",
        "explain",
        "list_memories",
        "episodes",
        "history",
    }
    assert {name for name, t in tools.items() if t.annotations.destructive_hint} == {"forget"}
    assert tools["remember"].input_schema["required"] == ["key", "value"]
    assert tools["remember"].input_schema["properties"]["kind"]["enum"] == ["fact", "preference"]


@pytest.mark.parametrize("mode", MODES)
def test_each_tool_works_and_every_change_names_the_tool_and_the_client(
    store: MemoryStore, mode: str
) -> None:
    first = calls(
        mode=mode,
        store=store,
        steps=[
            ("remember", {"key": "city", "value": "Paris", "source": "stated by the user"}),
            ("remember", {"key": "tone", "value": "brief", "kind": "preference", "namespace": "p"}),
            ("add_note", {"text": "Met Bob about the Q3 report", "namespace": "p"}),
            ("recall", {"key": "city"}),
            ("recall", {"key": "missing"}),
            ("search", {"query": "Q3 report", "namespace": "p"}),
            ("context", {"namespace": "p", "query": "tone"}),
            ("append_message", {"session_id": "s1", "role": "user", "content": "hello"}),
            ("record_episode", {"task_name": "weekly report", "namespace": "p"}),
            ("list_memories", {}),
            ("list_memories", {"namespace": "p", "kind": "note"}),
            ("episodes", {"namespace": "p"}),
            ("history", {"session_id": "s1"}),
        ],
    )
    city = data(first[0])["memory"]
    assert city["key"] == "city" and city["value"] == "Paris" and city["state"] == "active"
    assert city["source"] == f"mcp:{CLIENT}: stated by the user"
    note = data(first[2])["memory"]
    assert note["kind"] == "note" and note["source"] == f"mcp:{CLIENT}" and "key" not in note
    assert data(first[3])["found"] is True and data(first[3])["memory"]["id"] == city["id"]
    assert data(first[4]) == {"found": False, "memory": None}
    assert [hit["memory"]["id"] for hit in data(first[5])["hits"]][:1] == [note["id"]]
    context = data(first[6])
    assert "brief" in context["text"] and "Met Bob" in context["text"]
    assert data(first[7])["message"]["session_id"] == "s1"
    assert data(first[8])["episode"]["task_name"] == "weekly report"
    listed = data(first[9])
    assert listed["total"] == 3
    assert listed["memories"][0]["id"] == city["id"]
    assert [m["id"] for m in data(first[10])["memories"]] == [note["id"]]
    [episode] = data(first[11])["episodes"]
    assert episode["task_name"] == "weekly report" and episode["status"] == "completed"
    [message] = data(first[12])["messages"]
    assert message["role"] == "user" and message["content"] == "hello"

    # The database holds exactly that, for alice.
    assert store.recall("alice", "tone", namespace="p").value == "brief"  # type: ignore[union-attr]
    assert [m.content for m in store.history("alice", "s1")] == ["hello"]
    assert [e.task_name for e in store.episodes("alice", namespace="p")] == ["weekly report"]
    created = store.changes(action="create")
    assert {(c.actor, c.user_id) for c in created} == {
        ("mcp:remember", "alice"),
        ("mcp:add_note", "alice"),
    }
    assert all(c.source.startswith(f"mcp:{CLIENT}") for c in created)  # type: ignore[union-attr]

    [explained] = calls(mode=mode, store=store, steps=[("explain", {"memory_id": city["id"]})])
    explanation = data(explained)["explanation"]
    assert "mcp:remember" in explanation and f"mcp:{CLIENT}" in explanation


@pytest.mark.parametrize("mode", MODES)
def test_the_forget_tool_erases_by_key_and_by_id_and_names_the_tool(
    store: MemoryStore, mode: str
) -> None:
    city = store.remember("alice", "city", "Paris")
    note = store.add_note("alice", "Met Bob about the Q3 report", namespace="p")
    later = calls(
        mode=mode,
        store=store,
        steps=[
            ("forget", {"key": "city"}),
            ("forget", {"memory_id": note.id}),
            ("recall", {"key": "city"}),
        ],
    )
    assert data(later[0]) == {"forgotten": 1}
    assert data(later[1]) == {"forgotten": 1}
    assert data(later[2])["found"] is False
    assert store.get(city.id) is None and store.get(note.id) is None
    assert {c.actor for c in store.changes(action="forget")} == {"mcp:forget"}


BAD_CALLS = [
    ("remember", {"key": 5, "value": "x"}, "key must be text, not int"),
    ("remember", {"key": "k", "value": "x", "kind": "mood"}, "kind must be one of"),
    ("remember", {"key": "k", "value": "x", "kind": "note"}, "notes have no key"),
    ("remember", {"key": "k", "value": "x" * 70_000}, "value is 70000 bytes"),
    ("remember", {"key": "k", "value": "x", "confidence": 1.5}, "confidence must be from 0 to 1"),
    ("remember", {"key": "k", "value": "x", "confidence": "high"}, "confidence must be a number"),
    ("remember", {"key": "k", "value": "x", "pinned": "yes"}, "pinned must be true or false"),
    ("remember", {"key": "k", "value": "x", "ttl_days": 0}, "ttl_days must be a whole number"),
    ("remember", {"key": " k", "value": "x"}, "key must not start or end with whitespace"),
    ("remember", {"value": "x"}, "remember needs the argument 'key'"),
    ("remember", {"key": "k", "value": "x", "colour": "red"}, "remember has no argument 'colour'"),
    ("search", {"query": "x", "kinds": "fact"}, "kinds must be a list"),
    ("search", {"query": "x", "limit": 0}, "limit must be a whole number"),
    ("append_message", {"session_id": "s", "role": "boss", "content": "x"}, "role must be one of"),
    ("record_episode", {"task_name": "t", "status": "maybe"}, "status must be one of"),
    ("forget", {}, "exactly one of key and memory_id"),
    ("explain", {"memory_id": "nope"}, "no memory with id 'nope' for this user"),
    ("list_memories", {"state": "lost"}, "state must be one of"),
    ("list_memories", {"limit": 501}, "limit must be from 1 to 500"),
    ("history", {}, "history needs the argument 'session_id'"),
    ("episodes", {"limit": "all"}, "limit must be a whole number"),
]


@pytest.mark.parametrize(("tool", "arguments", "message"), BAD_CALLS, ids=lambda v: str(v)[:30])
def test_bad_arguments_are_tool_errors_with_the_apis_message_and_change_nothing(
    store: MemoryStore, tool: str, arguments: dict[str, Any], message: str
) -> None:
    before = dump_databases(store.path)
    [result] = calls(store, [(tool, arguments)])
    text = error(result)
    assert message in text
    assert "Traceback" not in text and "\n" not in text
    assert "x" * 100 not in text  # the value is never echoed
    assert dump_databases(store.path) == before


def test_an_unexpected_failure_is_one_line_without_a_traceback(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("disk gremlins")

    monkeypatch.setattr(store, "remember", broken)
    [result] = calls(store, [("remember", {"key": "k", "value": "v"})])
    assert error(result) == "internal error in remember (RuntimeError); see the server log"


def test_a_user_server_cannot_act_for_another_user(store: MemoryStore) -> None:
    results = calls(
        store,
        [
            ("remember", {"key": "city", "value": "Paris", "user_id": "bob"}),
            ("remember", {"key": "city", "value": "Paris", "user_id": "alice"}),
            ("recall", {"key": "city", "user_id": "bob"}),
        ],
    )
    assert "acts for user 'alice' only" in error(results[0])
    assert data(results[1])["memory"]["value"] == "Paris"
    assert "acts for user 'alice' only" in error(results[2])
    assert store.list_memories("bob") == []


def test_ids_of_another_users_memories_are_not_found(store: MemoryStore) -> None:
    bobs = store.remember("bob", "city", "Oslo")
    results = calls(
        store, [("explain", {"memory_id": bobs.id}), ("forget", {"memory_id": bobs.id})]
    )
    assert [error(r) for r in results] == [f"no memory with id {bobs.id!r} for this user"] * 2
    assert store.get(bobs.id) is not None


def test_an_admin_names_the_user_in_every_call(store: MemoryStore) -> None:
    results = calls(
        store,
        [
            ("remember", {"key": "city", "value": "Oslo"}),
            ("remember", {"key": "city", "value": "Oslo", "user_id": "bob"}),
            ("recall", {"key": "city", "user_id": "bob"}),
            ("recall", {"key": "city", "user_id": ""}),
        ],
        user=None,
    )
    assert "admin token acts for the user named in user_id" in error(results[0])
    assert data(results[1])["memory"]["value"] == "Oslo"
    assert data(results[2])["found"] is True
    assert error(results[3]) == "user_id must not be empty"
    assert [(c["actor"], c["user_id"]) for c in change_rows(store.path)] == [
        ("mcp:remember", "bob")
    ]


def test_the_reference_tool_table_is_the_servers_own(store: MemoryStore) -> None:
    async def go() -> list[types.Tool]:
        async with session(store, Principal("alice")) as client:
            return (await client.list_tools()).tools

    rendered = tools_markdown(run(go))
    page = (REPO / "docs" / "reference" / "mcp.md").read_text(encoding="utf-8")
    assert readme_table(page) == rendered, (
        "the MCP tool table of docs/reference/mcp.md differs from the server: paste "
        "`memkeeper mcp --tools markdown`"
    )


def test_memory_commands_do_not_load_the_mcp_sdk(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from memkeeper.cli import main\n"
        f"db = {str(tmp_path / 'm.db')!r}\n"
        "for argv in (['remember', 'u', 'city', 'Paris'], ['recall', 'u', 'city'], ['--help']):\n"
        "    main(['--db', db, *argv])\n"
        "print('LOADED', sorted(m for m in ('mcp', 'starlette', 'uvicorn', 'anyio')"
        " if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stdout
