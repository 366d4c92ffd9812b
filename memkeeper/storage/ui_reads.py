"""The reads behind ``memkeeper ui``'s pages that no other command makes: aggregates of the
change log and the uses per day, job runs a page at a time, memories a page at a time, and
each user's counts.

Every statement is written once in SQLite's dialect and runs on PostgreSQL through the
handle's rewriting, like the rest of :mod:`memkeeper.storage`. Nothing here writes. The
caller holds ``storage.lock`` where it shares the connection with other threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memkeeper.storage.handle import Handle

Row = dict[str, Any]

_RUN_FILTERS = frozenset({"job", "status"})
_MEMORY_FILTERS = frozenset({"user_id", "namespace", "kind", "state"})
_MEMORY_TABLES = frozenset({"memories", "cold_memories"})


def _where(filters: Sequence[tuple[str, Any]], allowed: frozenset[str]) -> tuple[str, list[Any]]:
    if any(column not in allowed for column, _ in filters):
        raise ValueError(f"filters are {', '.join(sorted(allowed))}")
    if not filters:
        return "", []
    return " WHERE " + " AND ".join(f"{column} = ?" for column, _ in filters), [
        value for _, value in filters
    ]


def changes_per_day(db: Handle, since: str) -> list[Row]:
    """(day, action, actor, n) of the change-log rows at or after ``since`` (stored time
    text), one row per UTC day, action and actor (which job retired an entry tells why:
    reading each row's image for its reason costs three times as much)."""
    return list(
        db.query(
            "SELECT substr(at, 1, 10) AS day, action, actor, count(*) AS n"
            " FROM changes WHERE at >= ? GROUP BY 1, 2, 3",
            [since],
        )
    )


def uses_per_day(db: Handle, since_day: str) -> list[Row]:
    """(day, n): the recalls counted per UTC day from ``since_day`` (``2027-01-01``) on."""
    return list(
        db.query("SELECT day, sum(count) AS n FROM uses WHERE day >= ? GROUP BY day", [since_day])
    )


def runs_page(
    db: Handle, filters: Sequence[tuple[str, Any]], *, limit: int, offset: int
) -> list[Row]:
    """Job runs matching ``filters`` (job, status), newest first, ``limit`` from ``offset``."""
    where, params = _where(filters, _RUN_FILTERS)
    return list(
        db.query(
            f"SELECT * FROM job_runs{where} ORDER BY started_at DESC, run_id DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
    )


def runs_total(db: Handle, filters: Sequence[tuple[str, Any]]) -> int:
    """How many job runs match ``filters``."""
    where, params = _where(filters, _RUN_FILTERS)
    row = db.execute(f"SELECT count(*) FROM job_runs{where}", params).fetchone()
    return int(row[0] or 0)


def run_row(db: Handle, run_id: str) -> Row | None:
    """One job run's row, or None."""
    rows = list(db.query("SELECT * FROM job_runs WHERE run_id = ?", [run_id]))
    return rows[0] if rows else None


def memories_page(
    db: Handle, table: str, filters: Sequence[tuple[str, Any]], *, limit: int, offset: int
) -> list[Row]:
    """Rows of ``memories`` or ``cold_memories`` matching ``filters``, newest first."""
    if table not in _MEMORY_TABLES:
        raise ValueError(f"not a memory table: {table}")
    where, params = _where(filters, _MEMORY_FILTERS)
    return list(
        db.query(
            f"SELECT * FROM {table}{where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
    )


def memories_total(db: Handle, table: str, filters: Sequence[tuple[str, Any]]) -> int:
    """How many rows of ``memories`` or ``cold_memories`` match ``filters``."""
    if table not in _MEMORY_TABLES:
        raise ValueError(f"not a memory table: {table}")
    where, params = _where(filters, _MEMORY_FILTERS)
    row = db.execute(f"SELECT count(*) FROM {table}{where}", params).fetchone()
    return int(row[0] or 0)


def namespaces_of(db: Handle, table: str, user_id: str) -> list[str]:
    """The namespaces a user has rows in, in ``memories`` or ``cold_memories``."""
    if table not in _MEMORY_TABLES:
        raise ValueError(f"not a memory table: {table}")
    return [
        row["namespace"]
        for row in db.query(
            f"SELECT DISTINCT namespace FROM {table} WHERE user_id = ? ORDER BY namespace",
            [user_id],
        )
    ]


def users_page(db: Handle, *, limit: int, offset: int) -> list[str]:
    """A page of the users with memories in the hot table, by id (through the owner index:
    the first pages stop early)."""
    return [
        row["user_id"]
        for row in db.query(
            "SELECT user_id FROM memories GROUP BY user_id ORDER BY user_id LIMIT ? OFFSET ?",
            [limit, offset],
        )
    ]


def _in(values: Sequence[str]) -> str:
    return ", ".join("?" for _ in values)


def counts_of_users(db: Handle, users: Sequence[str]) -> list[Row]:
    """(user_id, state, kind, n) of the hot memories of ``users``."""
    if not users:
        return []
    return list(
        db.query(
            f"SELECT user_id, state, kind, count(*) AS n FROM memories"
            f" WHERE user_id IN ({_in(users)}) GROUP BY user_id, state, kind",
            list(users),
        )
    )


def cold_counts_of_users(db: Handle, users: Sequence[str]) -> list[Row]:
    """(user_id, n): the entries of ``users`` in cold storage."""
    if not users:
        return []
    return list(
        db.query(
            f"SELECT user_id, count(*) AS n FROM cold_memories"
            f" WHERE user_id IN ({_in(users)}) GROUP BY user_id",
            list(users),
        )
    )


def active_facts_of_users(db: Handle, users: Sequence[str]) -> list[Row]:
    """(user_id, namespace, n): the active facts of ``users`` per namespace, what ``prune``
    caps."""
    if not users:
        return []
    return list(
        db.query(
            f"SELECT user_id, namespace, count(*) AS n FROM memories"
            f" WHERE user_id IN ({_in(users)}) AND kind = 'fact' AND state = 'active'"
            f" GROUP BY user_id, namespace",
            list(users),
        )
    )


def pending_page(db: Handle, user_id: str | None, *, limit: int, offset: int) -> list[Row]:
    """Entries pending review (of one user, if given), the longest waiting first."""
    where, params = _where(
        [("state", "pending_review"), *([("user_id", user_id)] if user_id else [])],
        _MEMORY_FILTERS,
    )
    return list(
        db.query(
            f"SELECT * FROM memories{where} ORDER BY state_since, id LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
    )


def run_changes_page(db: Handle, run_id: str, *, limit: int, offset: int) -> list[Row]:
    """A page of one run's change-log rows, oldest first."""
    return list(
        db.query(
            "SELECT * FROM changes WHERE run_id = ? ORDER BY id LIMIT ? OFFSET ?",
            [run_id, limit, offset],
        )
    )


def run_changes_total(db: Handle, run_id: str) -> int:
    """How many change-log rows one run wrote (still held)."""
    row = db.execute("SELECT count(*) FROM changes WHERE run_id = ?", [run_id]).fetchone()
    return int(row[0] or 0)


def owner_rows(db: Handle, table: str, user_id: str, namespace: str | None) -> int:
    """How many rows of ``messages`` or ``episodes`` a user has (in one namespace, if given):
    what a forget of the user or the namespace erases with the memories."""
    if table not in ("messages", "episodes"):
        raise ValueError(f"not an owner's table: {table}")
    filters = [("user_id", user_id), *([("namespace", namespace)] if namespace is not None else [])]
    where = " AND ".join(f"{column} = ?" for column, _ in filters)
    row = db.execute(
        f"SELECT count(*) FROM {table} WHERE {where}", [value for _, value in filters]
    ).fetchone()
    return int(row[0] or 0)
