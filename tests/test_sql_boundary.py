"""No SQL outside ``memkeeper/storage/`` (issue 22's first step), so it cannot creep back.

Every module of the package and of ``jobs/`` is read (not imported) and fails this test if,
outside ``storage/``, it

- imports the database driver (``sqlite3``, ``sqlite_utils``, ``psycopg``) or storage's
  SQLite-only modules (``storage.sqlite``, ``storage.sqlite_errors``: a write transaction is
  :func:`memkeeper.storage.transaction.write_transaction`);
- calls ``.execute``, ``.executemany``, ``.executescript`` or ``.query`` on anything;
- holds a SQL statement in a string (``SELECT``, ``INSERT INTO``, ``UPDATE … SET``,
  ``DELETE FROM``, ``PRAGMA``...; docstrings and comments are prose, not statements).

A job may keep its selection as a *predicate*, the body of a ``WHERE`` with ``?``
parameters (``"state = 'superseded' AND state_since < ?"``), which
:mod:`memkeeper.storage.due` runs: issue 22 allows that where it keeps the job readable. The
predicate must be portable (columns, comparisons, ``AND``/``OR``, ``IS NULL``, ``IN``,
literals: no function, no dialect), which ``storage.due`` checks before running it.
Everything else goes through a function of ``storage/`` named for what it does, which a
PostgreSQL backend (``storage/postgres/``) can implement in turn.

Exempt, on purpose (the test also fails when an exemption is no longer needed, so this list
stays true):

- ``memkeeper/bench/``: ``floor.py`` is raw SQL on purpose (the floor the store is measured
  against), the rest generates and measures databases directly.

Which modules may import a driver at all is also an import-linter contract ("Only storage
talks to a database driver", pyproject.toml, checked by ``.ci/lint-layers``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from memkeeper import MemoryStore
from memkeeper.storage import due
from memkeeper.storage.merge_candidates import MERGEABLE

REPO = Path(__file__).resolve().parents[1]

REMAINING = ("memkeeper/bench/",)
"""Paths (a folder ends with ``/``) that still run SQL or name the driver: issue 22's rest."""

DRIVERS = ("sqlite3", "sqlite_utils", "psycopg", "psycopg_pool")
SQLITE_ONLY = (
    "memkeeper.storage.sqlite.opening",
    "memkeeper.storage.sqlite.writing",
    "memkeeper.storage.sqlite.errors",
)
SQL_CALLS = ("execute", "executemany", "executescript", "query")
STATEMENT = re.compile(
    r"\b(SELECT\s+\S|INSERT\s+(OR\s+\w+\s+)?INTO\b|UPDATE\s+\w+\s+SET\b|DELETE\s+FROM\b"
    r"|REPLACE\s+INTO\b|PRAGMA\s+\w|CREATE\s+(TABLE|INDEX|VIRTUAL|TRIGGER)\b"
    r"|DROP\s+(TABLE|INDEX)\b|ALTER\s+TABLE\b|BEGIN(\s+IMMEDIATE|\s+EXCLUSIVE)?\s*$"
    r"|VACUUM\b)"
)


def sql_outside_storage(source: str) -> list[str]:
    """What in ``source`` runs SQL or names the driver, one line each (empty: clean)."""
    tree = ast.parse(source)
    prose = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
            if node.module in ("memkeeper.storage", "memkeeper.storage.sqlite"):
                names += [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            names = []
        for name in names:
            if name.split(".")[0] in DRIVERS or name in SQLITE_ONLY:
                found.append((node.lineno, node.col_offset, f"imports {name}"))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in SQL_CALLS
        ):
            found.append((node.lineno, node.col_offset, f"calls .{node.func.attr}()"))
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in prose
            and STATEMENT.search(node.value)
        ):
            what = f"SQL statement {node.value.strip()[:60]!r}"
            found.append((node.lineno, node.col_offset, what))
    return [f"line {line}: {what}" for line, _, what in sorted(found)]


