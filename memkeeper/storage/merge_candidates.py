"""What the merge job reads to choose whom to compare: watermarks, owners, their entries.

:mod:`memkeeper.consolidation.candidates` decides *which* (user, namespace) pairs a run
compares (everyone's, or those changed since the last run's watermark); these are the
statements it runs. Readers only, under the caller's ``storage.lock``.
"""

from __future__ import annotations

from typing import Any

from memkeeper.storage.changelog import image_of
from memkeeper.storage.handle import Handle

Pair = tuple[str, str]

MERGEABLE = (
    "state IN ('active', 'pending_review') AND pinned = 0 AND (kind != 'note' OR key IS NULL)"
)
"""Entries the job may merge: current, unpinned, and not a session summary (a note with a
key, ``summary:<session>``: the summarize job's own, each folding the one before it)."""

_ALL_PAIRS = f"""
    SELECT user_id, namespace FROM memories
    WHERE {MERGEABLE}
    GROUP BY user_id, namespace HAVING count(*) > 1
    ORDER BY user_id, namespace
"""

_CHANGED_PAIRS = """
    SELECT user_id, namespace FROM changes
    WHERE id > :change AND user_id IS NOT NULL AND (run_id IS NULL OR run_id != :run)
    UNION
    SELECT m.user_id, m.namespace FROM vectors AS v JOIN memories AS m ON m.id = v.memory_id
    WHERE v.rowid > :vector
    ORDER BY 1, 2
"""


def watermark(db: Handle) -> tuple[int, int]:
    """The highest change-log id and vector rowid now (0 for an empty table)."""
    change = db.execute("SELECT coalesce(max(id), 0) FROM changes").fetchone()[0]
    vector = db.execute("SELECT coalesce(max(rowid), 0) FROM vectors").fetchone()[0]
    return int(change), int(vector)


def all_pairs(db: Handle) -> list[Pair]:
    """Every (user, namespace) with at least two mergeable entries."""
    rows = db.execute(_ALL_PAIRS).fetchall()
    return [(row[0], row[1] or "") for row in rows]


def changed_pairs(db: Handle, *, change_id: int, vector_rowid: int, run_id: str) -> list[Pair]:
    """The (user, namespace) pairs with a change-log row after ``change_id`` (except run
    ``run_id``'s own) or a vector stored after ``vector_rowid``."""
    rows = db.execute(
        _CHANGED_PAIRS, {"change": change_id, "vector": vector_rowid, "run": run_id}
    ).fetchall()
    return [(row[0], row[1] or "") for row in rows]


def mergeable_entries(db: Handle, user_id: str, namespace: str) -> list[dict[str, Any]]:
    """One (user, namespace)'s mergeable entries, as images, in id order."""
    rows = db.query(
        f"SELECT * FROM memories WHERE user_id = ? AND namespace = ? AND {MERGEABLE} ORDER BY id",
        [user_id, namespace],
    )
    return [image_of(row) for row in rows]
