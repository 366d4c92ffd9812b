"""Erasure: a user's "forget this" removes every trace of the content, everywhere.

Forgetting deletes the entries from the hot file and from cold storage, deletes every
change-log row about them (their before/after images hold the content), and writes one
tombstone row saying what was erased, when and by whom — ids and counts, never content.
``secure_delete`` (set on every connection) overwrites the freed pages, and a WAL checkpoint
afterwards removes the old page images from the write-ahead log, so no byte of a forgotten
value stays in either file.

Forgetting something that is not there changes nothing and writes no tombstone.

If another process holds a read transaction open at that instant, the checkpoint cannot
truncate the write-ahead log and old page images stay in it until the next checkpoint; every
job run ends with one, and SQLite checkpoints when the last connection closes.

Order matters for crash safety: the cold copies go first, then the hot rows and the log in one
commit. A crash in between leaves the entry still in the hot file, so forgetting again
finishes the job; it never leaves the content behind a tombstone that claims it is gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memkeeper.audit import change_row, insert_changes
from memkeeper.clock import to_db
from memkeeper.db import immediate_transaction
from memkeeper.storage import Storage, chunks, placeholders
from memkeeper.transitions import reconcile


def _delete_ids(db, table: str, column: str, ids: Sequence[str]) -> int:
    count = 0
    for part in chunks(list(ids)):
        cursor = db.conn.execute(
            f"DELETE FROM {table} WHERE {column} IN ({placeholders(len(part))})", list(part)
        )
        count += cursor.rowcount
    return count


def erase(
    storage: Storage,
    *,
    find_sql: str,
    params: Sequence[object],
    actor: str,
    now: datetime,
    user_id: str,
    namespace: str | None,
    reason: str,
    whole_user: bool = False,
) -> dict[str, int]:
    """Erase the memories selected by ``find_sql`` (a ``WHERE`` clause valid for both files).

    With ``whole_user``, also the user's messages, episodes and every change-log row about
    them. Returns counts of what was erased.
    """
    with storage.lock:
        with immediate_transaction(storage.hot):
            reconcile(storage)
            ids = [
                row["id"]
                for row in storage.hot.query(f"SELECT id FROM memories WHERE {find_sql}", params)
            ]
            cold = storage.cold(create=False)
            cold_ids: list[str] = []
            if cold is not None:
                cold_ids = [
                    row["id"]
                    for row in cold.query(f"SELECT id FROM cold_memories WHERE {find_sql}", params)
                ]
                if cold_ids:
                    with immediate_transaction(cold):
                        _delete_ids(cold, "cold_memories", "id", cold_ids)
            all_ids = sorted(set(ids) | set(cold_ids))
            counts = {"memories": len(all_ids)}
            _delete_ids(storage.hot, "memories", "id", ids)
            counts["changes"] = _delete_ids(storage.hot, "changes", "memory_id", all_ids)
            if whole_user:
                conn = storage.hot.conn
                counts["messages"] = conn.execute(
                    "DELETE FROM messages WHERE user_id = ?", [user_id]
                ).rowcount
                counts["episodes"] = conn.execute(
                    "DELETE FROM episodes WHERE user_id = ?", [user_id]
                ).rowcount
                counts["changes"] += conn.execute(
                    "DELETE FROM changes WHERE user_id = ?", [user_id]
                ).rowcount
            if any(counts.values()):
                insert_changes(
                    storage.hot,
                    [
                        change_row(
                            at=to_db(now),
                            actor=actor,
                            action="forget",
                            reason=reason,
                            before=None,
                            after=None,
                            user_id=user_id,
                            namespace=namespace,
                            details={"memory_ids": all_ids, "erased": counts},
                        )
                    ],
                )
        storage.checkpoint()
    return counts
