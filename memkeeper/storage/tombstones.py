"""Tombstones: what was erased, as hashes, kept forever (migration ``0008_tombstones``).

A forget removes every byte of the erased content from both files
(:mod:`memkeeper.storage.forgetting`), but copies made before it — a backup, a file an
extraction read earlier — still hold it. A tombstone lets such a copy be brought in line
later (``memkeeper backup --prune-forgotten``) and lets anything that re-imports memories
refuse an erased one, without keeping what was erased: a row holds the scope and the
sha256 of the scope's identity, never the identity itself and never a value.

Identities, joined by the unit separator (``\\x1f``) after the scope name:

* ``memory``: (memory_id,) — one erased entry;
* ``key``: (user_id, namespace, key) — every value a key ever had;
* ``user``: (user_id,) — everything about a user.

Rows are written by :func:`memkeeper.storage.forgetting.erase`, in the erasure's own commit,
for every forget that erased something (a forget that finds nothing changes nothing). A
whole-user forget writes one ``user`` row; a key forget a ``key`` row and a ``memory`` row per
erased id; a forget by id a ``memory`` row, and a ``key`` row for a fact or preference.

A hash of a user id or key is not anonymous against someone who can guess the identity (a
short user id can be confirmed by hashing it); it is stored because without it an erased
memory would come back with the next restore. Rows are tiny and never deleted.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memkeeper.clock import from_db, to_db
from memkeeper.storage.handle import Handle

SCOPES = ("memory", "key", "user")
_ARITY = {"memory": 1, "key": 3, "user": 1}
_SEPARATOR = "\x1f"

Connection = Any
"""A driver's connection (``sqlite3``'s on SQLite) or a :data:`Handle`: the functions below
take either (an erasure passes its handle's ``conn``, inside its own transaction)."""


@dataclass(frozen=True)
class Tombstone:
    """One recorded erasure: its scope, the digest of the scope's identity, and when."""

    scope: str
    digest: str
    erased_at: datetime


def _check(scope: str, parts: tuple[str, ...]) -> None:
    if scope not in _ARITY:
        raise ValueError(f"tombstone scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    if len(parts) != _ARITY[scope]:
        raise ValueError(f"a {scope!r} tombstone needs {_ARITY[scope]} parts, got {len(parts)}")


def digest_of(scope: str, *parts: str) -> str:
    """The sha256 hex of ``scope`` and ``parts`` joined by ``\\x1f`` (see the module doc)."""
    _check(scope, parts)
    return joined_digest(scope, *parts)


def joined_digest(*parts: str) -> str:
    """The sha256 hex of ``parts`` joined by ``\\x1f``: how a tombstone names what it holds,
    and :mod:`memkeeper.storage.erased_values` the namespace a value is blocked in."""
    text = _SEPARATOR.join(parts)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _connection(conn: Connection | Handle) -> Connection:
    return conn.conn if isinstance(conn, Handle) else conn


def record(conn: Connection | Handle, scope: str, parts: tuple[str, ...], now: datetime) -> None:
    """Insert one tombstone inside the caller's open transaction (it commits with the erasure)."""
    _connection(conn).execute(
        "INSERT INTO tombstones (scope, digest, erased_at) VALUES (?, ?, ?)",
        [scope, digest_of(scope, *parts), to_db(now)],
    )


def is_tombstoned(conn: Connection | Handle, scope: str, parts: tuple[str, ...]) -> bool:
    """True when an erasure of exactly this scope and identity was recorded."""
    row = (
        _connection(conn)
        .execute(
            "SELECT 1 FROM tombstones WHERE scope = ? AND digest = ? LIMIT 1",
            [scope, digest_of(scope, *parts)],
        )
        .fetchone()
    )
    return row is not None


def erased_at(conn: Connection | Handle, scope: str, parts: tuple[str, ...]) -> datetime | None:
    """When this scope and identity was last erased (None: never)."""
    row = (
        _connection(conn)
        .execute(
            "SELECT max(erased_at) FROM tombstones WHERE scope = ? AND digest = ?",
            [scope, digest_of(scope, *parts)],
        )
        .fetchone()
    )
    return from_db(row[0]) if row and row[0] else None


def since(conn: Connection | Handle, after: datetime | None) -> list[Tombstone]:
    """Tombstones recorded after ``after`` (all of them for None), oldest first."""
    sql = "SELECT scope, digest, erased_at FROM tombstones"
    params: list[Any] = []
    if after is not None:
        sql += " WHERE erased_at > ?"
        params.append(to_db(after))
    rows = _connection(conn).execute(sql + " ORDER BY erased_at, id", params).fetchall()
    return [_tombstone(row) for row in rows]


def _tombstone(row: tuple[str, str, str]) -> Tombstone:
    erased_at = from_db(row[2])
    assert erased_at is not None  # NOT NULL in the schema
    return Tombstone(row[0], row[1], erased_at)


def copy_in(conn: Connection | Handle, tombstones: list[Tombstone]) -> None:
    """Insert tombstones recorded elsewhere (another copy of the database), inside the
    caller's transaction, keeping their digests and times."""
    _connection(conn).executemany(
        "INSERT INTO tombstones (scope, digest, erased_at) VALUES (?, ?, ?)",
        [(t.scope, t.digest, to_db(t.erased_at)) for t in tombstones],
    )
