"""Erasure, status and backups on PostgreSQL, beyond what the both-backend modules check.

tests/test_forget.py runs on both backends; here the PostgreSQL-only parts: after a forget no
row of any table of memkeeper's schema holds the erased value, and the tables it deleted from
were vacuumed (the server's reclaim of the deleted row versions); ``status`` names the server
and the schema, never the password; ``backup`` and ``restore-backup`` refuse, naming
pg_dump / pg_restore.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from freezegun import freeze_time
from helpers import T0
from helpers.backends import empty_memory
from helpers.erasure import cold_place, hot_place, places_holding, schema_tables, vacuum_counts
from helpers.logs import capture_logs
from test_forget import NEEDLE, SECRET, bystanders, spread_everywhere

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.storage.postgres.ddl import STEPS
from memkeeper.storage.postgres.forgetting import ENTRY_TABLES

PASSWORD = "hunter2-pw"


@pytest.fixture
def db_path(pg_suite_url: str) -> str:
    """The shared test database, emptied (as the both-backend modules' ``[postgres]``)."""
    empty_memory(pg_suite_url)
    return pg_suite_url


@pytest.fixture
def frozen() -> Iterator:
    with freeze_time(T0) as clock:
        yield clock


def with_password(url: str) -> str:
    """The URL with a password (the test server trusts its superuser: accepted, unused)."""
    changed = url.replace("postgres:@", f"postgres:{PASSWORD}@", 1)
    assert PASSWORD in changed
    return changed


def test_forget_leaves_no_row_anywhere_in_the_schema_and_vacuums(
    store: MemoryStore, frozen, db_path: str
) -> None:
    ids = spread_everywhere(store, frozen)
    keep = bystanders(store)
    store.append_message("alice", "s1", "user", f"about {SECRET}")
    held = set(places_holding(db_path, NEEDLE))
    assert held >= {hot_place(db_path), cold_place(db_path), "changes", "messages"}
    before = vacuum_counts(db_path)

    assert store.forget("alice", "city") == 3

    # Every table of the schema, not only those memkeeper lists, searched row by row: the
    # message keeps its other words ("about [erased]"), and its old version is vacuumed.
    assert set(schema_tables(db_path)) >= {"memories", "cold_memories", "changes", "vectors"}
    assert places_holding(db_path, NEEDLE) == []
    assert [m.content for m in store.history("alice", "s1")] == ["about [erased]"]
    after = vacuum_counts(db_path)
    for table in (*ENTRY_TABLES, "messages"):
        assert after[table] == before.get(table, 0) + 1, table
    for memory_id in ids.values():
        assert store.get(memory_id) is None
    assert all(store.get(memory_id) is not None for memory_id in keep.values())

    assert store.forget_user("alice")["messages"] == 1
    assert places_holding(db_path, b"about [erased]") == []
    assert vacuum_counts(db_path)["messages"] == after["messages"] + 1


def test_forgetting_nothing_vacuums_nothing(store: MemoryStore, db_path: str) -> None:
    store.remember("alice", "city", "Beijing")
    before = vacuum_counts(db_path)
    assert store.forget("alice", "nothing") == 0
    assert vacuum_counts(db_path) == before


def test_a_forget_inside_a_callers_transaction_is_not_vacuumed_before_its_commit(
    store: MemoryStore, db_path: str
) -> None:
    """VACUUM cannot reclaim deletes not yet committed: it is left (a warning), the
    erasure commits with the caller's transaction."""
    entry = store.remember("alice", "city", SECRET)
    before = vacuum_counts(db_path)
    hot = store.storage.hot
    with capture_logs() as logs, store.storage.lock, hot.atomic():
        assert store.forget_memory(entry.id) == 1
    assert any("not vacuumed" in line.get("event", "") for line in logs)
    assert vacuum_counts(db_path) == before
    assert places_holding(db_path, NEEDLE) == []


def test_a_table_locked_past_the_timeout_is_left_and_the_others_are_vacuumed(
    store: MemoryStore, db_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    from memkeeper.storage.postgres import forgetting

    monkeypatch.setattr(forgetting, "LOCK_TIMEOUT", "200ms")
    store.remember("alice", "city", SECRET)
    before = vacuum_counts(db_path)
    with psycopg.connect(db_path) as other:  # an index build, say: VACUUM's own lock level
        other.execute("LOCK TABLE memkeeper.memories IN SHARE UPDATE EXCLUSIVE MODE")
        with capture_logs() as logs:
            assert store.forget("alice", "city") == 1
        other.rollback()
    warning = next(line for line in logs if "stayed locked" in line.get("event", ""))
    assert warning["tables"] == ["memories"]
    after = vacuum_counts(db_path)
    assert after["memories"] == before.get("memories", 0)
    assert after["changes"] == before.get("changes", 0) + 1
    assert places_holding(db_path, NEEDLE) == []  # the rows are gone: only VACUUM waits


def test_an_erasure_commits_durably_whatever_database_synchronous_says(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memkeeper.storage import transitions

    store.remember("alice", "city", SECRET)
    seen = []

    def look(step: str) -> None:
        if step == "forget-hot-written":
            seen.append(raw.execute("SHOW synchronous_commit").fetchone()[0])

    monkeypatch.setattr(transitions, "step_hook", look)
    with store.storage.lock:  # one lease: the forget below runs on this connection
        raw = store.storage.hot.raw
        raw.execute("SET synchronous_commit = off")  # database.synchronous = "normal"
        assert store.forget("alice", "city") == 1
        assert raw.execute("SHOW synchronous_commit").fetchone()[0] == "off"  # LOCAL: this one
    assert seen == ["on"]


def test_status_shows_server_schema_and_tables_never_the_password(
    db_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = with_password(db_path)
    with MemoryStore(url) as store:
        store.remember("alice", "city", "Beijing")
    assert main(["--db", url, "status"]) == 0
    out = capsys.readouterr().out
    assert PASSWORD not in out
    database = next(line for line in out.splitlines() if line.startswith("database:"))
    assert (
        "***" in database
        and "PostgreSQL 1" in database
        and f"schema memkeeper at {STEPS[-1][0]}" in database
    )
    assert database.endswith(", pool 1 of 4 open, 1 in use)")  # status's own lease
    assert "cold:" not in out  # cold storage is a table of the one database
    assert any(line.split()[:2] == ["cold_memories", "0"] for line in out.splitlines())
    assert main(["--db", url, "status", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert PASSWORD not in json.dumps(data)
    assert data["database"]["schema_current"] is True
    assert data["files"]["hot"]["tables"]["memories"]["rows"] == 1


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["backup"], "pg_dump --schema=memkeeper"),
        (["backup", "--prune-forgotten"], "new dump after a forget"),
        (["restore-backup", "--yes"], "pg_restore --clean"),
    ],
)
def test_backup_and_restore_refuse_naming_the_servers_tools(
    db_path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], names: str
) -> None:
    url = with_password(db_path)
    MemoryStore(url).close()
    target = tmp_path / "backup"
    assert main(["--db", url, *args, str(target)]) == 2
    err = capsys.readouterr().err
    assert names in err and "PostgreSQL" in err and PASSWORD not in err
    assert len(err.strip().splitlines()) == 1
    assert not target.exists()  # nothing created
