"""The conversation messages as the summarize job, undo and the CLI read and mark them.

A message is *unsummarized* until a summary note covers it: then ``summarized_at`` and
``summary_id`` are set (it leaves ``history()``), and the retention step deletes it
``summarized_retention_days`` later. Appending and reading a session's history is the store's
(:mod:`memkeeper.store`); this module holds the statements of the maintenance side.

Readers take the hot database handle and run under the caller's ``storage.lock``; the
markers (:func:`mark_summarized`, :func:`unmark_summarized`) run inside the caller's write
transaction, so the marks commit with the summary note and its change-log rows;
:func:`delete_summarized_batch` is a write transaction of its own. Times are aware
``datetime`` values passed in by the caller (nothing here reads the clock).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memkeeper.clock import to_db
from memkeeper.storage.base import Storage
from memkeeper.storage.batches import chunks, placeholders
from memkeeper.storage.handle import Handle
from memkeeper.storage.transaction import immediate_transaction

_SUMMARIZED_BEFORE = "summarized_at IS NOT NULL AND summarized_at < ?"


def due_sessions(db: Handle, max_messages: int) -> list[dict[str, Any]]:
    """Sessions with more than ``max_messages`` unsummarized messages, longest waiting first.

    Rows of ``user_id``, ``namespace``, ``session_id``, ``n`` (unsummarized) and ``first``
    (their lowest id), through the ``messages_unsummarized`` index.
    """
    return list(
        db.query(
            "SELECT user_id, namespace, session_id, count(*) AS n, min(id) AS first"
            " FROM messages WHERE summarized_at IS NULL"
            " GROUP BY user_id, namespace, session_id HAVING count(*) > ? ORDER BY first",
            [max_messages],
        )
    )


def unsummarized(db: Handle, user_id: str, namespace: str, session_id: str) -> list[dict]:
    """A session's unsummarized messages (id, role, content, created_at), oldest first."""
    return list(
        db.query(
            "SELECT id, role, content, created_at FROM messages WHERE user_id = ?"
            " AND namespace = ? AND session_id = ? AND summarized_at IS NULL"
            " ORDER BY id",
            [user_id, namespace, session_id],
        )
    )


def oldest_unsummarized_ids(
    db: Handle, user_id: str, namespace: str, session_id: str, count: int
) -> list[int]:
    """The ids of a session's ``count`` oldest unsummarized messages."""
    return [
        row["id"]
        for row in db.query(
            "SELECT id FROM messages WHERE user_id = ? AND namespace = ?"
            " AND session_id = ? AND summarized_at IS NULL ORDER BY id LIMIT ?",
            [user_id, namespace, session_id, count],
        )
    ]


def count_unsummarized(db: Handle, ids: Sequence[int]) -> int:
    """How many of the messages ``ids`` are still unsummarized (a commit's re-check)."""
    still = 0
    for part in chunks(list(ids)):
        still += db.execute(
            f"SELECT count(*) FROM messages WHERE id IN ({placeholders(len(part))})"
            " AND summarized_at IS NULL",
            list(part),
        ).fetchone()[0]
    return still


def mark_summarized(db: Handle, ids: Sequence[int], summary_id: str, now: datetime) -> None:
    """Mark the still unsummarized of ``ids`` as covered by note ``summary_id`` at ``now``.

    Runs in the caller's transaction: the marks commit with the note that covers them.
    """
    stamp = to_db(now)
    for part in chunks(list(ids)):
        db.conn.execute(
            "UPDATE messages SET summarized_at = ?, summary_id = ?"
            f" WHERE id IN ({placeholders(len(part))}) AND summarized_at IS NULL",
            [stamp, summary_id, *part],
        )


def unmark_summarized(db: Handle, summary_id: str) -> None:
    """Return the messages note ``summary_id`` covered to the history (undo of a summary).

    Runs in the caller's transaction: the messages come back with the note's removal.
    """
    db.conn.execute(
        "UPDATE messages SET summarized_at = NULL, summary_id = NULL WHERE summary_id = ?",
        [summary_id],
    )


def session_exists(db: Handle, user_id: str, namespace: str, session_id: str) -> bool:
    """Whether the session has any message at all, summarized or not."""
    row = db.execute(
        "SELECT 1 FROM messages WHERE user_id = ? AND namespace = ? AND session_id = ? LIMIT 1",
        [user_id, namespace, session_id],
    ).fetchone()
    return row is not None


def count_summarized_before(db: Handle, cutoff: datetime) -> int:
    """How many messages were summarized before ``cutoff`` (what retention would delete)."""
    row = db.execute(f"SELECT count(*) FROM messages WHERE {_SUMMARIZED_BEFORE}", [to_db(cutoff)])
    return row.fetchone()[0]


def delete_summarized_batch(storage: Storage, cutoff: datetime, size: int) -> int:
    """Delete up to ``size`` messages summarized before ``cutoff``, oldest summary first.

    One write transaction of its own; returns how many rows went (fewer than ``size``: the
    last batch).
    """
    with storage.lock, immediate_transaction(storage.hot):
        cursor = storage.hot.conn.execute(
            f"DELETE FROM messages WHERE id IN (SELECT id FROM messages WHERE {_SUMMARIZED_BEFORE}"
            " ORDER BY summarized_at LIMIT ?)",
            [to_db(cutoff), size],
        )
    return cursor.rowcount
