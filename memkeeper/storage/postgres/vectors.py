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


def vector_literal(values: Sequence[float]) -> str:
    """A vector as pgvector's text, each float32 number exactly (its shortest repr)."""
    return "[" + ",".join(repr(float(x)) for x in values) + "]"


def blob_literal(blob: bytes) -> str:
    """Stored float32 bytes (little-endian) as pgvector's text, the same numbers."""
    import numpy as np

    return vector_literal(np.frombuffer(blob, dtype="<f4").tolist())


INSERT = (
    "INSERT INTO vectors (memory_id, model, dims, value_hash, vector, embedding, user_id,"
    " namespace) SELECT ?, ?, ?, ?, ?, CAST(? AS vector), m.user_id, m.namespace"
    " FROM memories AS m WHERE m.id = ?"
)
"""A vector written beside its pgvector form and its entry's owner (the search filter);
nothing when the entry no longer exists."""


def insert_values(values: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """:data:`INSERT`'s parameters of ``(memory_id, model, dims, value_hash, blob, id)``."""
    return [(*value[:5], blob_literal(value[4]), value[5]) for value in values]


def fill_embeddings(db: Any, limit: int) -> int:
    """Give up to ``limit`` vectors written without their pgvector form (by ``migrate-to``,
    which copies the float32 bytes only) that form and their entry's owner, from their own
    bytes: no embedding call. Returns how many; the index job calls it each run."""
    rows = db.conn.execute(
        "SELECT memory_id, vector FROM vectors WHERE embedding IS NULL AND vector IS NOT NULL"
        " ORDER BY rowid LIMIT ?",
        [limit],
    ).fetchall()
    if not rows:
        return 0
    with db.write_transaction():
        db.conn.executemany(
            "UPDATE vectors SET embedding = CAST(? AS vector),"
            " user_id = coalesce(user_id, (SELECT user_id FROM memories WHERE id = ?)),"
            " namespace = coalesce(namespace, (SELECT namespace FROM memories WHERE id = ?))"
            " WHERE memory_id = ? AND embedding IS NULL",
            [(blob_literal(bytes(blob)), i, i, i) for i, blob in rows],
        )
    return len(rows)
