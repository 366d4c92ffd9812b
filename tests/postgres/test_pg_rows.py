"""Rows of ``query()`` on PostgreSQL are named as on SQLite, from the result itself.

The names come from the server's result, not psycopg's ``description`` (which builds a
``Column`` object per column at every call, and cost an agent a quarter of its CPU): a
repeated name is renamed as sqlite-utils does, and a statement without rows is refused.
"""

from __future__ import annotations

import pytest

from memkeeper import MemoryStore


def test_query_names_columns_as_sqlite_does(pg_database: str) -> None:
    with MemoryStore(pg_database) as store:
        store.remember("ann", "city", "Oslo")
        hot = store.storage.hot
        assert list(hot.query("SELECT 1 AS a, 2 AS a, 3 AS a_2")) == [{"a": 1, "a_3": 2, "a_2": 3}]
        row = next(hot.query("SELECT * FROM memories WHERE user_id = ?", ["ann"]))
        assert row["value"] == "Oslo" and row["key"] == "city"
        assert list(hot.query("SELECT id FROM memories WHERE user_id = 'nobody'")) == []
        with pytest.raises(ValueError, match="returns rows"):
            hot.query("UPDATE memories SET value = value WHERE user_id = 'ann'")
