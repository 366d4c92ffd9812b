"""When jobs are due, and running them on time: triggers, catch-up, the APScheduler wiring.

The rule behind everything here: a job is *due* when its most recent scheduled time (read
from its cron schedule in ``service.timezone``) is later than the time its last successful
run covers. A run *skipped* for a reason outside the job (summarize without an API key)
covers its time too: it is tried again at its next scheduled time, not at every
``run-once --due``. The same rule drives

* the service's catch-up at start (:func:`due_for_catch_up`, a pure function): a laptop that
  was off on the 1st still gets its monthly demotion, once, when it comes back;
* every scheduled fire (:meth:`ServiceJobs.run_scheduled`): a fire whose scheduled time a
  successful run already covers is skipped, so a clock stepping back (NTP, a reload after
  the step) never runs a job twice for the same scheduled time;
* ``run-once --due`` from a timer (:func:`due_jobs`, :func:`run_due`).

Daylight saving time: a fixed-time schedule (``30 2 * * *``) whose time happens twice when the
clocks go back runs on the first pass only, as cron does; a time that does not exist when the
clocks go forward runs right after the gap (APScheduler's behaviour). Schedules with a
wildcard hour (``0 * * * *``) keep every real hour.

The scheduler (APScheduler 3) runs jobs on one worker thread, so jobs never overlap, with
``coalesce=True`` (missed fires collapse into one run), ``max_instances=1`` and no misfire
grace limit — a fire that is late because the machine slept still runs, once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Unpack
from zoneinfo import ZoneInfo

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from memkeeper import logs
from memkeeper.clock import to_db
from memkeeper.config import JOB_ORDER, Config
from memkeeper.errors import LockBusy
from memkeeper.maintenance.locks import EXCLUSIVE_JOBS, job_lock, jobs_lock
from memkeeper.maintenance.runner import (
    JobResult,
    RunOptions,
    RunReport,
    close_abandoned_runs,
    run_job,
    run_planned,
)
from memkeeper.service.triggers import JobTrigger, job_triggers, previous_fire_time
from memkeeper.storage import job_runs
from memkeeper.store import MemoryStore

log = logs.get_logger("memkeeper.scheduler")

TRIGGER_SCHEDULE = "schedule"
TRIGGER_CATCH_UP = "catch-up"
CATCH_UP_JOB_ID = "catch-up"
LOCK_POLL_SECONDS = 1.0
# Missed fires collapse into one run; one run of a job at a time; no fire is too late to run
# (after a suspend it runs once, at once).
JOB_OPTIONS: dict[str, Any] = {"coalesce": True, "max_instances": 1, "misfire_grace_time": None}

# -- what is due -------------------------------------------------------------------------------


COVERING_STATUSES = ("ok", "skipped")
"""Statuses of a run that covers its scheduled time. ``skipped`` is a job that could not run
this time for a reason outside it (no API key): running it again before its next scheduled
time would only skip again (and repeat the notice). Failed and interrupted runs stay due."""


def last_successes(store: MemoryStore) -> dict[str, datetime]:
    """For each job, the latest time a successful (``ok``) or ``skipped`` run covers.

    A run covers the later of when it started and the scheduled time it ran for: a catch-up
    run at 09:00 for 03:00 covers 09:00; a run that started a moment before its scheduled
    time (the clock stepped) still covers that time.
    """
    with store.storage.lock:
        rows = job_runs.latest_covering(store.storage.hot, COVERING_STATUSES)
    covered: dict[str, datetime] = {}
    for job, started, scheduled in rows:
        covered[job] = max(moment for moment in (started, scheduled) if moment is not None)
    return covered


def due_for_catch_up(
    config: Config, last_success_by_job: Mapping[str, datetime | None], now: datetime
) -> list[tuple[str, datetime]]:
    """Enabled jobs whose last success is older than their most recent scheduled time.

    Pure: the answer depends only on the arguments. Returns ``(job, scheduled time in UTC)``
    in the documented job order; a job that never succeeded is due as soon as its schedule
    has fired once.
    """
    triggers = job_triggers(config)
    due = []
    for name in JOB_ORDER:
        if not getattr(config.jobs, name).enabled:
            continue
        scheduled = previous_fire_time(triggers[name], now)
        covered = last_success_by_job.get(name)
        if scheduled is not None and (covered is None or covered < scheduled):
            due.append((name, scheduled))
    return due


def due_jobs(store: MemoryStore, now: datetime | None = None) -> list[tuple[str, datetime]]:
    """The jobs ``run-once --due`` should run now, with the scheduled time each runs for."""
    return due_for_catch_up(store.config, last_successes(store), now or store.now())


def run_due(
    store: MemoryStore, *, now: datetime | None = None, **options: Unpack[RunOptions]
) -> RunReport:
    """Run every due job once, in order, each recorded with the scheduled time it covers.

    The engine of ``memkeeper run-once --due`` (a systemd timer's alternative to the service).
    ``options`` as for :func:`~memkeeper.maintenance.runner.run_once` (the trigger defaults to
    ``schedule``). Raises LockBusy like ``run_once`` when the job lock stays taken.
    """
    moment = now or store.now()
    options.setdefault("trigger", TRIGGER_SCHEDULE)
    if options.get("dry_run"):  # a preview changes nothing and takes no lock
        return run_planned(store, due_jobs(store, moment), now=moment, **options)
    stop_event = options.get("stop_event") or threading.Event()
    options["stop_event"] = stop_event
    results = []
    for name, _ in due_jobs(store, moment):
        if stop_event.is_set():
            break
        result = _run_if_still_due(store, name, moment, options)
        if result is not None:
            results.append(result)
    return RunReport(results)


def _run_if_still_due(
    store: MemoryStore, name: str, moment: datetime, options: RunOptions
) -> JobResult | None:
    """Run ``name`` if it is still due once its lock is held, else None.

    The first look (:func:`due_jobs`) is taken without the locks; another process (a timer's
    run-once on another host, the service) may have run the job between it and the lock.
    Decided again under the job's lock, which the runner re-enters, no other process can
    run the job between this decision and the run: once per scheduled time (as
    :meth:`ServiceJobs._run_locked` does). Raises LockBusy when the lock stays taken."""
    wait = options.get("lock_wait_seconds")
    lock = job_lock(store.storage, name)
    lock.acquire(store.config.service.lock_wait_seconds if wait is None else wait)
    try:
        still = dict(due_for_catch_up(store.config, last_successes(store), moment))
        if name not in still:
            log.info("already run for its scheduled time by another process; skipping", job=name)
            return None
        return run_job(
            store,
            name,
            now=moment,
            scheduled_for=still[name],
            **{**options, "lock_wait_seconds": 0},  # held already: re-entered
        )
    finally:
        lock.release()


def mark_abandoned_runs(store: MemoryStore) -> int:
    """Mark runs left ``running`` by a killed process as ``interrupted``; returns how many.

    Done while holding the ``jobs`` lock exclusively: then no other process is running a
    job, so every ``running`` row is a leftover. If a job runs elsewhere, each job whose own
    lock is free has its rows marked; the rest wait for that job's next run (which marks its
    own) or the next start.
    """
    lock = jobs_lock(store.storage)
    try:
        lock.acquire(0)
    except LockBusy:
        return _mark_abandoned_per_job(store)
    try:
        return close_abandoned_runs(store)
    finally:
        lock.release()


def _mark_abandoned_per_job(store: MemoryStore) -> int:
    """A job runs elsewhere (a run-once on another host): each other job whose lock is free
    has no live run, so its ``running`` rows are leftovers (an undo's wait for the next
    start: only the ``jobs`` lock held exclusively vouches for them)."""
    with store.storage.lock:
        names = job_runs.running_jobs(store.storage.hot)
    marked = 0
    for name in names:
        if name not in JOB_ORDER or name in EXCLUSIVE_JOBS:
            continue
        lock = job_lock(store.storage, name)
        try:
            lock.acquire(0)
        except LockBusy:
            continue  # a live run of it, here or on another host
        try:
            marked += close_abandoned_runs(store, name)
        finally:
            lock.release()
    return marked


# -- running jobs for the service --------------------------------------------------------------


class ServiceJobs:
    """What the service's scheduler calls: each due job once per scheduled time.

    Every call decides at run time, under the store's clock, whether the job is still due —
    a queued fire whose time a run (scheduled, catch-up or manual) already covered does
    nothing. Errors are logged, never raised: one job's failure never stops the others or
    the service. ``stop_event`` makes a running job stop after its current batch.

    A job skipped for a reason outside it (no API key) is announced with a warning once per
    service process and reason, not at every scheduled time; each skip is still recorded in
    ``job_runs`` (and shown by ``status``).
    """

    def __init__(
        self,
        store: MemoryStore,
        stop_event: threading.Event | None = None,
        confirm: Callable[[], bool] | None = None,
    ) -> None:
        self.store = store
        self.stop_event = stop_event or threading.Event()
        self.confirm = confirm
        """Asked under the job lock before each run: does this service still lead its fleet
        (None: always)? A deposed leader never starts a job."""
        self._announced: set[tuple[str, str]] = set()

    def _announce_skip(self, result: JobResult) -> None:
        """Warn about a skipped job the first time this service sees it for this reason."""
        reason = result.error or ""
        if (result.job, reason) in self._announced:
            log.debug("job skipped again", job=result.job, reason=reason)
            return
        self._announced.add((result.job, reason))
        log.warning(
            "job skipped; it is tried again at each scheduled time (this notice is not repeated)",
            job=result.job,
            reason=reason,
        )

    def run_scheduled(self, name: str) -> JobResult | None:
        """A scheduled fire of ``name`` (trigger ``schedule``)."""
        return self._run(name, TRIGGER_SCHEDULE)

    def catch_up(self, names: list[str]) -> list[JobResult]:
        """Run the named overdue jobs, in order, once each (trigger ``catch-up``)."""
        results = []
        for name in names:
            if self.stop_event.is_set():
                break
            result = self._run(name, TRIGGER_CATCH_UP)
            if result is not None:
                results.append(result)
        return results

    def _take_job_lock(self, name: str) -> bool:
        """Take the job's lock, waiting while another process (a run-once, another host) runs
        the same job or an undo; False if a stop came first. Held, the runner re-enters it."""
        lock = job_lock(self.store.storage, name)
        announced = False
        while not self.stop_event.is_set():
            try:
                lock.acquire(0)
            except LockBusy as exc:
                if not announced:
                    log.info("waiting for the job lock", job=name, reason=str(exc))
                    announced = True
                self.stop_event.wait(LOCK_POLL_SECONDS)
                continue
            return True
        return False

    def _run(self, name: str, trigger: str) -> JobResult | None:
        lock = job_lock(self.store.storage, name)
        try:
            if not self._take_job_lock(name):
                return None
            try:
                return self._run_locked(name, trigger)
            finally:
                lock.release()
        except Exception as exc:
            # run_job records a job's own errors; this is the rest (the database went away or
            # turned read-only, the job lock was lost, a bug). Log it — one line when it is an
            # operational failure — and keep the service alive for the next scheduled time.
            logs.log_failure(
                log,
                "could not run job",
                exc,
                job=name,
                trigger=trigger,
                error=f"{type(exc).__name__}: {exc}",
            )
        return None

    def _run_locked(self, name: str, trigger: str) -> JobResult | None:
        """Decide under the job lock whether ``name`` is still due, and run it: no other
        process can run it between the decision and the run (once per scheduled time)."""
        config = self.store.config
        if not getattr(config.jobs, name).enabled:
            log.info("job disabled; not running it", job=name, trigger=trigger)
            return None
        if self.confirm is not None and not self.confirm():
            log.warning("no longer the leader; not running the job", job=name, trigger=trigger)
            return None
        now = self.store.now()
        scheduled = previous_fire_time(job_triggers(config)[name], now)
        covered = last_successes(self.store).get(name)
        if scheduled is None or (covered is not None and covered >= scheduled):
            log.info(
                "already done for its scheduled time; skipping",
                job=name,
                trigger=trigger,
                scheduled_for=to_db(scheduled) if scheduled else None,
            )
            return None
        result = run_job(
            self.store,
            name,
            now=now,
            trigger=trigger,
            stop_event=self.stop_event,
            scheduled_for=scheduled,
            lock_wait_seconds=0,  # held already: re-entered
        )
        if result.status == "skipped":
            self._announce_skip(result)
        return result


# -- the APScheduler wiring ----------------------------------------------------------------------


def build_scheduler(config: Config, jobs: ServiceJobs) -> BackgroundScheduler:
    """An APScheduler with one cron job per enabled job, running on one worker thread."""
    scheduler = BackgroundScheduler(
        timezone=ZoneInfo(config.service.timezone),
        executors={"default": ThreadPoolExecutor(max_workers=1)},
        job_defaults=JOB_OPTIONS,
    )
    schedule_jobs(scheduler, config, jobs)
    return scheduler


def schedule_jobs(
    scheduler: BackgroundScheduler,
    config: Config,
    jobs: ServiceJobs,
    triggers: Mapping[str, JobTrigger] | None = None,
) -> None:
    """(Re)schedule every job from ``config``: enabled ones added or replaced, others removed.

    All triggers are built before anything changes, so an unreadable schedule (ConfigError)
    leaves the scheduler as it was.
    """
    triggers = triggers or job_triggers(config)
    for name in JOB_ORDER:
        if getattr(config.jobs, name).enabled:
            scheduler.add_job(
                jobs.run_scheduled,
                trigger=triggers[name],
                args=[name],
                id=name,
                name=f"{name} ({triggers[name].expr})",
                replace_existing=True,
                **JOB_OPTIONS,
            )
        elif scheduler.get_job(name) is not None:
            scheduler.remove_job(name)


def add_catch_up(
    scheduler: BackgroundScheduler, jobs: ServiceJobs, due: list[tuple[str, datetime]]
) -> None:
    """Queue one catch-up run of the overdue jobs, to start at once on the worker thread."""
    if due:
        scheduler.add_job(
            jobs.catch_up,
            args=[[name for name, _ in due]],
            id=CATCH_UP_JOB_ID,
            name="catch-up",
            replace_existing=True,
            **JOB_OPTIONS,
        )
