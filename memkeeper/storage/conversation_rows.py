"""Rows of conversations: a session's messages and a project's episodes (no change log).

The agents' API appends them and reads a session's unsummarized messages and a project's
recent episodes; the summarize job's reads and marks are in :mod:`memkeeper.storage.messages`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memkeeper.storage.batches import chunks, placeholders
from memkeeper.storage.handle import Handle
from memkeeper.storage.transaction import write_transaction

_TABLES = frozenset({"messages", "episodes"})


def append(storage: Any, table: str, row: dict[str, Any]) -> dict[str, Any]:
    """Insert ``row`` (column: value, memkeeper's own column names) into ``messages`` or
    ``episodes`` in one short transaction; returns the row as stored (its id, defaults)."""
    if table not in _TABLES:
        raise ValueError(f"not a conversation table: {table}")
    sql = f"INSERT INTO {table} ({', '.join(row)}) VALUES ({placeholders(len(row))}) RETURNING *"
    with write_transaction(storage, users=[row["user_id"]]) as hot:
        # Read the RETURNING row to the end before the commit: the statement is then done.
        [stored] = list(hot.query(sql, list(row.values())))
    return stored


def unsummarized(
    db: Handle, user_id: str, namespace: str, session_id: str, limit: int | None
) -> list[dict[str, Any]]:
    """A session's messages not yet summarized, the newest first (``limit`` of them)."""
    sql = (
        "SELECT * FROM messages WHERE user_id = ? AND namespace = ? AND session_id = ?"
        " AND summarized_at IS NULL ORDER BY id DESC"
    )
    params: list[Any] = [user_id, namespace, session_id]
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return list(db.query(sql, params))


def recent_episodes(db: Handle, user_id: str, namespace: str, limit: int) -> list[dict[str, Any]]:
    """A project's newest ``limit`` episodes, the newest first."""
    return list(
        db.query(
            "SELECT * FROM episodes WHERE user_id = ? AND namespace = ?"
            " ORDER BY created_at DESC, id DESC LIMIT ?",
            [user_id, namespace, limit],
        )
    )


def by_ids(db: Handle, ids: Sequence[int]) -> list[dict[str, Any]]:
    """The messages of ``ids`` still held (id, role, content, created_at), in chunks."""
    found: list[dict[str, Any]] = []
    for part in chunks(list(ids)):
        found += db.query(
            "SELECT id, role, content, created_at FROM messages"
            f" WHERE id IN ({placeholders(len(part))})",
            list(part),
        )
    return found


def counts(db: Handle) -> tuple[int, int, int]:
    """(messages, of them unsummarized, episodes) of the whole database."""
    messages = db.execute("SELECT count(*), count(*) - count(summarized_at) FROM messages")
    total, unsummarized = messages.fetchone()
    episodes = db.execute("SELECT count(*) FROM episodes").fetchone()[0]
    return int(total), int(unsummarized), int(episodes)
