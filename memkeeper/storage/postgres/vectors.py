"""The index job's reading of stale vectors on PostgreSQL.

On SQLite :func:`memkeeper.storage.vectors.stale_entries` compares each entry's text hash
with its vector's inside the query, through a Python function registered on the connection
(a SQLite UDF). PostgreSQL computes the same hash itself: the embedded text
(:func:`~memkeeper.storage.vectors.embedding_text`: the value of a note or of an entry
without a key, else ``key: value``), its UTF-8 bytes, SHA-256, the first 32 hex digits
(:func:`~memkeeper.storage.vectors.text_hash`). So the whole selection stays one statement
with its ``LIMIT``, in rowid order, as on SQLite: no entry is read into Python to be
compared (at a million entries that would be a million rows per index run).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TEXT_HASH_SQL = (
    "left(encode(sha256(convert_to("
    "CASE WHEN m.kind = 'note' OR m.key IS NULL OR m.key = '' THEN m.value"
    " ELSE m.key || ': ' || m.value END, 'UTF8')), 'hex'), 32)"
)
"""``text_hash(embedding_text(kind, key, value))`` of the row ``m``, in SQL."""


def stale_entries(
    db: Any, *, states: Sequence[str], model: str, dims: int, limit: int
) -> list[tuple[str, str, str | None, str]]:
    """Up to ``limit`` entries in ``states`` whose vector is missing, of another model or
    dimension, or made from another text than the entry's now: ``(id, kind, key, value)``
    in rowid order."""
    marks = ", ".join("?" * len(states))
    rows = db.conn.execute(
        f"""
        SELECT m.id, m.kind, m.key, m.value FROM memories AS m
        LEFT JOIN vectors AS v ON v.memory_id = m.id
        WHERE m.state IN ({marks})
          AND (v.memory_id IS NULL OR v.model != ? OR v.dims != ?
               OR v.value_hash != {TEXT_HASH_SQL})
        ORDER BY m.rowid
        LIMIT ?
        """,
        [*states, model, dims, limit],
    ).fetchall()
    return [(row[0], row[1], row[2], row[3]) for row in rows]
