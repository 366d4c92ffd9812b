"""Schema migrations: how every future schema step gets tested.

The pattern (from simonw/llm's test_migrate.py): build a file exactly as an older memkeeper
left it, fill it with rows in that older shape, open it with today's memkeeper (which migrates
it forward), and check the rows survived and nothing is pending.

``build_at_step`` is the helper future migrations use. When you add ``0002_something`` to
``memkeeper.storage.sqlite.schema``, add a test here like ``test_a_0001_database_migrates_forward``:

    db = build_at_step(path, HOT, "0001_initial")      # the schema before your step
    fill_0001(db)                                       # rows in the old shape
    db.conn.close()
    with MemoryStore(path) as store:                    # migrates forward
        ...assert the old rows read back correctly under the new schema...
        assert hot_migrations.pending(store.storage.hot) == []

Today "0001_initial" is the only step, so the helper is exercised on it (and on a made-up
second step, to show that forward migration keeps rows and a failing step changes nothing).
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import T0, raw_rows
from sqlite_utils import Database

from memkeeper import MemoryStore
from memkeeper.clock import to_db
from memkeeper.storage.sqlite.opening import FileKind, open_database
from memkeeper.storage.sqlite.schema import COLD, HOT, cold_migrations, hot_migrations
from memkeeper.storage.sqlite.steps import Steps


def step_names(kind: FileKind) -> list[str]:
    """The names of a file kind's schema steps, in order."""
    return list(kind.steps)


def build_at_step(path: Path, kind: FileKind, last_step: str) -> Database:
    """Create ``path`` exactly as the memkeeper whose newest schema step was ``last_step``
    left it: every step up to and including ``last_step`` applied (and recorded in
    ``_sqlite_migrations``), none after it, WAL mode, and the file's application id.

    Returns an open sqlite-utils ``Database`` so the test can fill it with rows in that
    older shape (close ``db.conn`` before opening the file with ``MemoryStore``).
    """
    names = step_names(kind)
    if last_step not in names:
        raise ValueError(f"{last_step!r} is not a step of {kind.role}: {names}")
    later = names[names.index(last_step) + 1 :]
    db = Database(sqlite3.connect(path, isolation_level=None))
    db.conn.execute("PRAGMA journal_mode = WAL")
    kind.migrations.apply(db, stop_before=later[0] if later else None)
    db.conn.execute(f"PRAGMA application_id = {kind.application_id}")
    return db


