"""Which users and namespaces a ``merge`` run looks at, and what it reads of each.

A run compares entries within one (user, namespace) at a time. Comparing every user's on
every run would read every vector every day; instead a run looks only at the pairs where
something could have changed the answer since the last successful merge run:

* a change-log row after that run's watermark (a new, re-confirmed, restored... entry),
  except the merge run's own rows;
* or a vector stored after that run (``vectors.rowid`` above its watermark): an entry
  embedded after the run that saw it without a vector.

The watermarks (the highest change id and vector rowid when the run started) are kept in the
run's statistics in ``job_runs``, with the settings that decide what is a duplicate (the
threshold, the shortest exact value, the embedding model and dimensions) and the time of the
last full scan. The first run, a run after those settings changed, and a run whose last full
scan is ``full_scan_days`` (7) old look at every (user, namespace) with at least two current
unpinned entries. Both selections are one set-based query each, run by
:mod:`memkeeper.storage.merge_candidates`.

A re-embedded entry's vector is written anew with a higher rowid
(:func:`memkeeper.storage.vectors.store_vectors` replaces rather than updates), so it is seen
too. The periodic full scan catches the rest: SQLite may lend a deleted highest rowid to the
next vector; such an entry is compared when its user next changes, or at the next full scan.
On PostgreSQL ``vectors.rowid`` is an identity column, never reused, and vectors are written
under the one write lock (:func:`~memkeeper.storage.transaction.immediate_transaction`), so they
commit in rowid order and no watermark passes one still being written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memkeeper.clock import from_db
from memkeeper.config.merge import MergeJob
from memkeeper.retrieval.indexing import SearchSettings
from memkeeper.storage import job_runs, merge_candidates
from memkeeper.storage.base import Storage
from memkeeper.storage.vectors import user_vectors

if TYPE_CHECKING:
    import numpy

Pair = merge_candidates.Pair
JOB = "merge"


@dataclass(frozen=True)
class Watermark:
    """Where a run started: the last change id, the last vector rowid, the settings."""

    change_id: int
    vector_rowid: int
    scope: str
    run_id: str | None = None
    full_scan_at: str | None = None

    def to_stats(self) -> dict[str, Any]:
        """The run's bookkeeping for the next run (keys with "_": not shown to people)."""
        return {
            "_watermark_change": self.change_id,
            "_watermark_vector": self.vector_rowid,
            "_scope": self.scope,
            "_last_full_scan": self.full_scan_at,
        }


def scope_of(config: MergeJob, search: SearchSettings) -> str:
    """The settings that decide what is a duplicate: another scope needs a full scan."""
    return (
        f"threshold={config.similarity_threshold};exact={config.min_exact_chars};"
        f"model={search.model};dims={search.dimensions}"
    )


def current_watermark(storage: Storage, scope: str) -> Watermark:
    """The watermark of a run starting now."""
    change, vector = merge_candidates.watermark(storage.hot)
    return Watermark(change, vector, scope)


def previous_watermark(storage: Storage) -> Watermark | None:
    """The watermark of the last successful merge run, if there was one."""
    row = job_runs.last_ok_counts(storage.hot, JOB)
    if row is None or not row[1]:
        return None
    try:
        stats = json.loads(row[1]).get("stats", {})
        return Watermark(
            int(stats["_watermark_change"]),
            int(stats["_watermark_vector"]),
            str(stats["_scope"]),
            row[0],
            stats.get("_last_full_scan"),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None  # a run of an older version, or a damaged row: scan everything


def needs_full_scan(previous: Watermark | None, scope: str, now: datetime, days: int) -> bool:
    """Whether this run compares everyone (see the module docstring)."""
    if previous is None or previous.scope != scope or days == 0:
        return True
    last = from_db(previous.full_scan_at) if previous.full_scan_at else None
    return last is None or now - last >= timedelta(days=days)


def candidate_pairs(storage: Storage, previous: Watermark | None, *, full_scan: bool) -> list[Pair]:
    """The (user, namespace) pairs to compare: everyone's, or those changed since."""
    with storage.lock:
        if full_scan or previous is None:
            return merge_candidates.all_pairs(storage.hot)
        return merge_candidates.changed_pairs(
            storage.hot,
            change_id=previous.change_id,
            vector_rowid=previous.vector_rowid,
            run_id=previous.run_id or "",
        )


def read_pair(
    storage: Storage, pair: Pair, search: SearchSettings, *, with_vectors: bool
) -> tuple[list[dict[str, Any]], list[str], numpy.ndarray | None]:
    """One pair's mergeable entries, and the current vectors of those that have one."""
    user_id, namespace = pair
    with storage.lock:
        images = merge_candidates.mergeable_entries(storage.hot, user_id, namespace)
        if len(images) < 2 or not with_vectors:
            return images, [], None
        ids, matrix = user_vectors(
            storage.hot,
            user_id=user_id,
            namespaces=[namespace],
            model=search.model,
            dims=search.dimensions,
        )
    wanted = {image["id"] for image in images}
    keep = [i for i, memory_id in enumerate(ids) if memory_id in wanted]
    if len(keep) < 2:
        return images, [], None
    return images, [ids[i] for i in keep], matrix[keep]
