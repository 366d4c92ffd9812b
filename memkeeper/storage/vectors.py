"""Embedding vectors of hot entries, one row per entry (migration ``0007_vectors``).

``vectors (memory_id, model, dims, value_hash, vector)``: ``vector`` is ``dims`` float32
numbers, little-endian, unit length; ``value_hash`` is a hash of the text that was embedded
(:func:`embedding_text`: ``key: value``, or the value of a note). A vector is *current* when
its model and dimensions are the configured ones and its hash is the entry's text's: anything
else is stale and re-embedded by the ``index`` job (:func:`stale_entries`), and never
compared (:func:`user_vectors` returns current vectors only, so models and dimensions never
mix).

A row holds no text. ``forget`` deletes the erased entries' rows, and so does the cold purge
(:func:`delete_vectors`); :func:`store_vectors` writes only for entries that still exist, so
an entry erased while its batch was being embedded leaves nothing behind.

``numpy`` is imported by the functions that need it, not with this module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from sqlite_utils import Database

from memkeeper.storage.files import chunks, delete_in, placeholders
from memkeeper.storage.sqlite import immediate_transaction

if TYPE_CHECKING:
    import numpy

CURRENT_STATES = ("active", "pending_review")
"""The states whose entries are embedded (and searched)."""

_HASH_FUNCTION = "memkeeper_text_hash"


def embedding_text(kind: str, key: str | None, value: str) -> str:
    """The text embedded for an entry: ``key: value``, or the value of a note (no key)."""
    if kind == "note" or not key:
        return value
    return f"{key}: {value}"


def text_hash(text: str) -> str:
    """The hash stored with a vector: 128 bits of SHA-256 of the text, in hex."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _entry_hash(kind: str, key: str | None, value: str) -> str:
    return text_hash(embedding_text(kind, key, value))


def stale_entries(db: Database, *, model: str, dims: int, limit: int) -> list[tuple[str, str]]:
    """Up to ``limit`` current hot entries whose vector is missing or stale: (id, text).

    Stale: of another model or dimension, or embedded from another text than the entry's
    key and value now. The caller holds the storage lock (the connection is shared).
    """
    if limit <= 0:
        return []
    conn = db.conn
    conn.create_function(_HASH_FUNCTION, 3, _entry_hash, deterministic=True)
    rows = conn.execute(
        f"""
        SELECT m.id, m.kind, m.key, m.value FROM memories AS m
        LEFT JOIN vectors AS v ON v.memory_id = m.id
        WHERE m.state IN ({placeholders(len(CURRENT_STATES))})
          AND (v.memory_id IS NULL OR v.model != ? OR v.dims != ?
               OR v.value_hash != {_HASH_FUNCTION}(m.kind, m.key, m.value))
        ORDER BY m.rowid
        LIMIT ?
        """,
        [*CURRENT_STATES, model, dims, limit],
    ).fetchall()
    return [(row[0], embedding_text(row[1], row[2], row[3])) for row in rows]


def pack(vector: numpy.ndarray) -> bytes:
    """A vector as stored: float32, little-endian."""
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def unpack(blob: bytes, dims: int) -> numpy.ndarray:
    """A stored vector back (a ValueError when its size is not ``dims`` float32 numbers)."""
    import numpy as np

    if len(blob) != dims * 4:
        raise ValueError(f"a stored vector of {len(blob)} bytes is not {dims} float32 numbers")
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


VectorRow = tuple[str, str, int, str, Any]
"""(memory_id, model, dims, value_hash, vector) — the vector as numpy or packed bytes."""


def store_vectors(db: Database, rows: Iterable[VectorRow]) -> int:
    """Upsert vectors in one short write transaction; returns how many were written.

    A row whose entry no longer exists in the hot file (erased or moved meanwhile) is not
    written. The caller holds the storage lock.
    """
    values = []
    for memory_id, model, dims, value_hash, vector in rows:
        blob = vector if isinstance(vector, bytes) else pack(vector)
        if len(blob) != dims * 4:
            raise ValueError(f"vector of {memory_id} has {len(blob) // 4} dimensions, not {dims}")
        values.append((memory_id, model, dims, value_hash, blob, memory_id))
    if not values:
        return 0
    written = 0
    with immediate_transaction(db):
        for value in values:
            # Replaced, not updated in place: a re-embedded entry gets a new, higher rowid,
            # which is how the merge job finds vectors written since its last run.
            db.conn.execute("DELETE FROM vectors WHERE memory_id = ?", (value[0],))
            written += db.conn.execute(
                "INSERT INTO vectors (memory_id, model, dims, value_hash, vector)"
                " SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM memories WHERE id = ?)",
                value,
            ).rowcount
    return written


def user_vectors(
    db: Database,
    *,
    user_id: str,
    namespaces: Sequence[str],
    model: str,
    dims: int,
    ids: Sequence[str] | None = None,
) -> tuple[list[str], numpy.ndarray]:
    """The current vectors of one user's current hot entries in ``namespaces``.

    Returns (ids, matrix float32 [n, dims]), row i being ids[i]'s unit vector. Only vectors
    of this model and dimension whose text is the entry's text now are returned; entries
    without one are simply absent (the keyword signal still finds them). ``ids`` restricts
    the answer to those entries. The caller holds the storage lock.
    """
    import numpy as np

    empty = (list[str](), np.zeros((0, dims), dtype=np.float32))
    if not namespaces or (ids is not None and not ids):
        return empty
    where = [
        "m.user_id = ?",
        f"m.namespace IN ({placeholders(len(namespaces))})",
        f"m.state IN ({placeholders(len(CURRENT_STATES))})",
        "v.model = ?",
        "v.dims = ?",
    ]
    params: list[Any] = [user_id, *namespaces, *CURRENT_STATES, model, dims]
    found: list[str] = []
    blobs: list[bytes] = []
    for part in [None] if ids is None else chunks(list(ids)):
        clause = list(where)
        extra: list[Any] = []
        if part is not None:
            clause.append(f"m.id IN ({placeholders(len(part))})")
            extra = list(part)
        rows = db.conn.execute(
            "SELECT m.id, m.kind, m.key, m.value, v.value_hash, v.vector FROM memories AS m"
            f" JOIN vectors AS v ON v.memory_id = m.id WHERE {' AND '.join(clause)}"
            " ORDER BY m.id",
            params + extra,
        ).fetchall()
        for memory_id, kind, key, value, value_hash, blob in rows:
            if value_hash == _entry_hash(kind, key, value) and len(blob) == dims * 4:
                found.append(memory_id)
                blobs.append(blob)
    if not found:
        return empty
    matrix = np.frombuffer(b"".join(blobs), dtype="<f4").astype(np.float32).reshape(-1, dims)
    return found, matrix


def delete_vectors(db: Database, memory_ids: Sequence[str]) -> int:
    """Delete the vectors of these entries (the caller holds the transaction). Returns rows."""
    return delete_in(db.conn, "vectors", "memory_id", memory_ids)


def vector_count(db: Database, *, model: str | None = None, dims: int | None = None) -> int:
    """How many vectors are stored (of this model and dimension, when given)."""
    sql, params = "SELECT count(*) FROM vectors WHERE 1", []
    if model is not None:
        sql, params = sql + " AND model = ?", [*params, model]
    if dims is not None:
        sql, params = sql + " AND dims = ?", [*params, dims]
    return int(db.conn.execute(sql, params).fetchone()[0])
