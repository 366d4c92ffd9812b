"""Running maintenance jobs: run ids, the job lock, the job-runs table, dry runs, summaries.

``run_once`` is the Python entry point behind ``memkeeper run-once`` and the service. Each job
runs under its own run id, holds the job lock (so the service and a manual run never run jobs
at the same time), records itself in ``job_runs`` (not in a dry run: a dry run writes
nothing at all), and never lets one job's failure stop the others.

A job that fails for an operational reason (the LLM endpoint down, a full disk...) is logged
as one line naming the cause; the traceback only at debug level (``-vv``). A job skipped for
a reason outside it (no API key) is recorded as ``skipped`` with the reason; a skipped run
covers its scheduled time like a successful one (see :mod:`memkeeper.service.scheduler`).
"""

from __future__ import annotations

import importlib
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypedDict, Unpack

from memkeeper import logs
from memkeeper.config import JOB_ORDER
from memkeeper.errors import UnknownJob
from memkeeper.maintenance.jobkit import (
    Job,
    JobContext,
    JobSkipped,
    PlannedChange,
    ProgressCallback,
)
from memkeeper.maintenance.locks import EXCLUSIVE_JOBS, job_lock
from memkeeper.storage import job_runs
from memkeeper.storage.base import DEFAULT_AUTOCHECKPOINT
from memkeeper.storage.forgetting import finish_interrupted, purge_pending_indexes
from memkeeper.storage.transitions import reconcile_now
from memkeeper.store import MemoryStore

log = logs.get_logger("memkeeper.runner")


@dataclass(frozen=True)
class JobResult:
    """The outcome of one job run."""

    job: str
    run_id: str
    trigger: str
    status: str  # ok | failed | interrupted | skipped
    dry_run: bool
    started_at: datetime
    finished_at: datetime
    counts: dict[str, int]
    skipped_entries: int
    stats: dict[str, Any]
    error: str | None
    changes: list[PlannedChange] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "skipped")

    @property
    def total_changes(self) -> int:
        return sum(self.counts.values())

    def to_dict(self, *, with_changes: bool = False) -> dict[str, Any]:
        data = {
            "job": self.job,
            "run_id": self.run_id,
            "trigger": self.trigger,
            "status": self.status,
            "dry_run": self.dry_run,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat(),
            "counts": dict(self.counts),
            "total_changes": self.total_changes,
            "skipped_entries": self.skipped_entries,
            "stats": self.stats,
            "error": self.error,
        }
        if with_changes:
            # The changes kept (a job keeps the first 10,000), and how many more it made.
            data["changes"] = [change.to_dict() for change in self.changes]
            data["changes_not_listed"] = max(self.total_changes - len(self.changes), 0)
        return data


@dataclass(frozen=True)
class RunReport:
    """The outcome of a run-once: one result per job, in the order they ran."""

    results: list[JobResult]

    @property
    def ok(self) -> bool:
        return all(result.ok for result in self.results)

    def to_dict(self, *, with_changes: bool = False) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "jobs": [result.to_dict(with_changes=with_changes) for result in self.results],
        }


RUNNER_AUTOCHECKPOINT_PAGES = 800

INDEX_PURGE_JOB = "settle"
"""The nightly job whose run first rewrites the keyword indexes that still hold trigrams of
erased texts (:func:`memkeeper.storage.forgetting.purge_pending_indexes`): a re-index of
every row under the write lock (about 24 s at a million memories on two cores), done once a
night for every forget of the day, in the maintenance window, not at each forget."""
"""WAL pages after which the runner's own commits checkpoint (agents keep SQLite's 1000)."""


class RunOptions(TypedDict, total=False):
    """How jobs run, the same for one job, a planned list and the due ones."""

    dry_run: bool
    trigger: str
    stop_event: threading.Event | None
    progress: ProgressCallback | None
    lock_wait_seconds: float | None


