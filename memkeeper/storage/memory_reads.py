"""The store's reads of memory rows: by key, by id, by owner (hot, then cold storage).

One function per question the agents' API asks (recall, remember's plan, listing, import's
"is this stored already?"), so the SQL lives here and runs on either backend. Each returns
rows as dicts (``image_of`` makes them images); none of them writes. The caller holds the
storage lock (the connection is shared by the store's threads).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memkeeper.storage.batches import chunks, placeholders
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


def live_by_key_selection(
    user_id: str, namespace: str, key: str, kinds: Sequence[str]
) -> tuple[str, list[Any]]:
    """:func:`live_by_key`'s selection (its ``WHERE`` condition, order and limit) and its
    parameters, for a statement that marks what it selects
    (:func:`memkeeper.storage.uses.mark_in_one_trip`)."""
    selection = _LIVE_BY_KEY.format(placeholders(len(kinds))).split(" WHERE ", 1)[1]
    return selection, [user_id, namespace, key, *kinds]


def live_by_ids_selection(ids: Sequence[str], users: Sequence[str]) -> tuple[str, list[Any]]:
    """:func:`live_by_ids`' selection and parameters (see :func:`live_by_key_selection`),
    narrowed to the rows of ``users`` (whose the ids are)."""
    return (
        f"id IN ({placeholders(len(ids))}) AND user_id IN ({placeholders(len(users))})"
        " AND state IN ('active', 'pending_review')",
        [*ids, *users],
    )


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


_CURRENT_AND_SUPERSEDED = (
    "SELECT found.*, erased.blocked FROM (SELECT EXISTS (SELECT 1 FROM erased_values"
    " WHERE user_digest = ?) AS blocked) AS erased LEFT JOIN ("
    "SELECT * FROM (SELECT * FROM memories WHERE user_id = ? AND namespace = ? AND kind = ?"
    " AND key = ? AND state IN ('active', 'pending_review') LIMIT 1) AS current_value"
    " UNION ALL SELECT * FROM (SELECT * FROM memories WHERE user_id = ? AND namespace = ?"
    " AND kind = ? AND key = ? AND state = 'superseded' AND value = ?"
    " ORDER BY updated_at DESC LIMIT 1) AS earlier_value) AS found ON 1 = 1"
)


def current_and_superseded(
    db: Handle, user_id: str, namespace: str, kind: str, key: str, value: str
) -> tuple[Row | None, Row | None, bool]:
    """:func:`current_value` and :func:`superseded_with_value` of one key in one statement
    (what ``remember`` plans on): on PostgreSQL one round trip, not two. Each half keeps its
    own index (the unique index of current keys; the owner's superseded rows). The third
    answer says whether a value of the user was ever erased
    (:mod:`memkeeper.storage.erased_values`), so that the check of the value costs nothing
    for everyone else."""
    from memkeeper.storage.erased_values import user_digest

    owner = [user_id, namespace, kind, key]
    current = earlier = None
    blocked = False
    for row in db.query(_CURRENT_AND_SUPERSEDED, [user_digest(user_id), *owner, *owner, value]):
        blocked = bool(row["blocked"])
        if row["id"] is None:
            continue
        if row["state"] == "superseded":
            earlier = row
        else:
            current = row
    return current, earlier, blocked


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


def rows_by_ids(db: Handle, table: str, ids: Sequence[str]) -> dict[str, Row]:
    """The whole rows of ``ids`` in ``memories`` or ``cold_memories``, by id (in chunks)."""
    if table not in ("memories", "cold_memories"):
        raise ValueError(f"not a memory table: {table}")
    found: dict[str, Row] = {}
    for part in chunks(list(ids)):
        sql = f"SELECT * FROM {table} WHERE id IN ({placeholders(len(part))})"
        found.update((row["id"], row) for row in db.query(sql, list(part)))
    return found


def owned_live_columns(
    db: Handle,
    table: str,
    columns: Sequence[str],
    ids: Sequence[str],
    user_id: str,
    namespaces: Sequence[str],
    kinds: Sequence[str],
    live_states: Sequence[str],
) -> list[Row]:
    """``columns`` of the rows of ``ids`` that belong to the user, namespaces and kinds and
    are live: in ``memories`` in one of ``live_states``, in ``cold_memories`` retired as the
    current value (not superseded)."""
    if table not in ("memories", "cold_memories"):
        raise ValueError(f"not a memory table: {table}")
    hot = table == "memories"
    states = (
        f"state IN ({placeholders(len(live_states))})"
        if hot
        else ("state = 'cold' AND cold_reason != 'superseded'")
    )
    found: list[Row] = []
    for part in chunks(list(dict.fromkeys(ids))):
        params = [*part, user_id, *namespaces, *kinds, *(live_states if hot else ())]
        rows = db.conn.execute(
            f"SELECT {', '.join(columns)} FROM {table} WHERE id IN ({placeholders(len(part))})"
            f" AND user_id = ? AND namespace IN ({placeholders(len(namespaces))})"
            f" AND kind IN ({placeholders(len(kinds))}) AND {states}",
            params,
        ).fetchall()
        found += [dict(zip(columns, row, strict=True)) for row in rows]
    return found


def live_keys(
    db: Handle, user_id: str, keys: Sequence[str], live_states: Sequence[str]
) -> set[tuple[str, str]]:
    """(namespace, key) of the user's live hot rows among ``keys``."""
    found: set[tuple[str, str]] = set()
    for part in chunks(list(dict.fromkeys(keys))):
        for row in db.query(
            "SELECT namespace, key FROM memories WHERE user_id = ?"
            f" AND key IN ({placeholders(len(part))})"
            f" AND state IN ({placeholders(len(live_states))})",
            [user_id, *part, *live_states],
        ):
            found.add((row["namespace"], row["key"]))
    return found


def active_profile_and_project(
    db: Handle, user_id: str, namespace: str, min_confidence: float
) -> list[Row]:
    """The user's active entries of ``namespace`` and of the profile (namespace ``''``) with
    at least ``min_confidence``: what a context's prefill ranks."""
    return list(
        db.query(
            "SELECT * FROM memories WHERE user_id = ? AND namespace IN (?, '')"
            " AND kind IN ('fact', 'preference', 'note') AND state = 'active'"
            " AND confidence >= ?",
            [user_id, namespace, min_confidence],
        )
    )


def counts_by_state_and_kind(hot: Handle, cold: Handle | None) -> dict[str, dict[str, int]]:
    """How many memories of each kind are in each state (``cold``: cold storage's)."""
    found: dict[str, dict[str, int]] = {}
    for row in hot.query("SELECT state, kind, count(*) AS n FROM memories GROUP BY state, kind"):
        found.setdefault(row["state"], {})[row["kind"]] = int(row["n"])
    if cold is not None:
        for row in cold.query("SELECT kind, count(*) AS n FROM cold_memories GROUP BY kind"):
            found.setdefault("cold", {})[row["kind"]] = int(row["n"])
    return found
