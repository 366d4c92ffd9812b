"""Writing the change log: one row per change to a memory, in the change's own transaction.

Each row says when, who (the actor: ``api:remember``, ``job:expire``, ``cli:restore``...), in
which run (for jobs), what (the action), to which memory, why (a human reason), from which
source, and the entry's whole image before and after. Those images are what make ``explain``
and ``undo`` work for every job without job-specific code. :mod:`memkeeper.storage.transitions`
and :mod:`memkeeper.storage.forgetting` write rows through :func:`insert_changes`; reading and
explaining them is :mod:`memkeeper.audit`'s job.

A recall of an active entry is a use, not a change: it updates ``last_accessed_at`` and
``access_count`` in place and is counted in ``uses`` (:mod:`memkeeper.storage.uses`), not
logged here (databases written before that hold ``recall`` rows). So each entry's rows form
a chain — every row's before image is the previous row's after image plus the uses between
them — and replaying the log with the uses on top gives the exact current state.

Rows older than ``[jobs.retain] full_images_days`` are thinned by the ``retain`` job: their
images shrink to what ``explain`` prints (:mod:`memkeeper.storage.retention`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from memkeeper.storage.columns import COLD_COLUMNS, MEMORY_COLUMNS
from memkeeper.storage.handle import Handle

CHANGE_FILTERS = ("memory_id", "run_id", "user_id", "namespace", "action")
"""The change-log columns a caller may filter on (each has an index)."""

CHANGE_COLUMNS = (
    "at",
    "actor",
    "run_id",
    "action",
    "memory_id",
    "user_id",
    "namespace",
    "reason",
    "source",
    "before",
    "after",
    "details",
)


def image_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical image of a stored memory row (hot or cold) as a plain dict."""
    data = dict(row)
    columns = COLD_COLUMNS if data.get("state") == "cold" else MEMORY_COLUMNS
    return {name: data[name] for name in columns}


def _dump(image: dict[str, Any] | None) -> str | None:
    if image is None:
        return None
    # Compact, in the image's own (column) order: a change row is written for every change,
    # so its encoding is on the hot path and in every byte of the log.
    return json.dumps(image, ensure_ascii=False, separators=(",", ":"))


def change_row(
    *,
    at: str,
    actor: str,
    action: str,
    reason: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    run_id: str | None = None,
    source: str | None = None,
    details: dict[str, Any] | None = None,
    memory_id: str | None = None,
    user_id: str | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    """Build one change-log row; memory id, owner and source default to the images'."""
    image = after or before or {}
    return {
        "at": at,
        "actor": actor,
        "run_id": run_id,
        "action": action,
        "memory_id": memory_id or image.get("id"),
        "user_id": user_id if user_id is not None else image.get("user_id"),
        "namespace": namespace if namespace is not None else image.get("namespace"),
        "reason": reason,
        "source": source if source is not None else image.get("source"),
        "before": _dump(before),
        "after": _dump(after),
        "details": json.dumps(details, ensure_ascii=False, sort_keys=True) if details else None,
    }


def insert_changes(db: Handle, rows: Iterable[dict[str, Any]]) -> int:
    """Append change rows (the caller holds the transaction). Returns how many."""
    rows = list(rows)
    if rows:
        placeholders = ", ".join(f":{c}" for c in CHANGE_COLUMNS)
        db.conn.executemany(
            f"INSERT INTO changes ({', '.join(CHANGE_COLUMNS)}) VALUES ({placeholders})", rows
        )
    return len(rows)