def schema_of(path: Path) -> list[tuple[str, str, str]]:
    """Every table and index of a file with its SQL (sorted), ignoring the migrations table."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE '%sqlite_%'"
            " ORDER BY type, name"
        ).fetchall()
    finally:
        conn.close()
    return [tuple(row) for row in rows]


def fill_0001(db: Database) -> dict[str, str]:
    """Rows in the 0001 shape: one memory of each state, a message, an episode, a change."""
    stamp = to_db(T0)
    base = {
        "user_id": "alice",
        "namespace": "",
        "source": "chat",
        "confidence": 0.95,
        "pinned": 0,
        "ttl_days": None,
        "created_at": stamp,
        "updated_at": stamp,
        "last_accessed_at": None,
        "access_count": 0,
        "state_since": stamp,
        "last_used_at": stamp,
    }
    rows = [
        {**base, "id": "a000000000000001", "kind": "fact", "key": "city", "value": "Beijing",
         "state": "active"},
        {**base, "id": "a000000000000002", "kind": "fact", "key": "city", "value": "Xi'an",
         "state": "superseded"},
        {**base, "id": "a000000000000003", "kind": "note", "key": None, "value": "a note",
         "state": "pending_review"},
    ]  # fmt: skip
    db["memories"].insert_all(rows)
    db["messages"].insert(
        {"user_id": "alice", "namespace": "", "session_id": "s", "role": "user",
         "content": "hello", "created_at": stamp}
    )  # fmt: skip
    db["episodes"].insert(
        {"user_id": "alice", "namespace": "", "task_name": "t", "status": "completed",
         "created_at": stamp}
    )  # fmt: skip
    db["changes"].insert(
        {"at": stamp, "actor": "api:remember", "action": "create", "memory_id": rows[0]["id"],
         "user_id": "alice", "namespace": "", "reason": "new value"}
    )  # fmt: skip
    return {row["state"]: row["id"] for row in rows}


def test_0001_is_the_first_step_of_both_files() -> None:
    assert step_names(HOT)[0] == "0001_initial"
    assert step_names(COLD)[0] == "0001_initial"


def test_the_helper_builds_what_memkeeper_builds(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "real.db") as store:
        store.storage.cold(create=True)
    build_at_step(tmp_path / "built.db", HOT, step_names(HOT)[-1]).conn.close()
    build_at_step(tmp_path / "built-cold.db", COLD, step_names(COLD)[-1]).conn.close()

    assert schema_of(tmp_path / "built.db") == schema_of(tmp_path / "real.db")
    assert schema_of(tmp_path / "built-cold.db") == schema_of(tmp_path / "real-cold.db")


def test_the_helper_stops_at_the_step_asked_for(tmp_path: Path) -> None:
    db = build_at_step(tmp_path / "m.db", HOT, "0001_initial")
    applied = [m.name for m in hot_migrations.applied(db)]
    assert applied == step_names(HOT)[: step_names(HOT).index("0001_initial") + 1]
    db.conn.close()
    with pytest.raises(ValueError, match="not a step"):
        build_at_step(tmp_path / "other.db", HOT, "0000_nothing")


def test_a_0001_database_migrates_forward_with_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    db = build_at_step(path, HOT, "0001_initial")
    ids = fill_0001(db)
    db.conn.close()

    with MemoryStore(path) as store:
        assert hot_migrations.pending(store.storage.hot) == []
        assert store.get(ids["active"]).value == "Beijing"
        assert store.get(ids["superseded"]).state == "superseded"
        assert store.get(ids["pending_review"]).kind == "note"
        assert [m.content for m in store.history("alice", "s")] == ["hello"]
        assert [e.task_name for e in store.episodes("alice")] == ["t"]
        assert [c.reason for c in store.changes(memory_id=ids["active"])] == ["new value"]
        # ...and it keeps working as a current database.
        assert store.remember("alice", "city", "Xi'an").id == ids["superseded"]  # revived
        assert store.recall("alice", "city").value == "Xi'an"


def test_a_0001_cold_file_migrates_forward(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    MemoryStore(path).close()
    cold = build_at_step(tmp_path / "memory-cold.db", COLD, "0001_initial")
    cold.conn.close()
    with MemoryStore(path) as store:
        assert store.list() == []
        assert cold_migrations.pending(store.storage.cold(create=False)) == []


def _with_extra_step(kind: FileKind, name: str, step) -> FileKind:
    """A copy of ``kind`` whose migrations have one more step at the end (a future version)."""
    future = Steps(kind.migrations.name)
    for known in kind.migrations.steps:
        future(name=known.name, transactional=known.transactional)(known.fn)
    future(name=name)(step)
    return replace(kind, migrations=future, steps=(*kind.steps, name))


def test_a_future_step_migrates_an_older_file_forward(tmp_path: Path) -> None:
    """The whole pattern on a made-up 0002: older file, filled, migrated, rows intact."""

    def add_column(db: Database) -> None:
        db.execute("ALTER TABLE memories ADD COLUMN label TEXT NOT NULL DEFAULT 'none'")

    future = _with_extra_step(HOT, "0002_label", add_column)
    path = tmp_path / "memory.db"
    db = build_at_step(path, HOT, "0001_initial")
    ids = fill_0001(db)
    db.conn.close()

    migrated = open_database(path, future, busy_timeout_ms=1000)
    assert migrated is not None
    assert future.migrations.pending(migrated) == []
    rows = {row["id"]: row for row in migrated.query("SELECT * FROM memories")}
    assert rows[ids["active"]]["value"] == "Beijing"
    assert {row["label"] for row in rows.values()} == {"none"}
    migrated.conn.close()
    # Today's memkeeper refuses the migrated file: it comes from a newer memkeeper.
    from memkeeper.errors import DatabaseError

    with pytest.raises(DatabaseError, match="0002_label"):
        MemoryStore(path)


def test_a_failing_step_changes_nothing(tmp_path: Path) -> None:
    def broken(db: Database) -> None:
        db.execute("CREATE TABLE half_done (x)")
        db.execute("UPDATE memories SET value = 'damaged'")
        raise RuntimeError("step 0002 failed")

    future = _with_extra_step(HOT, "0002_broken", broken)
    path = tmp_path / "memory.db"
    # Steps commit in groups (a VACUUM step cannot share a transaction with others), so the
    # file starts at today's newest step: the failing step is then the only one pending.
    db = build_at_step(path, HOT, step_names(HOT)[-1])
    fill_0001(db)
    db.conn.close()
    before = schema_of(path), raw_rows(path, "memories"), raw_rows(path, "_sqlite_migrations")

    with pytest.raises(RuntimeError, match="step 0002 failed"):
        open_database(path, future, busy_timeout_ms=1000)

    after = schema_of(path), raw_rows(path, "memories"), raw_rows(path, "_sqlite_migrations")
    assert after == before
