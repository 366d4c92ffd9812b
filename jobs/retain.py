"""retain: the database stays bounded (README "Retention").

Three steps, each in short write transactions:

1. **Cold purge** (off unless ``cold_purge_days`` > 0): entries retired to cold storage more
   than ``cold_purge_days`` ago are removed through the shared transition mechanism, so each
   removal is a logged change (action ``purge``) like any other; their counted uses go too.
2. **Thinning**: change-log rows older than ``full_images_days`` — and, for rows of a run,
   older than the undo window (``undo_days``, by default the same) — keep every column but
   shrink their before/after images to what ``explain`` prints
   (:mod:`memkeeper.storage.retention`). Erasure tombstones are kept as they are. The log is
   walked in id order (nearly time order) from where the last run left off: the highest id
   below which every row is thinned or exempt, recorded in the run's stats
   (``thinned_through``) and read back from the job-runs table.
3. **Free pages returned**: up to ``vacuum_pages`` free pages per file handed back to the file
   system (``PRAGMA incremental_vacuum``, a few hundred pages per transaction). SQLite only:
   on PostgreSQL the server's autovacuum makes the space of deleted and thinned rows reusable.

The runner records the counts (``purge``) and the stats (rows thinned, pages released).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memkeeper.jobs._common import cutoff, days_since

from memkeeper.config.retention import RetainJob
from memkeeper.maintenance.jobkit import Job, JobContext
from memkeeper.storage import job_runs
from memkeeper.storage.changelog import image_of
from memkeeper.storage.due import cold_retired_before
from memkeeper.storage.keywords import compact
from memkeeper.storage.retention import scan_changes, thin_changes
from memkeeper.storage.sqlite.space import free_pages, release_free_pages
from memkeeper.storage.transaction import write_transaction
from memkeeper.storage.transitions import Transition
from memkeeper.storage.uses import delete_uses
from memkeeper.storage.vectors import delete_vectors


def _cold_due(ctx: JobContext, cold: Any, before: str) -> Iterator[list[dict[str, Any]]]:
    """Cold rows retired before ``before``, as images, in batches."""
    last_at, last_rowid, size = "", 0, ctx.batch_size
    while True:
        with ctx.store.storage.lock:
            rows = cold_retired_before(cold, (last_at, last_rowid), before, size)
        if not rows:
            return
        last_at, last_rowid = rows[-1]["retired_at"], rows[-1]["rowid_"]
        yield [image_of(row) for row in rows]


def _purge_cold(ctx: JobContext, config: RetainJob) -> None:
    cold = ctx.store.storage.cold(create=False)
    if not config.cold_purge_days or cold is None:
        return

    def make(image: dict[str, Any]) -> Transition:
        age = days_since(image, "retired_at", ctx.now)
        return Transition(
            image["id"],
            image,
            None,
            "purge",
            f"retired {age} days ago; cold purge after {config.cold_purge_days} days",
        )

    purged_any = False
    for batch in _cold_due(ctx, cold, cutoff(ctx.now, config.cold_purge_days)):
        outcomes = ctx.apply([make(image) for image in batch])
        purged = [o.transition.memory_id for o in outcomes if o.applied]
        purged_any = purged_any or bool(purged)
        if purged and not ctx.dry_run:
            # Their counted uses (ids and times) and their vectors go with them.
            with write_transaction(ctx.store.storage) as hot:
                delete_uses(hot, purged)
                delete_vectors(hot, purged)
        ctx.advance(len(batch))
        if ctx.should_stop():
            return
    if purged_any and not ctx.dry_run and cold.dialect == "sqlite":
        # The keyword index (FTS5) keeps purged rows' data until it is rewritten: rewrite
        # it, so the pages come free for _return_free_pages. PostgreSQL's indexes need not.
        compact(cold, "cold_memories")


def _previous_watermark(ctx: JobContext) -> int:
    """Where the last runs left off: below it every row is thinned or exempt."""
    return job_runs.retain_thinned_through(ctx.store.storage.hot)


def _thin_change_log(ctx: JobContext, config: RetainJob) -> None:
    storage = ctx.store.storage
    all_rows = cutoff(ctx.now, config.full_images_days)
    run_rows = cutoff(ctx.now, max(config.full_images_days, config.undo_window_days))
    watermark = last = _previous_watermark(ctx)
    thinned, contiguous, reached_new = 0, True, False
    while not reached_new and not ctx.should_stop():
        with storage.lock:
            rows = scan_changes(storage.hot, last, ctx.batch_size)
        if not rows:
            break
        due = []
        for row in rows:
            if row["at"] >= all_rows:  # the log is (nearly) in time order: the rest is newer
                reached_new = True
                break
            last = row["id"]
            exempt = row["bare"] or row["thinned"] or row["action"] == "forget"
            if not exempt and row["at"] < (run_rows if row["run_id"] else all_rows):
                due.append(row["id"])
                exempt = True
            contiguous = contiguous and exempt
            if contiguous:
                watermark = row["id"]
        if due and not ctx.dry_run:
            with storage.lock:
                thinned += thin_changes(storage.hot, due)
        elif due:
            thinned += len(due)
        ctx.advance(len(due))
    ctx.stats["thinned_rows"] = thinned
    ctx.stats["thinned_through"] = watermark


def _return_free_pages(ctx: JobContext, config: RetainJob) -> None:
    storage = ctx.store.storage
    if storage.hot.dialect == "postgres":
        return  # SQLite's freelist; on PostgreSQL (auto)vacuum makes dead rows' space reusable
    files = {"hot": storage.hot, "cold": storage.cold(create=False)}
    for name, db in files.items():
        if db is None:
            continue
        with storage.lock:
            if ctx.dry_run:
                ctx.stats[f"free_pages_{name}"] = free_pages(db)
                continue
            ctx.stats[f"released_pages_{name}"] = release_free_pages(db, config.vacuum_pages)
            ctx.stats[f"free_pages_{name}"] = free_pages(db)


def run(ctx: JobContext) -> None:
    config: RetainJob = ctx.config  # type: ignore[assignment]
    _purge_cold(ctx, config)
    if ctx.should_stop():
        return
    _thin_change_log(ctx, config)
    if ctx.should_stop():
        return
    _return_free_pages(ctx, config)


JOB = Job(
    "retain",
    "Retention: old change-log images thinned, optional cold purge, free pages returned",
    run,
)
