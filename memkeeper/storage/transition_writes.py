"""Writing one batch of transitions' images: the hot rows, the cold rows, their marks.

:func:`memkeeper.storage.transitions.apply` decides what is written (the re-checks, the
change-log rows) and calls these inside its write transaction; they only write. Updates set
only the columns that change, grouped by which ones, so an index is rewritten only when a
column it holds is assigned. On PostgreSQL :func:`one_round_trip` sends a batch's writes
together with the transaction's next statement: a job's batch costs no round trip of its own
for all its statements instead of one per statement, which is most of what a small
transaction costs there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memkeeper.storage.base import Storage
from memkeeper.storage.batches import delete_in
from memkeeper.storage.columns import COLD_COLUMNS, MEMORY_COLUMNS
from memkeeper.storage.transaction import immediate_transaction

if TYPE_CHECKING:
    from memkeeper.storage.transitions import Image, Transition


def _is_cold(image: Image | None) -> bool:
    return image is not None and image["state"] == "cold"


def _is_hot(image: Image | None) -> bool:
    return image is not None and image["state"] != "cold"


def one_round_trip(db: Any) -> contextlib.AbstractContextManager[Any]:
    """Writes that read no result back, inside a transaction: on PostgreSQL sent to the
    server with the transaction's next statement (its ``COMMIT`` at the latest) in one
    round trip, and an error in any of them is raised by that statement, the transaction
    then rolled back (:func:`memkeeper.storage.postgres.round_trips.sent_with_next`);
    nothing on SQLite, which has no round trips."""
    if getattr(db, "dialect", "sqlite") != "postgres":
        return contextlib.nullcontext()
    from memkeeper.storage.postgres.round_trips import sent_with_next

    return sent_with_next(db)


def write_cold(storage: Storage, rows: Sequence[Image], marks: Sequence[str], now: str) -> None:
    """Write ``rows`` (images retired to cold storage) and the in-flight ``marks`` of a move
    (SQLite's two files only; none on one database), under the cold lock on SQLite."""
    cold = storage.cold(create=True)
    assert cold is not None
    # One database (PostgreSQL): the cold rows go in the hot transaction itself, which holds
    # the locks already; a savepoint around them would only cost two more statements.
    with contextlib.nullcontext(cold) if storage.one_database else immediate_transaction(cold):
        storage.check_cold_file(cold)  # under the cold lock: deleted or swapped files refused
        if rows:
            names = ", ".join(COLD_COLUMNS)
            values = ", ".join(f":{c}" for c in COLD_COLUMNS)
            cold.conn.executemany(
                f"INSERT OR REPLACE INTO cold_memories ({names}) VALUES ({values})", rows
            )
        cold.conn.executemany(
            "INSERT OR REPLACE INTO moves_in_flight (id, started_at) VALUES (?, ?)",
            [(memory_id, now) for memory_id in marks],
        )


def clear_cold(storage: Storage, removed: Sequence[str], marks: Sequence[str]) -> None:
    """Delete the cold copies ``removed`` and clear the ``marks`` (a move settled)."""
    cold = storage.cold(create=False)
    if cold is None:
        return
    with immediate_transaction(cold):
        delete_in(cold.conn, "cold_memories", "id", removed)
        delete_in(cold.conn, "moves_in_flight", "id", marks)


def write_hot(storage: Storage, pairs: Sequence[tuple[Transition, Image | None]]) -> None:
    """Write each transition's hot image: delete, update (the changed columns) or insert."""
    conn = storage.hot.conn
    names = ", ".join(MEMORY_COLUMNS)
    values = ", ".join(f":{c}" for c in MEMORY_COLUMNS)
    # Updates set only the columns that change, grouped by which ones: an index is rewritten
    # only when a column it holds is assigned, so this keeps bulk transitions cheap.
    updates: dict[tuple[bool, tuple[str, ...]], list[Image]] = {}
    inserts, deletes = [], []
    for transition, current in pairs:
        target = transition.target
        if _is_hot(current) and _is_hot(target):
            assert current is not None and target is not None
            changed = tuple(c for c in MEMORY_COLUMNS if c != "id" and target[c] != current[c])
            if changed:
                becomes_current = target["state"] in ("active", "pending_review")
                updates.setdefault((becomes_current, changed), []).append(target)
        elif _is_hot(current):
            deletes.append((transition.memory_id,))
        elif _is_hot(target):
            inserts.append({name: target[name] for name in MEMORY_COLUMNS})  # type: ignore[index]
    # Deletes and demotions first, so a new current entry never collides with the old one
    # in the unique index of current keys.
    conn.executemany("DELETE FROM memories WHERE id = ?", deletes)
    for (_, changed), images in sorted(updates.items(), key=lambda item: item[0][0]):
        assignments = ", ".join(f"{c} = :{c}" for c in changed)
        conn.executemany(f"UPDATE memories SET {assignments} WHERE id = :id", images)
    conn.executemany(f"INSERT INTO memories ({names}) VALUES ({values})", inserts)
