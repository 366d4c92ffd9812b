"""Change-log retention: thinning old rows to what ``explain`` needs, set-based, in batches.

A change-log row holds the entry's whole before and after images, which ``undo`` needs and
which make most of the log's bytes. A *thinned* row keeps every column (when, who, which
run, what, which memory and owner, why, the source, the details) and shrinks each image to
the fields ``explain`` and ``log`` read — ``id, user_id, namespace, kind, key, state,
confidence, cold_reason, access_count, last_accessed_at``, and for a ``create`` the value it
created — plus ``"thinned": true``. A missing image stays missing, so the log still tells creations,
removals and moves apart (:func:`memkeeper.storage.transitions.reconcile` relies on it).
Erasure tombstones (action ``forget``) hold no image and are never touched.

The job ``retain`` (``jobs/retain.py``) decides which rows are due; this module does the
SQL. ``undo`` refuses a run with a thinned row (:func:`run_is_thinned`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memkeeper.storage.batches import chunks, placeholders
from memkeeper.storage.handle import Handle
from memkeeper.storage.postgres import retention as pg_retention
from memkeeper.storage.transaction import immediate_transaction

THINNED = "thinned"
"""The key a thinned image carries (``true``)."""

KEPT_FIELDS = (
    "id",
    "user_id",
    "namespace",
    "kind",
    "key",
    "state",
    "confidence",
    "cold_reason",
    "access_count",
    "last_accessed_at",
)
"""What a thinned image keeps: what explain and log print (the use fields place the counted
uses between changes), and what forget-by-key matches."""

_IS_THINNED = f"json_extract(coalesce(after, before), '$.{THINNED}')"


def _thin(column: str) -> str:
    """SQL for ``column``'s thinned image (NULL stays NULL)."""
    members = [f"'{name}', json_extract({column}, '$.{name}')" for name in KEPT_FIELDS]
    image = f"json_object({', '.join(members)}, '{THINNED}', json('true'))"
    if column == "after":  # explain prints the value a creation created, nothing else's
        image = (
            f"CASE WHEN action = 'create' THEN json_set({image}, '$.value',"
            f" json_extract(after, '$.value')) ELSE {image} END"
        )
    return f"CASE WHEN {column} IS NULL THEN NULL ELSE {image} END"


def _thin_sql(thin: Any, is_thinned: str) -> str:
    return (
        f"UPDATE changes SET before = {thin('before')}, after = {thin('after')}"
        " WHERE id IN ({ids}) AND action != 'forget'"
        f" AND (before IS NOT NULL OR after IS NOT NULL) AND {is_thinned} IS NULL"
    )


_THIN_SQL = _thin_sql(_thin, _IS_THINNED)
_PG_THIN_SQL = _thin_sql(
    lambda column: pg_retention.thin(column, KEPT_FIELDS, THINNED), pg_retention.IS_THINNED
)


def _is_thinned(db: Handle) -> str:
    """The "this row is thinned" expression in ``db``'s dialect."""
    return pg_retention.IS_THINNED if db.dialect == "postgres" else _IS_THINNED


def scan_changes(db: Handle, after_id: int, limit: int) -> list[dict[str, Any]]:
    """The next ``limit`` change-log rows after ``after_id``, in id order, as retention sees
    them: ``id, at, run_id, action``, ``bare`` (no image) and ``thinned``."""
    return [
        dict(row)
        for row in db.query(
            "SELECT id, at, run_id, action, before IS NULL AND after IS NULL AS bare,"
            f" {_is_thinned(db)} IS NOT NULL AS thinned FROM changes WHERE id > ? ORDER BY id"
            " LIMIT ?",
            [after_id, limit],
        )
    ]


def thin_changes(db: Handle, ids: Sequence[int]) -> int:
    """Thin these change-log rows in one short write transaction; returns how many changed.

    Re-checks each row in the statement itself: a tombstone, a row without images or one
    already thinned is left alone, and a row erased meanwhile is simply gone.
    """
    changed = 0
    with immediate_transaction(db):
        for part in chunks(list(ids)):
            thin = _PG_THIN_SQL if db.dialect == "postgres" else _THIN_SQL
            sql = thin.replace("{ids}", placeholders(len(part)))
            changed += db.conn.execute(sql, list(part)).rowcount
    return changed


def run_is_thinned(db: Handle, run_id: str) -> bool:
    """Whether any change-log row of this run was thinned (so it can no longer be undone)."""
    row = db.execute(
        f"SELECT 1 FROM changes WHERE run_id = ? AND {_is_thinned(db)} IS NOT NULL LIMIT 1",
        [run_id],
    ).fetchone()
    return row is not None


def is_thinned(image: dict[str, Any] | None) -> bool:
    """Whether a change's image is a thinned one."""
    return bool(image and image.get(THINNED))