def _modules() -> list[Path]:
    paths = [*(REPO / "memkeeper").rglob("*.py"), *(REPO / "jobs").rglob("*.py")]
    return sorted(path for path in paths if "storage" not in path.relative_to(REPO).parts[:2])


def _remaining(relative: str) -> bool:
    return any(relative.startswith(path) for path in REMAINING)


def test_no_module_outside_storage_runs_sql() -> None:
    problems = []
    for path in _modules():
        relative = path.relative_to(REPO).as_posix()
        if _remaining(relative):
            continue
        problems += [f"{relative} {what}" for what in sql_outside_storage(path.read_text())]
    assert not problems, (
        "SQL outside memkeeper/storage/ (move it into a storage function named for what it "
        "does):\n" + "\n".join(problems)
    )


@pytest.mark.parametrize("exempt", REMAINING)
def test_every_exemption_is_still_needed(exempt: str) -> None:
    """An exempt path that no longer runs SQL leaves the list (and the docstring)."""
    paths = [path for path in _modules() if path.relative_to(REPO).as_posix().startswith(exempt)]
    assert paths, f"{exempt} does not exist"
    assert any(sql_outside_storage(path.read_text()) for path in paths), (
        f"{exempt} no longer runs SQL: remove it from REMAINING and the docstring"
    )


def test_the_scan_finds_each_kind_of_sql() -> None:
    source = '''
"""Module docstring: a PRAGMA journal_mode or SELECT * FROM x in prose is fine."""
import sqlite3
from sqlite_utils.db import Database
from memkeeper.storage.sqlite.writing import sqlite_write_transaction
from memkeeper.storage.sqlite import errors, files
_WHERE = "state = 'superseded' AND state_since < ?"
_SQL = (
    "SELECT id FROM memories"
    " WHERE user_id = ?"
)
def f(db, ids):
    """UPDATE memories SET x = 1 in a docstring is prose."""
    db.conn.execute(f"DELETE FROM messages WHERE id IN ({ids})")
    return list(db.query("select 1"))
'''
    found = sql_outside_storage(source)
    assert [line.split(": ", 1)[1].split(" ")[0:2] for line in found] == [
        ["imports", "sqlite3"],
        ["imports", "sqlite_utils.db"],
        ["imports", "memkeeper.storage.sqlite.writing"],
        ["imports", "memkeeper.storage.sqlite.errors"],
        ["SQL", "statement"],
        ["calls", ".execute()"],
        ["SQL", "statement"],
        ["calls", ".query()"],
    ]
    assert "'SELECT id FROM memories WHERE user_id = ?'" in found[4]
    assert "DELETE FROM messages" in found[6]


@pytest.mark.parametrize(
    "text",
    [
        "state = 'active' AND kind = ? AND last_used_at < ? AND pinned = 0",
        "select the due rows",
        "Update the README",
        "deleted from cold storage",
    ],
)
def test_predicates_and_prose_are_not_statements(text: str) -> None:
    assert sql_outside_storage(f"X = {text!r}\n") == []


def test_a_portable_predicate_runs_and_a_dialect_one_is_refused(store: MemoryStore) -> None:
    store.remember("alice", "city", "Lyon")
    hot = store.storage.hot
    assert due.count(hot, "state = 'active' AND kind = ? AND pinned = 0", ["fact"]) == 1
    assert due.count(hot, MERGEABLE, []) == 1
    with pytest.raises(ValueError, match="function call"):
        due.count(hot, "last_used_at < datetime('now')", [])
    with pytest.raises(ValueError, match="function call"):
        next(due.select_batches(hot, "memories", "lower(key) = ?", ["city"], order="id", size=5))


@pytest.mark.parametrize(
    "where",
    [
        "json_extract(value, '$.a') = ?",
        "key GLOB ?",
        "key || value = ?",
        "state = 'active' -- and the rest",
        "state = 'active'; DELETE FROM memories",
        "id IN (SELECT memory_id FROM uses)",
    ],
)
def test_what_is_not_a_portable_predicate(where: str) -> None:
    with pytest.raises(ValueError, match="not a portable predicate"):
        due.portable(where)
