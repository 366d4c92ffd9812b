"""Writing what an erasure reaches in place: the redactions :mod:`memkeeper.storage.derived`
planned, inside the erasure's own transactions.

Kept entries (an agent's note that mentioned the value) get the new text and a ``redact`` row
in the change log, which names no value; change-log rows get redacted images and
``details.redacted_at`` (so ``explain`` says when); messages and episodes get their
redacted texts; the messages of an erased summary are marked unsummarized again (rebuilt by
the next summarize run) or, for a summary forgotten by id, keep their mark without it. The
derived entries themselves are deleted by the caller, with the entries the forget names.
Every statement names the user, so a distributed PostgreSQL routes it to one shard.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from memkeeper.clock import to_db
from memkeeper.storage.changelog import change_row, insert_changes
from memkeeper.storage.derived import Reach


def apply(
    storage: Any,
    reach: Reach,
    *,
    actor: str,
    now: datetime,
    reason: str,
) -> None:
    """Write the redactions of ``reach`` inside the erasure's hot transaction. The cold
    file's are written by :func:`apply_cold`, in the cold commit."""
    hot = storage.hot
    conn = hot.conn
    stamp = to_db(now)
    revived: list[dict[str, Any]] = []
    for memory_id, value in reach.entries.items():
        # Not a confirmation: the entry keeps its times, and so its place in every rule.
        conn.execute(
            "UPDATE memories SET value = ? WHERE id = ? AND user_id = ?",
            [value, memory_id, reach.user_id],
        )
    for memory_id in sorted(reach.revive):
        # An earlier summary of a session whose current one was erased: current again.
        before = reach.images[memory_id]
        after = dict(before, state="active", state_since=stamp)
        conn.execute(
            "UPDATE memories SET state = 'active', state_since = ?"
            " WHERE id = ? AND user_id = ? AND state = 'superseded'",
            [stamp, memory_id, reach.user_id],
        )
        revived.append(
            change_row(
                at=stamp,
                actor=actor,
                action="revive",
                reason="current again: the later summary that had folded it in was erased",
                before=before,
                after=after,
            )
        )
    # The log says an entry was redacted and shows its new image, never the old one.
    rows = [
        change_row(
            at=stamp,
            actor=actor,
            action="redact",
            reason=reason,
            before=None,
            after=dict(reach.images[memory_id], value=value),
            details={"redacted_at": stamp},
        )
        for memory_id, value in [*reach.entries.items(), *reach.cold_entries.items()]
    ] + revived
    for change_id, columns in reach.changes.items():
        details = {**json.loads(columns["details"] or "{}"), "redacted_at": stamp}
        sets = {**columns, "details": json.dumps(details, ensure_ascii=False, sort_keys=True)}
        conn.execute(
            f"UPDATE changes SET {', '.join(f'{c} = ?' for c in sets)}"
            " WHERE id = ? AND user_id = ?",
            [*sets.values(), change_id, reach.user_id],
        )
    insert_changes(hot, rows)
    for message_id, content in reach.messages.items():
        conn.execute(
            "UPDATE messages SET content = ? WHERE id = ? AND user_id = ?",
            [content, message_id, reach.user_id],
        )
    for summary_id in reach.unmark:
        conn.execute(
            "UPDATE messages SET summarized_at = NULL, summary_id = NULL"
            " WHERE summary_id = ? AND user_id = ?",
            [summary_id, reach.user_id],
        )
    for summary_id in reach.detach:
        conn.execute(
            "UPDATE messages SET summary_id = NULL WHERE summary_id = ? AND user_id = ?",
            [summary_id, reach.user_id],
        )
    for episode_id, columns in reach.episodes.items():
        conn.execute(
            f"UPDATE episodes SET {', '.join(f'{c} = ?' for c in columns)}"
            " WHERE id = ? AND user_id = ?",
            [*columns.values(), episode_id, reach.user_id],
        )


def apply_cold(cold: Any, reach: Reach) -> None:
    """Write the cold entries' redactions, inside the cold file's own commit."""
    for memory_id, value in reach.cold_entries.items():
        cold.conn.execute(
            "UPDATE cold_memories SET value = ? WHERE id = ? AND user_id = ?",
            [value, memory_id, reach.user_id],
        )
