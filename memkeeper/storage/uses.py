"""Uses: recalls of active entries, recorded in place and counted per entry and UTC day.

A recall of an active entry is a use, not a state change. It updates the entry's use columns
in place (``last_accessed_at``, ``access_count`` and the derived ``last_used_at``, exactly as
:func:`~memkeeper.storage.transitions.used_image` computes them) and adds one to the entry's
row of the day in ``uses`` (``memory_id, day, count, first_at, last_at``) — one ``UPDATE``
and one upsert in the caller's short write transaction, with no change-log row and no
images. ``day`` is the UTC date (``2026-03-01``); ``first_at`` and ``last_at`` are the first
and last use's UTC time of that day (``08:00:00.000000``), to the microsecond, so that a row
costs under 80 bytes of file: a recall costs that much at most (an entry recalled once a
day), and nearly nothing when an entry is recalled many times a day. State changes (a recall that
renews a pending-review entry or brings one back from cold storage) stay logged transitions.

What stays exact:

* every rule (expiry, demotion, pruning) reads the memories row, which is updated in place;
* a job's transition compares the entry's whole current image with the one it selected, so
  a recall between selection and apply changes ``access_count`` and the agent wins, as
  before; so does ``undo`` (an entry recalled since the run is a conflict);
* the change log plus this table give each entry's exact state: a logged image's
  ``access_count`` includes every use before it, and the uses after the entry's last logged
  image are the table's total minus those (``tests/helpers/state.py`` replays it so).

A row holds ids and times only, never content; ``forget`` deletes an erased entry's rows.

A store may buffer its uses instead (:mod:`memkeeper.storage.use_buffer`, the MCP server's
stores do): :func:`record_uses` then writes many at once, leaving the row and the table as
the same calls of :func:`mark_used` would, and every transition of this process writes the
buffer first, so all of the above still holds within the process; another process sees a
use at most one flush interval late.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memkeeper.clock import from_db, to_db
from memkeeper.storage.batches import delete_in, placeholders
from memkeeper.storage.changelog import image_of
from memkeeper.storage.handle import Handle
from memkeeper.storage.transitions import Image, used_image

_UPSERT_MANY = (
    "INSERT INTO uses (memory_id, day, count, first_at, last_at) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (memory_id, day) DO UPDATE SET count = uses.count + excluded.count,"
    " first_at = min(uses.first_at, excluded.first_at),"
    " last_at = max(uses.last_at, excluded.last_at)"
)
_UPSERT = (
    "INSERT INTO uses (memory_id, day, count, first_at, last_at) VALUES (?, ?, 1, ?, ?)"
    " ON CONFLICT (memory_id, day) DO UPDATE SET count = uses.count + 1,"
    " first_at = min(uses.first_at, excluded.first_at),"
    " last_at = max(uses.last_at, excluded.last_at)"
)


def _with_the_commit(db: Handle) -> contextlib.AbstractContextManager[Any]:
    """A use's writes read nothing back: on PostgreSQL they go to the server with the
    caller's next statement, its ``COMMIT`` at the latest, in that round trip
    (:func:`memkeeper.storage.postgres.round_trips.sent_with_next`); SQLite has no round
    trips."""
    if getattr(db, "dialect", "sqlite") != "postgres":
        return contextlib.nullcontext()
    from memkeeper.storage.postgres.round_trips import sent_with_next

    return sent_with_next(db)


@dataclass(frozen=True)
class UseDay:
    """The recalls of one entry on one UTC day: how many, the first and the last."""

    day: str
    count: int
    first_at: datetime
    last_at: datetime

    @classmethod
    def from_row(cls, row: Any) -> UseDay:
        first = from_db(stamp_of(row["day"], row["first_at"]))
        last = from_db(stamp_of(row["day"], row["last_at"]))
        assert first is not None and last is not None
        return cls(row["day"], int(row["count"]), first, last)


def day_and_time(moment: datetime) -> tuple[str, str]:
    """``moment`` as a row of ``uses`` holds it: the UTC day and the time of day."""
    stamp = to_db(moment)  # 2026-03-01T08:00:00.000000+00:00
    return stamp[:10], stamp[11:26]


def stamp_of(day: str, time_of_day: str) -> str:
    """The stored time (as :func:`memkeeper.clock.to_db` writes it) of a ``uses`` time."""
    return f"{day}T{time_of_day}+00:00"


def mark_used(db: Handle, image: Image, now: datetime) -> Image:
    """Record a use of the hot entry ``image`` at ``now``; returns its new image.

    The caller holds the write transaction in which it read ``image``.
    """
    target = used_image(image, now)
    day, time_of_day = day_and_time(now)
    with _with_the_commit(db):  # an agent's recall: no wait for the server of its own
        db.conn.execute(
            "UPDATE memories SET last_accessed_at = ?, access_count = ?, last_used_at = ?"
            " WHERE id = ?",
            [
                target["last_accessed_at"],
                target["access_count"],
                target["last_used_at"],
                image["id"],
            ],
        )
        db.conn.execute(_UPSERT, [image["id"], day, time_of_day, time_of_day])
    return target


_MARK_IN_ONE_TRIP = (
    'WITH found AS (SELECT id, state, CASE WHEN last_accessed_at > ? COLLATE "C"'
    " THEN last_accessed_at ELSE ? END AS accessed FROM memories WHERE {selection}),"
    " marked AS (UPDATE memories AS m SET last_accessed_at = found.accessed,"
    " access_count = m.access_count + 1, last_used_at = CASE WHEN found.accessed >"
    ' m.updated_at COLLATE "C" THEN found.accessed ELSE m.updated_at END FROM found'
    " WHERE m.id = found.id AND m.user_id IN ({users}) AND found.state = 'active'"
    " RETURNING m.*),"
    " counted AS (INSERT INTO uses (memory_id, day, count, first_at, last_at)"
    " SELECT id, ?, 1, ?, ? FROM marked ON CONFLICT (memory_id, day) DO UPDATE SET"
    " count = uses.count + 1, first_at = LEAST(uses.first_at, excluded.first_at),"
    " last_at = GREATEST(uses.last_at, excluded.last_at))"
    " SELECT found.id AS found_id, found.state AS found_state, marked.* FROM found"
    " LEFT JOIN marked ON marked.id = found.id"
)


def mark_in_one_trip(
    db: Any, users: Sequence[str], selection: str, params: Sequence[Any], now: datetime
) -> list[tuple[str, str, Image | None]] | None:
    """Mark the rows of ``memories`` that ``selection`` (a ``WHERE`` condition, perhaps
    with its ``ORDER BY`` and ``LIMIT``) selects with ``params`` used at
    ``now``, if active, in one round trip on PostgreSQL: a transaction of its own that holds
    ``users``' write locks (:meth:`~memkeeper.storage.postgres.database.PostgresDatabase.
    transaction_in_one_trip`). Each selected row's id and state as found and, when it was active,
    its image as marked — exactly what :func:`mark_used` leaves (the ``used_image`` rule in
    SQL: ``last_accessed_at`` never moves back; ``last_used_at`` the later of it and
    ``updated_at``), with the day's count in ``uses``; a pending-review row is left as it
    is (a renewal is a logged transition: the caller's). None where this is not possible
    (SQLite, which has no round trips; a transaction in progress; a job's thread): the
    caller takes its ordinary path. ``selection`` must select live rows of ``users`` only."""
    one_trip = getattr(db, "transaction_in_one_trip", None)
    if one_trip is None:
        return None
    stamp = to_db(now)
    day, time_of_day = day_and_time(now)
    rows = one_trip(
        users,
        _MARK_IN_ONE_TRIP.format(selection=selection, users=placeholders(len(users))),
        [stamp, stamp, *params, *users, day, time_of_day, time_of_day],
    )
    if rows is None:
        return None
    return [
        (row["found_id"], row["found_state"], image_of(row) if row["id"] else None) for row in rows
    ]


def record_uses(db: Handle, batch: Sequence[tuple[Image, Sequence[datetime]]]) -> None:
    """Record many uses at once (the caller holds the write transaction): for each hot
    entry's current ``image``, its uses at these moments, exactly as that many
    :func:`mark_used` calls would leave the row and the ``uses`` table — one ``UPDATE`` per
    entry and one upsert per entry and day (:mod:`memkeeper.storage.use_buffer`)."""
    updates: list[list[Any]] = []
    days: dict[tuple[str, str], list[Any]] = {}
    for image, moments in batch:
        target = image
        for moment in moments:
            target = used_image(target, moment)
            day, time_of_day = day_and_time(moment)
            row = days.get((image["id"], day))
            if row is None:
                days[(image["id"], day)] = [image["id"], day, 1, time_of_day, time_of_day]
            else:
                row[2] += 1
                row[3], row[4] = min(row[3], time_of_day), max(row[4], time_of_day)
        updates.append(
            [
                target["last_accessed_at"],
                target["access_count"],
                target["last_used_at"],
                image["id"],
            ]
        )
    if not updates:
        return
    with _with_the_commit(db):
        db.conn.executemany(
            "UPDATE memories SET last_accessed_at = ?, access_count = ?, last_used_at = ?"
            " WHERE id = ?",
            updates,
        )
        db.conn.executemany(_UPSERT_MANY, list(days.values()))


def uses_of(db: Handle, memory_id: str) -> list[UseDay]:
    """The entry's uses, one row per day, oldest first."""
    return [
        UseDay.from_row(row)
        for row in db.query(
            "SELECT day, count, first_at, last_at FROM uses WHERE memory_id = ? ORDER BY day",
            [memory_id],
        )
    ]


def delete_uses(db: Handle, memory_ids: Sequence[str]) -> int:
    """Delete the uses of these entries (the caller holds the transaction), and any this
    process holds buffered (:mod:`memkeeper.storage.use_buffer`): an erased entry leaves no
    use behind. Returns rows."""
    from memkeeper.storage.use_buffer_probe import discard_everywhere

    discard_everywhere(memory_ids)
    return delete_in(db.conn, "uses", "memory_id", memory_ids)
