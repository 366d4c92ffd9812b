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

import functools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memkeeper.storage.batches import chunks, delete_in, placeholders
from memkeeper.storage.handle import Handle
from memkeeper.storage.transaction import immediate_transaction

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
    """The hash stored with a vector: 128 bits of SHA-256 of the text, in hex. (hashlib is
    imported here, not with the module: ~5 ms that a keyword-only search never needs.)"""
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@functools.lru_cache(maxsize=65536)
def _entry_hash(kind: str, key: str | None, value: str) -> str:
    """The hash of an entry's text, memoized: search checks every vector of a user."""
    return text_hash(embedding_text(kind, key, value))


def stale_entries(db: Handle, *, model: str, dims: int, limit: int) -> list[tuple[str, str]]:
    """Up to ``limit`` current hot entries whose vector is missing or stale: (id, text).

    Stale: of another model or dimension, or embedded from another text than the entry's
    key and value now. The caller holds the storage lock (the connection is shared).
    """
    if limit <= 0:
        return []
    if getattr(db, "dialect", "sqlite") == "postgres":  # no UDF there: the hash in SQL
        from memkeeper.storage.postgres import vectors as pg_vectors

        found = pg_vectors.stale_entries(
            db, states=CURRENT_STATES, model=model, dims=dims, limit=limit
        )
        return [(i, embedding_text(kind, key, value)) for i, kind, key, value in found]
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


def store_vectors(db: Handle, rows: Iterable[VectorRow]) -> int:
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
    # One row per entry, the last one given winning (as replacing them in turn would).
    values = list({value[0]: value for value in values}.values())
    insert = (
        "INSERT INTO vectors (memory_id, model, dims, value_hash, vector)"
        " SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM memories WHERE id = ?)"
    )
    with immediate_transaction(db):
        # Replaced, not updated in place: a re-embedded entry gets a new, higher rowid,
        # which is how the merge job finds vectors written since its last run.
        if getattr(db, "dialect", "sqlite") == "postgres":
            # An identity rowid is never reused: the batch in two statements (each a round
            # trip), not two per vector; the pgvector form and the owner written beside.
            from memkeeper.storage.postgres import vectors as pg_vectors

            db.conn.executemany("DELETE FROM vectors WHERE memory_id = ?", [v[:1] for v in values])
            rows = pg_vectors.insert_values(values)
            return int(db.conn.executemany(pg_vectors.INSERT, rows).rowcount)
        written = 0
        for value in values:  # one by one: SQLite gives a deleted highest rowid out again
            db.conn.execute("DELETE FROM vectors WHERE memory_id = ?", (value[0],))
            written += db.conn.execute(insert, value).rowcount
    return written


EMBEDDINGS_FILLED_PER_RUN = 20_000
"""Vectors given their pgvector form per index run on PostgreSQL (:func:`prepare_index`)."""


def prepare_index(db: Handle, *, model: str, dims: int) -> int:
    """Before the index job embeds: on PostgreSQL, the HNSW index of ``model`` at ``dims``
    (created once) and the pgvector form of vectors written without it (``migrate-to``);
    how many were filled. Nothing on SQLite. The caller holds the storage lock."""
    if getattr(db, "dialect", "sqlite") != "postgres":
        return 0
    from memkeeper.storage.postgres import vectors as pg_vectors
    from memkeeper.storage.postgres.vector_index import ensure_index

    # Outside a transaction, concurrently: writes to vectors go on while it is built.
    # (Run again on a new connection when the server dropped the old one: it creates the
    # index only if missing, and builds again one an interruption left invalid.)
    schema: str = db.schema  # type: ignore[attr-defined]
    db.conn.on_raw(  # type: ignore[attr-defined]
        lambda raw: ensure_index(raw, schema, model, dims, concurrently=True)
    )
    return pg_vectors.fill_embeddings(db, EMBEDDINGS_FILLED_PER_RUN)


def has_vectors(db: Handle) -> bool:
    """Whether the file holds any vector at all (a cheap look, without numpy)."""
    return db.conn.execute("SELECT max(rowid) FROM vectors").fetchone()[0] is not None


