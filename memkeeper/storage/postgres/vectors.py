"""The index job's reading of stale vectors on PostgreSQL.

On SQLite :func:`memkeeper.storage.vectors.stale_entries` compares each entry's text hash
with its vector's inside the query, through a function registered on the connection (a
SQLite UDF). PostgreSQL runs no Python inside a query, so here the same rows are read in
pages of the hot table in rowid order, and the hash is compared in Python with the same
memoized function: the same entries come out, in the same order, up to the same ``limit``.
Entries without a vector, or with one of another model or dimension, are stale by SQL alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

PAGE_ROWS = 2000
"""Entries read per statement while looking for stale ones."""


def stale_entries(
    db: Any,
    *,
    states: Sequence[str],
    model: str,
    dims: int,
    limit: int,
    entry_hash: Callable[[str, str | None, str], str],
) -> list[tuple[str, str, str | None, str]]:
    """Up to ``limit`` entries in ``states`` whose vector is missing, of another model or
    dimension, or made from another text (``entry_hash`` of kind, key, value differs):
    ``(id, kind, key, value)`` in rowid order."""
    marks = ", ".join("?" * len(states))
    found: list[tuple[str, str, str | None, str]] = []
    after = 0
    while len(found) < limit:
        rows = db.conn.execute(
            f"""
            SELECT m.rowid, m.id, m.kind, m.key, m.value,
                   v.memory_id IS NULL OR v.model != ? OR v.dims != ?, v.value_hash
            FROM memories AS m LEFT JOIN vectors AS v ON v.memory_id = m.id
            WHERE m.state IN ({marks}) AND m.rowid > ?
            ORDER BY m.rowid
            LIMIT ?
            """,
            [model, dims, *states, after, PAGE_ROWS],
        ).fetchall()
        for _rowid, memory_id, kind, key, value, missing, digest in rows:
            if missing or digest != entry_hash(kind, key, value):
                found.append((memory_id, kind, key, value))
                if len(found) == limit:
                    break
        if len(rows) < PAGE_ROWS:
            break
        after = rows[-1][0]
    return found
