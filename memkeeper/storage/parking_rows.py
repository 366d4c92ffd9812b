"""The change-log rows summarization's parking reads: a session's failures, parkings,
releases and summaries (:mod:`memkeeper.store.parking` decides what they mean).

A session is named in a row's ``details`` (``session_id``); these rows also carry the user
and namespace, which the change log's indexes serve.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memkeeper.storage.handle import Handle

_SESSION = "json_extract(details, '$.session_id') = ?"


def session_rows(
    db: Handle,
    actions: Sequence[str],
    after: int,
    user_id: str,
    namespace: str,
    session_id: str,
) -> list[dict[str, Any]]:
    """The session's rows of ``actions`` (three: with a single ``action =`` SQLite walks the
    action index across every user) after change ``after``, oldest first."""
    if len(actions) != 3:
        raise ValueError("session_rows reads three actions at once")
    return list(
        db.query(
            "SELECT id, at, action, details FROM changes WHERE action IN (?, ?, ?) AND id > ?"
            f" AND user_id = ? AND namespace = ? AND {_SESSION} ORDER BY id",
            [*actions, after, user_id, namespace, session_id],
        )
    )


def actions_of_memory(db: Handle, memory_id: str) -> list[tuple[int, str]]:
    """(change id, action) of every change-log row of one memory."""
    return [
        (row[0], row[1])
        for row in db.execute("SELECT id, action FROM changes WHERE memory_id = ?", [memory_id])
    ]


def last_summary(db: Handle, after: int, user_id: str, namespace: str, session_id: str) -> int:
    """The id of the session's newest ``summarize`` row after change ``after`` (else 0)."""
    row = db.execute(
        "SELECT max(id) FROM changes WHERE action = 'summarize' AND id > ? AND user_id = ?"
        f" AND namespace = ? AND {_SESSION}",
        [after, user_id, namespace, session_id],
    ).fetchone()
    return int(row[0] or 0)


def rows_of_action(db: Handle, action: str) -> list[dict[str, Any]]:
    """Every row of ``action`` (id, at, user, namespace, details), oldest first."""
    return list(
        db.query(
            "SELECT id, at, user_id, namespace, details FROM changes WHERE action = ? ORDER BY id",
            [action],
        )
    )
