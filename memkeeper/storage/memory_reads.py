"""The store's reads of memory rows: by key, by id, by owner (hot, then cold storage).

One function per question the agents' API asks (recall, remember's plan, listing, import's
"is this stored already?"), so the SQL lives here and runs on either backend. Each returns
rows as dicts (``image_of`` makes them images); none of them writes. The caller holds the
storage lock (the connection is shared by the store's threads).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memkeeper.storage.files import placeholders
from memkeeper.storage.handle import Handle

Row = dict[str, Any]

_LIVE_BY_KEY = (
    "SELECT * FROM memories WHERE user_id = ? AND namespace = ? AND key = ?"
    " AND kind IN ({}) AND state IN ('active', 'pending_review') ORDER BY last_used_at DESC"
    " LIMIT 1"
)
# The value current when it was retired wins over superseded ones, then the newest.
_COLD_BY_KEY = (
    "SELECT * FROM cold_memories WHERE user_id = ? AND namespace = ? AND key = ?"
    " AND kind IN ({}) ORDER BY cold_reason = 'superseded', updated_at DESC LIMIT 1"
)


def _first(db: Handle, sql: str, params: Sequence[Any]) -> Row | None:
    return next(iter(db.query(sql, list(params))), None)


def live_by_key(
    db: Handle, user_id: str, namespace: str, key: str, kinds: Sequence[str]
) -> Row | None:
    """The live (active or pending review) row of ``key`` of one of ``kinds``, the most
    recently used first, or None."""
    sql = _LIVE_BY_KEY.format(placeholders(len(kinds)))
    return _first(db, sql, [user_id, namespace, key, *kinds])


def cold_by_key(
    cold: Handle, user_id: str, namespace: str, key: str, kinds: Sequence[str]
) -> Row | None:
    """The cold row recall would bring back for ``key``, or None."""
    sql = _COLD_BY_KEY.format(placeholders(len(kinds)))
    return _first(cold, sql, [user_id, namespace, key, *kinds])


def live_by_ids(db: Handle, ids: Sequence[str]) -> list[Row]:
    """The rows of ``ids`` that are still live (active or pending review)."""
    return list(
        db.query(
            f"SELECT * FROM memories WHERE id IN ({placeholders(len(ids))})"
            " AND state IN ('active', 'pending_review')",
            list(ids),
        )
    )


def current_value(db: Handle, user_id: str, namespace: str, kind: str, key: str) -> Row | None:
    """The row that is the current value of ``key`` of ``kind`` (active or pending review)."""
    return _first(
        db,
        "SELECT * FROM memories WHERE user_id = ? AND namespace = ? AND kind = ? AND key = ?"
        " AND state IN ('active', 'pending_review')",
        [user_id, namespace, kind, key],
    )


def superseded_with_value(
    db: Handle, user_id: str, namespace: str, kind: str, key: str, value: str
) -> Row | None:
    """The newest superseded row of ``key`` that holds ``value`` (in its grey period)."""
    return _first(
        db,
        "SELECT * FROM memories WHERE user_id = ? AND namespace = ? AND kind = ? AND key = ?"
        " AND state = 'superseded' AND value = ? ORDER BY updated_at DESC LIMIT 1",
        [user_id, namespace, kind, key, value],
    )


def _owner_filter(filters: Sequence[tuple[str, Any]]) -> tuple[str, list[Any]]:
    """`` WHERE a = ? AND b = ?`` of the given (column, value) pairs (memkeeper's own
    column names); empty when there are none."""
    if not filters:
        return "", []
    return " WHERE " + " AND ".join(f"{column} = ?" for column, _ in filters), [
        value for _, value in filters
    ]


_FILTER_COLUMNS = frozenset({"user_id", "namespace", "kind", "state"})


def listed(db: Handle, table: str, filters: Sequence[tuple[str, Any]]) -> list[Row]:
    """Rows of ``memories`` or ``cold_memories`` matching ``filters`` (column, value), the
    oldest first."""
    if table not in ("memories", "cold_memories"):
        raise ValueError(f"not a memory table: {table}")
    if any(column not in _FILTER_COLUMNS for column, _ in filters):
        raise ValueError("listing filters are user_id, namespace, kind and state")
    where, params = _owner_filter(filters)
    return list(db.query(f"SELECT * FROM {table}{where} ORDER BY created_at, id", params))


def note_exists(
    db: Handle, table: str, user_id: str, namespace: str, value: str, created_at: str | None
) -> bool:
    """Whether ``table`` holds a note of the owner with ``value`` (created at
    ``created_at``, when given)."""
    if table not in ("memories", "cold_memories"):
        raise ValueError(f"not a memory table: {table}")
    params: list[Any] = [user_id, namespace, value]
    where = "user_id = ? AND namespace = ? AND kind = 'note' AND value = ?"
    if created_at is not None:
        where += " AND created_at = ?"
        params.append(created_at)
    return _first(db, f"SELECT 1 FROM {table} WHERE {where} LIMIT 1", params) is not None
