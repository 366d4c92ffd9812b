"""Schema step 0005 on PostgreSQL: a use is a HOT update, in place on its page.

A recall or a search marks its entries used by changing ``last_accessed_at``,
``access_count`` and ``last_used_at``. No index of ``memories`` holds one of them, and the
table leaves room on its pages, so PostgreSQL writes the new row version on the same page
with no index entry (a heap-only tuple): a user's rows stay together and a use costs a few
buffers, not one entry in every index. The due selections find their rows by the jobs'
predicates, set-based (``storage.postgres.due_walk``, tested in ``test_pg_due_walk``); the
jobs' own tests check what they select on both backends.
"""

from __future__ import annotations

import re
import time

import psycopg
import pytest

from memkeeper import MemoryStore

pytestmark = pytest.mark.postgres

USE_COLUMNS = {"last_accessed_at", "access_count", "last_used_at"}


def _indexed_columns(conn: psycopg.Connection) -> dict[str, set[str]]:
    """Each index of memkeeper.memories and the columns it holds (keys and predicate)."""
    rows = conn.execute(
        "SELECT i.relname, pg_get_indexdef(x.indexrelid) FROM pg_index x"
        " JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid"
        " JOIN pg_namespace n ON n.oid = t.relnamespace"
        " WHERE n.nspname = 'memkeeper' AND t.relname = 'memories'"
    ).fetchall()
    columns = {
        name
        for (name,) in conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = 'memkeeper' AND table_name = 'memories'"
        )
    }
    return {index: {c for c in columns if re.search(rf"\b{c}\b", text)} for index, text in rows}


def _updates(url: str) -> tuple[int, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
            " WHERE schemaname = 'memkeeper' AND relname = 'memories'"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_no_index_holds_a_use_column_and_pages_keep_room(pg_database: str) -> None:
    MemoryStore(pg_database).close()
    with psycopg.connect(pg_database, autocommit=True) as conn:
        indexes = _indexed_columns(conn)
        options = conn.execute(
            "SELECT c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'memkeeper' AND c.relname = 'memories'"
        ).fetchone()
    assert {"memories_due_by_write", "memories_ttl_by_write"} <= set(indexes)
    assert "memories_due_by_use" not in indexes and "memories_ttl_override" not in indexes
    assert {i: cols & USE_COLUMNS for i, cols in indexes.items() if cols & USE_COLUMNS} == {}
    assert indexes["memories_due_by_write"] == {
        "state",
        "kind",
        "updated_at",
        "confidence",
        "pinned",
        "id",
    }
    assert options is not None and "fillfactor=85" in (options[0] or [])


def test_recalls_and_searches_update_their_rows_in_place(pg_database: str) -> None:
    with MemoryStore(pg_database) as store:
        for n in range(20):
            store.remember("ann", f"k{n}", f"Ann likes walking number {n}")
    before = _updates(pg_database)
    with MemoryStore(pg_database) as store:
        for _ in range(3):
            for n in range(20):
                assert store.recall("ann", f"k{n}") is not None
        assert len(store.search("ann", "walking", limit=5)) == 5
    expected = 3 * 20 + 5
    # A backend's counts reach the statistics when it ends (the store's close) or goes idle.
    deadline = time.monotonic() + 15
    while (after := _updates(pg_database))[0] - before[0] < expected:
        assert time.monotonic() < deadline, f"the updates never showed: {before} -> {after}"
        time.sleep(0.2)
    updated, hot = after[0] - before[0], after[1] - before[1]
    assert updated == expected
    # A page full of versions not yet pruned sends an update to another page: rarely.
    assert hot >= 0.9 * updated, f"{updated - hot} of {updated} uses were not HOT updates"
