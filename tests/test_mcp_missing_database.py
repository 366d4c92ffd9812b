"""Every tool that creates nothing answers on a missing database as it would on an empty
one, and leaves the database uncreated (issue 20 item 8: only a write creates it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memkeeper import MemoryStore
from memkeeper.errors import NotFound
from memkeeper.mcp.auth import Principal
from memkeeper.mcp.calls import Caller, call
from memkeeper.mcp.schemas import TOOLS
from memkeeper.mcp.store_ref import StoreRef

ARGUMENTS: dict[str, dict[str, Any]] = {
    "recall": {"key": "city"},
    "search": {"query": "Paris"},
    "forget": {"key": "city"},
    "context": {"query": "Paris"},
    "explain": {"memory_id": "0123456789abcdef"},
    "list_memories": {},
    "episodes": {},
    "history": {"session_id": "s1"},
}
CREATES_NOTHING = [tool.name for tool in TOOLS if tool.read_only or tool.destructive]


def test_every_tool_that_creates_nothing_is_listed_here() -> None:
    assert sorted(CREATES_NOTHING) == sorted(ARGUMENTS)


def _answer(path: Path, tool: str) -> Any:
    caller = Caller(Principal("alice"), "test")
    ref = StoreRef(path)
    try:
        return call(ref, caller, tool, dict(ARGUMENTS[tool]))
    except NotFound as exc:
        return ("NotFound", type(exc).__name__)
    finally:
        ref.close()


@pytest.mark.parametrize("tool", CREATES_NOTHING)
def test_a_missing_database_answers_as_an_empty_one(tmp_path: Path, tool: str) -> None:
    missing = tmp_path / "missing" / "memory.db"
    missing.parent.mkdir()
    answered = _answer(missing, tool)
    assert not missing.exists()
    empty = tmp_path / "empty.db"
    MemoryStore(empty).close()
    assert empty.exists()
    assert answered == _answer(empty, tool)


def test_on_sqlite_each_call_at_once_gets_a_store_of_its_own(tmp_path: Path) -> None:
    """SQLite's stores are one connection behind one lock each: calls at once take
    separate stores (the PostgreSQL ref shares one: tests/postgres/test_pg_mcp.py)."""
    with StoreRef(tmp_path / "memory.db") as ref:
        with ref.borrow(create=True) as a, ref.borrow(create=True) as b:
            assert a is not None and b is not None and a is not b
        with ref.borrow(create=True) as again:
            assert again in (a, b)