def user_vectors(
    db: Handle,
    *,
    user_id: str,
    namespaces: Sequence[str],
    model: str,
    dims: int,
    ids: Sequence[str] | None = None,
    entries: Sequence[tuple[str, str, str | None, str]] | None = None,
    kinds: Sequence[str] | None = None,
) -> tuple[list[str], numpy.ndarray]:
    """The current vectors of one user's current hot entries in ``namespaces``.

    Returns (ids, matrix float32 [n, dims]), row i being ids[i]'s unit vector. Only vectors
    of this model and dimension whose text is the entry's text now are returned; entries
    without one are simply absent (the keyword signal still finds them). ``ids`` restricts
    the answer to those entries; ``entries`` are the user's current entries in those
    namespaces as the caller already read them, ``(id, kind, key, value)``, to spare the
    read. ``kinds`` keeps only entries of those kinds in the answer (the vectors read and
    kept per process stay the user's all, so one cache serves every filter). The caller
    holds the storage lock.
    """
    import numpy as np

    empty = (list[str](), np.zeros((0, dims), dtype=np.float32))
    if not namespaces or (ids is not None and not ids):
        return empty
    generation = db.conn.execute("SELECT max(rowid) FROM vectors").fetchone()[0]
    if generation is None:
        return empty
    current: list[tuple[str, str]] = []  # (id, hash of its text now), in id order
    allowed: set[str] | None = None if kinds is None else set()
    if entries is not None:
        current = [(i, _entry_hash(kind, key, value)) for i, kind, key, value in entries]
        if allowed is not None:
            allowed.update(i for i, kind, _, _ in entries if kind in kinds)
    for part in [] if entries is not None else [None] if ids is None else chunks(list(ids)):
        clause = [
            "user_id = ?",
            f"namespace IN ({placeholders(len(namespaces))})",
            f"state IN ({placeholders(len(CURRENT_STATES))})",
        ]
        params: list[Any] = [user_id, *namespaces, *CURRENT_STATES]
        if part is not None:
            clause.append(f"id IN ({placeholders(len(part))})")
            params += list(part)
        for memory_id, kind, key, value in db.conn.execute(
            f"SELECT id, kind, key, value FROM memories WHERE {' AND '.join(clause)}",
            params,
        ):
            current.append((memory_id, _entry_hash(kind, key, value)))
            if allowed is not None and kind in kinds:
                allowed.add(memory_id)
    current.sort()
    cache_key = (user_id, tuple(namespaces), model, dims)
    cached = _cached(db, cache_key, generation) if ids is None else None
    if cached is None or not _still_valid(db, cached, current, model, dims):
        cached = _read_vectors(db, [i for i, _ in current], model, dims, generation)
        if ids is None:
            _remember(db, cache_key, cached)
    found = [
        i
        for i, digest in current
        if cached.hashes.get(i) == digest and (allowed is None or i in allowed)
    ]
    if not found:
        return empty
    return found, cached.matrix[[cached.rows[i] for i in found]]


def _still_valid(
    db: Handle, cached: _Vectors, current: list[tuple[str, str]], model: str, dims: int
) -> bool:
    """Whether ``cached`` holds every current vector of these entries: each was looked at
    when it was read, none was re-embedded since (its text hash), and none of those that
    had no vector has one now (a rowid can be reused, so the generation alone is not enough)."""
    without: list[str] = []
    for memory_id, digest in current:
        if memory_id not in cached.checked:
            return False
        held = cached.hashes.get(memory_id)
        if held is None:
            without.append(memory_id)
        elif held != digest:
            return False  # changed since: re-read, in case it was re-embedded meanwhile
    for part in chunks(without):
        found = db.conn.execute(
            "SELECT 1 FROM vectors WHERE model = ? AND dims = ?"
            f" AND memory_id IN ({placeholders(len(part))}) LIMIT 1",
            [model, dims, *part],
        ).fetchone()
        if found:
            return False
    return True


@dataclass(frozen=True)
class _Vectors:
    """A user's vectors as read at ``generation`` (the vectors table's highest rowid)."""

    generation: int
    checked: frozenset[str]  # the entries looked for when it was read
    hashes: dict[str, str]  # memory id: the hash of the text its vector was made from
    rows: dict[str, int]  # memory id: its row in matrix
    matrix: numpy.ndarray


CACHE_USERS = 32
"""Users whose vectors each open database keeps in memory (see :func:`user_vectors`)."""

_cache_lock = threading.Lock()
_caches: weakref.WeakKeyDictionary[Handle, OrderedDict[tuple[Any, ...], _Vectors]] = (
    weakref.WeakKeyDictionary()
)


def _cached(db: Handle, key: tuple[Any, ...], generation: int) -> _Vectors | None:
    with _cache_lock:
        users = _caches.get(db)
        found = users.get(key) if users is not None else None
        if found is None or found.generation != generation:
            return None
        users.move_to_end(key)  # type: ignore[union-attr]
        return found


def _remember(db: Handle, key: tuple[Any, ...], vectors: _Vectors) -> None:
    with _cache_lock:
        users = _caches.setdefault(db, OrderedDict())
        users[key] = vectors
        while len(users) > CACHE_USERS:
            users.popitem(last=False)


def _read_vectors(
    db: Handle, memory_ids: list[str], model: str, dims: int, generation: int
) -> _Vectors:
    """These entries' vectors of this model and dimension (blobs of another size skipped)."""
    # Not "the caller's text hash": an entry whose text changed has a stale vector, which
    # user_vectors leaves out by comparing hashes.
    import numpy as np

    hashes: dict[str, str] = {}
    blobs: list[bytes] = []
    rows: dict[str, int] = {}
    for part in chunks(memory_ids):
        for memory_id, value_hash, blob in db.conn.execute(
            "SELECT memory_id, value_hash, vector FROM vectors WHERE model = ? AND dims = ?"
            f" AND memory_id IN ({placeholders(len(part))})",
            [model, dims, *part],
        ):
            if len(blob) == dims * 4:
                rows[memory_id] = len(blobs)
                hashes[memory_id] = value_hash
                blobs.append(blob)
    matrix = np.frombuffer(b"".join(blobs), dtype="<f4").astype(np.float32).reshape(-1, dims)
    return _Vectors(generation, frozenset(memory_ids), hashes, rows, matrix)


def delete_vectors(db: Handle, memory_ids: Sequence[str]) -> int:
    """Delete the vectors of these entries (the caller holds the transaction). Returns rows."""
    return delete_in(db.conn, "vectors", "memory_id", memory_ids)


def vector_count(db: Handle, *, model: str | None = None, dims: int | None = None) -> int:
    """How many vectors are stored (of this model and dimension, when given)."""
    sql, params = "SELECT count(*) FROM vectors WHERE 1 = 1", []
    if model is not None:
        sql, params = sql + " AND model = ?", [*params, model]
    if dims is not None:
        sql, params = sql + " AND dims = ?", [*params, dims]
    return int(db.conn.execute(sql, params).fetchone()[0])
