"""Conversations: a session's messages and a project's episodes (its task timeline).

Messages and episodes are plain rows, not memory entries: they have no states and no change
log. ``history`` returns only the messages the summarize job has not yet folded into a
summary note; undoing that summary unmarks them (:mod:`memkeeper.maintenance.undo`).
"""

from __future__ import annotations

from typing import Any

from memkeeper import validation
from memkeeper.clock import to_db
from memkeeper.records import Episode, Message
from memkeeper.storage import conversation_rows
from memkeeper.store.core import StoreCore


def _insert(core: StoreCore, table: str, row: dict[str, Any]) -> dict[str, Any]:
    """Insert ``row`` into ``table``; returns the row as stored (its id and defaults too)."""
    return conversation_rows.append(core.storage, table, row)


def append_message(
    core: StoreCore, user_id: str, session_id: str, role: str, content: str, *, namespace: str
) -> Message:
    """Append one message to a session's conversation history."""
    user_id, namespace = core.owner(user_id, namespace)
    row = {
        "user_id": user_id,
        "namespace": namespace,
        "session_id": validation.identifier(
            "session_id", session_id, max_chars=core.config.limits.max_key_chars
        ),
        "role": validation.role(role),
        "content": core.value("content", content),
        "created_at": to_db(core.now()),
    }
    return Message.from_row(_insert(core, "messages", row))


def record_episode(
    core: StoreCore,
    user_id: str,
    task_name: str,
    *,
    namespace: str,
    input_summary: str,
    output_summary: str,
    user_feedback: str,
    status: str,
) -> Episode:
    """Record one task's episode: what went in, what came out, what the user changed."""
    user_id, namespace = core.owner(user_id, namespace)
    limit = core.config.limits.max_value_bytes
    row = {
        "user_id": user_id,
        "namespace": namespace,
        "task_name": validation.text("task_name", task_name, max_bytes=1024),
        "input_summary": validation.text(
            "input_summary", input_summary, max_bytes=limit, allow_empty=True
        ),
        "output_summary": validation.text(
            "output_summary", output_summary, max_bytes=limit, allow_empty=True
        ),
        "user_feedback": validation.text(
            "user_feedback", user_feedback, max_bytes=limit, allow_empty=True
        ),
        "status": validation.episode_status(status),
        "created_at": to_db(core.now()),
    }
    return Episode.from_row(_insert(core, "episodes", row))


def history(
    core: StoreCore, user_id: str, session_id: str, *, namespace: str, limit: int | None
) -> list[Message]:
    """A session's unsummarized messages, oldest first (the newest ``limit`` if given)."""
    user_id, namespace = core.owner(user_id, namespace)
    core.lookup(("session_id", session_id))
    count = core.limit(limit) if limit is not None else None
    with core.storage.lock:
        rows = conversation_rows.unsummarized(
            core.storage.hot, user_id, namespace, session_id, count
        )
    return [Message.from_row(row) for row in reversed(rows)]


def episodes(core: StoreCore, user_id: str, *, namespace: str, limit: int) -> list[Episode]:
    """The project's most recent ``limit`` episodes, in time order (a timeline)."""
    user_id, namespace = core.owner(user_id, namespace)
    with core.storage.lock:
        rows = conversation_rows.recent_episodes(
            core.storage.hot, user_id, namespace, core.limit(limit)
        )
    return [Episode.from_row(row) for row in reversed(rows)]