def job_registry() -> dict[str, Job]:
    """The registered jobs by name, imported on first use.

    The registry is above this layer (jobs are written with the kit in this package), so it
    is looked up by name when a job runs rather than imported: importing the runner loads no
    job and no LLM client.
    """
    return importlib.import_module("memkeeper.jobs").REGISTRY


def resolve_jobs(store: MemoryStore, names: list[str] | tuple[str, ...] | None) -> list[str]:
    """The jobs to run: the named ones (validated) or every enabled one, in the job order."""
    if not names:
        return [name for name in JOB_ORDER if getattr(store.config.jobs, name).enabled]
    unknown = [name for name in names if name not in JOB_ORDER]
    if unknown:
        raise UnknownJob(f"unknown job {unknown[0]!r}; jobs are: {', '.join(JOB_ORDER)}")
    wanted = set(names)
    return [name for name in JOB_ORDER if name in wanted]


def new_run_id(job: str, now: datetime) -> str:
    """A sortable, readable run id: ``20270301T030000Z-expire-3f9a``."""
    return f"{now:%Y%m%dT%H%M%SZ}-{job}-{secrets.token_hex(2)}"


def record_run_start(
    store: MemoryStore,
    run_id: str,
    job: str,
    trigger: str,
    started: datetime,
    scheduled_for: datetime | None,
) -> None:
    job_runs.record_start(store.storage, run_id, job, trigger, scheduled_for, started)


ABANDONED_ERROR = "abandoned: the process running it ended before recording a result"


def close_abandoned_runs(store: MemoryStore, job: str | None = None) -> int:
    """Mark runs left ``running`` by a killed process as ``interrupted``; returns how many.

    The caller holds the lock of job ``job`` (or, with None, the ``jobs`` lock exclusively),
    so no run of that job (of any job) is running anywhere: every such ``running`` row is a
    leftover of a process that died (SIGKILL, power loss) before recording its end.
    """
    return job_runs.close_abandoned(store.storage, ABANDONED_ERROR, job=job)


def record_run_end(store: MemoryStore, result: JobResult) -> None:
    counts = {
        "changes": dict(result.counts),
        "skipped_entries": result.skipped_entries,
        **({"stats": result.stats} if result.stats else {}),
    }
    job_runs.record_end(
        store.storage,
        result.run_id,
        finished_at=result.finished_at,
        status=result.status,
        counts=counts,
        error=result.error,
    )


