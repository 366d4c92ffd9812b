"""Where memories are now, on PostgreSQL: hot and cold rows read in one round trip.

The transition mechanism re-reads every entry of a batch before writing it (is it still as
the job or the caller saw it?): the hot rows, then, for the ids not hot, the cold ones. On
SQLite those are two files; on PostgreSQL two tables of one database, so both reads go to
the server together (:meth:`~memkeeper.storage.postgres.database.PostgresConnection.
read_together`) and an agent's ``remember`` or a job's batch waits for the server once
for them, not twice. A row in both tables (never written on one database, where a move is
one transaction) is the hot one, as on SQLite. Further reads of the re-check (who holds the
keys a batch makes current) go in the same round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memkeeper.storage.batches import chunks, placeholders
from memkeeper.storage.changelog import image_of


def current_images(
    db: Any, ids: Sequence[str], reads: Sequence[tuple[str, Sequence[Any]]] = ()
) -> tuple[dict[str, dict[str, Any]], list[list[dict[str, Any]]]]:
    """Each id's current row as an image, hot first, cold otherwise (absent: erased); and
    the rows of ``reads`` (each ``(sql, parameters)``), sent with the first ids' reads."""
    found: dict[str, dict[str, Any]] = {}
    extra = [(sql, list(params)) for sql, params in reads]
    results: list[list[dict[str, Any]]] = []
    parts: list[Sequence[str]] = list(chunks(list(ids))) or ([[]] if extra else [])
    for part in parts:
        marks = placeholders(len(part))
        statements = (
            [
                (f"SELECT * FROM memories WHERE id IN ({marks})", list(part)),
                (f"SELECT * FROM cold_memories WHERE id IN ({marks})", list(part)),
            ]
            if part
            else []
        )
        rows = db.conn.read_together([*statements, *extra])
        if part:
            hot, cold = rows[0], rows[1]
            found.update({row["id"]: image_of(row) for row in cold})
            found.update({row["id"]: image_of(row) for row in hot})
        if extra:
            results, extra = rows[len(statements) :], []
    return found, results
