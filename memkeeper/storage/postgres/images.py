"""Where memories are now, on PostgreSQL: hot and cold rows read in one round trip.

The transition mechanism re-reads every entry of a batch before writing it (is it still as
the job or the caller saw it?): the hot rows, then, for the ids not hot, the cold ones. On
SQLite those are two files; on PostgreSQL two tables of one database, so both reads go to
the server together (:meth:`~memkeeper.storage.postgres.database.PostgresConnection.
read_together`) and an agent's ``remember`` or a job's batch waits for the server once
for them, not twice. A row in both tables (never written on one database, where a move is
one transaction) is the hot one, as on SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memkeeper.storage.batches import chunks, placeholders
from memkeeper.storage.changelog import image_of


def current_images(db: Any, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each id's current row as an image, hot first, cold otherwise (absent: erased)."""
    found: dict[str, dict[str, Any]] = {}
    for part in chunks(list(ids)):
        marks = placeholders(len(part))
        hot, cold = db.conn.read_together(
            [
                (f"SELECT * FROM memories WHERE id IN ({marks})", list(part)),
                (f"SELECT * FROM cold_memories WHERE id IN ({marks})", list(part)),
            ]
        )
        found.update({row["id"]: image_of(row) for row in cold})
        found.update({row["id"]: image_of(row) for row in hot})
    return found