def run_job(
    store: MemoryStore,
    name: str,
    *,
    now: datetime,
    dry_run: bool = False,
    trigger: str = "manual",
    stop_event: threading.Event | None = None,
    progress: ProgressCallback | None = None,
    lock_wait_seconds: float | None = None,
    scheduled_for: datetime | None = None,
    run_id: str | None = None,
    llm_client: Any = None,
) -> JobResult:
    """Run one job now; raises LockBusy if its job lock stays taken (a run of the same job,
    or an ``undo``, elsewhere: :func:`~memkeeper.maintenance.locks.job_lock`), never for
    job errors.

    ``llm_client`` replaces the client an LLM job would build from the config (see
    :attr:`JobContext.llm_client`)."""
    job = job_registry()[name]
    run_id = run_id or new_run_id(name, now)
    ctx = JobContext(
        store=store,
        job=name,
        config=getattr(store.config.jobs, name),
        now=now,
        run_id=run_id,
        dry_run=dry_run,
        stop_event=stop_event or threading.Event(),
        progress=progress,
        llm_client=llm_client,
    )
    bound = log.bind(job=name, run_id=run_id, trigger=trigger, dry_run=dry_run)
    wait = (
        store.config.service.lock_wait_seconds if lock_wait_seconds is None else lock_wait_seconds
    )
    lock = job_lock(store.storage, name)
    if not dry_run:
        lock.acquire(wait)
    started_clock = time.monotonic()
    status, error = "ok", None
    try:
        if not dry_run:
            if close_abandoned_runs(store, None if name in EXCLUSIVE_JOBS else name):
                bound.warning("marked runs left by a killed process as interrupted")
            record_run_start(store, run_id, name, trigger, now, scheduled_for)
            fixed = reconcile_now(store.storage)
            if fixed:
                bound.warning("settled interrupted moves", entries=fixed)
            # PostgreSQL erases in one transaction: no byte scrub can be left half done.
            if not store.storage.one_database and finish_interrupted(store.storage):
                bound.warning("finished an interrupted forget: both files rebuilt")
            if name == INDEX_PURGE_JOB:
                purged = purge_pending_indexes(store.storage)
                if purged:
                    bound.info("rewrote the keyword index of erased texts", files=purged)
        bound.info("job started")
        # The runner checkpoints (PASSIVE, after its own commits) before the WAL gets long,
        # so an agent's commit never has to do the checkpoint work the pass caused.
        store.storage.autocheckpoint(RUNNER_AUTOCHECKPOINT_PAGES)
        try:
            job.run(ctx)
            if ctx.should_stop():
                status = "interrupted"
        except JobSkipped as exc:
            # The reason travels in the result (run-once prints it, status shows it, the
            # service warns once per process): logged here only for debugging, so an
            # operator reads it once per run.
            status, error = "skipped", str(exc)
            bound.debug("job skipped", reason=error)
        except Exception as exc:
            status, error = "failed", f"{type(exc).__name__}: {exc}"
            logs.log_failure(bound, "job failed", exc, error=error)
        finished = now + timedelta(seconds=time.monotonic() - started_clock)
        result = JobResult(
            job=name,
            run_id=run_id,
            trigger=trigger,
            status=status,
            dry_run=dry_run,
            started_at=now,
            finished_at=finished,
            counts=dict(ctx.counts),
            skipped_entries=ctx.skipped,
            stats=dict(ctx.stats),
            error=error,
            changes=list(ctx.planned),
        )
        if not dry_run:
            record_run_end(store, result)
            # Fold the WAL back: keeps it small, and clears page images a forget could not
            # truncate while a reader was active.
            store.storage.checkpoint()
    finally:
        store.storage.autocheckpoint(DEFAULT_AUTOCHECKPOINT)
        lock.release()
    bound.info(
        "job finished",
        status=status,
        changes=result.total_changes,
        counts=result.counts,
        skipped_entries=ctx.skipped,
        # Keys with a leading underscore are a job's bookkeeping for its next run (the merge
        # job's watermarks): kept in the run's row, not an operator's log.
        **({"stats": shown} if (shown := public_stats(ctx.stats)) else {}),
    )
    return result


def public_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """A job's statistics without its ``_``-prefixed bookkeeping (watermarks, scope)."""
    return {key: value for key, value in stats.items() if not key.startswith("_")}


def run_once(
    store: MemoryStore,
    jobs: list[str] | tuple[str, ...] | None = None,
    *,
    now: datetime | None = None,
    **options: Unpack[RunOptions],
) -> RunReport:
    """Run the named jobs (default: every enabled one) once, in the documented order.

    ``now`` defaults to the store's clock; a later ``now`` previews the future ("what would
    expire on 2027-03-01" with ``dry_run=True``). ``options``: see :class:`RunOptions`.
    Returns one :class:`JobResult` per job.
    """
    moment = now or store.now()
    planned = [(name, None) for name in resolve_jobs(store, jobs)]
    return run_planned(store, planned, now=moment, **options)


def run_planned(
    store: MemoryStore,
    planned: list[tuple[str, datetime | None]],
    *,
    now: datetime,
    **options: Unpack[RunOptions],
) -> RunReport:
    """Run ``(job, scheduled time or None)`` pairs in order, stopping early on request."""
    stop_event = options.get("stop_event") or threading.Event()
    options = {**options, "stop_event": stop_event}
    results = []
    for name, scheduled_for in planned:
        if stop_event.is_set():
            break
        results.append(run_job(store, name, now=now, scheduled_for=scheduled_for, **options))
    return RunReport(results)
