"""The ``memkeeper run`` service process: lock, catch-up, signals, reload, systemd protocol.

Life of the process:

1. Validate the configuration, including every schedule (a bad one is a ConfigError: the CLI
   exits 78, and the unit's ``RestartPreventExitStatus=78`` stops a restart loop).
2. Open the database and take the lead (:mod:`memkeeper.service.fleet`). On SQLite that is
   the *service instance* flock for the whole life of the process; a second service on the
   same file gets LockBusy (exit 75) at once, and one left by a killed service is simply
   taken over. On PostgreSQL a fleet of services elects one leader; the others stand by
   (serving MCP if asked, answering signals) and take over when the leader goes; a leader
   whose lock session ended stands by again.
3. As leader: mark runs a killed process left ``running`` as ``interrupted``, start the
   scheduler, queue the catch-up of missed runs, and tell systemd ``READY=1``.
4. Wait for signals in the main thread: SIGHUP reloads config.toml (an invalid file is
   rejected and the running configuration kept); SIGTERM/SIGINT stop — the running job
   finishes its current batch and is recorded ``interrupted``, ``STOPPING=1`` is sent and the
   process exits 0. Between signals the main thread pings the systemd watchdog while the
   scheduler thread is alive, and wakes the scheduler every tick.

Why not APScheduler's ``BlockingScheduler`` in the main thread: its loop sleeps as long as the
next fire is away, measured once against the wall clock — after a suspend or a clock step it
would oversleep — and a Python signal handler interrupting that loop must not touch its locks.
Here the scheduler loop (``BackgroundScheduler``, the same loop on its own thread) is woken
every tick to re-read the wall clock, and signals arrive as bytes on a pipe
(``signal.set_wakeup_fd``) that the main thread reads: no work happens inside a handler.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from memkeeper import logs
from memkeeper.config import JOB_ORDER, Config, load_config
from memkeeper.errors import DatabaseUnreachable, MemkeeperError
from memkeeper.maintenance.locks import set_takeover
from memkeeper.service.fleet import Leadership, leader_text
from memkeeper.service.notify import Notifier, watchdog_interval
from memkeeper.service.scheduler import (
    ServiceJobs,
    add_catch_up,
    build_scheduler,
    due_for_catch_up,
    job_triggers,
    last_successes,
    mark_abandoned_runs,
    schedule_jobs,
)
from memkeeper.store import MemoryStore

log = logs.get_logger("memkeeper.service")

TICK_SECONDS = 1.0
LOST = -1
"""What the leader's loop returns when its lead ended (not a signal)."""
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
RELOAD_SIGNALS = (signal.SIGHUP,)
RESTART_ONLY_KEYS = ("path", "cold_path", "busy_timeout_ms")


class _Inbox:
    """Signals (and in-process requests) delivered as bytes on a pipe the main loop reads."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._old_handlers: dict[int, Any] = {}
        self._old_wakeup: int | None = None

    def catch_signals(self) -> None:
        """Route SIGTERM, SIGINT and SIGHUP here (main thread only) until :meth:`close`."""
        self._old_wakeup = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        for signum in (*STOP_SIGNALS, *RELOAD_SIGNALS):
            self._old_handlers[signum] = signal.signal(signum, _ignore)

    def post(self, signum: int) -> None:
        """Deliver ``signum`` as if the process had received it (from any thread)."""
        with contextlib.suppress(BlockingIOError):
            os.write(self._write, bytes([signum]))

    def wait(self, timeout: float) -> list[int]:
        """The signals received, waiting up to ``timeout`` seconds for the first one."""
        ready, _, _ = select.select([self._read], [], [], timeout)
        if not ready:
            return []
        try:
            return list(os.read(self._read, 512))
        except BlockingIOError:
            return []

    def close(self) -> None:
        """Restore the previous signal handling and close the pipe."""
        for signum, handler in self._old_handlers.items():
            signal.signal(signum, handler)
        self._old_handlers.clear()
        if self._old_wakeup is not None:
            signal.set_wakeup_fd(self._old_wakeup)
            self._old_wakeup = None
        os.close(self._read)
        os.close(self._write)


def _ignore(_signum: int, _frame: object) -> None:
    """The Python-level handler: the wakeup pipe already carries the signal to the loop."""


class Daemon:
    """One ``memkeeper run`` service: construct with the configuration, then :meth:`run`."""

    def __init__(
        self,
        *,
        db: str | Path | None,
        config: Config,
        config_path: Path | None,
        config_explicit: bool = False,
        log_level: str | None = None,
        notifier: Notifier | None = None,
        handle_signals: bool = True,
        tick_seconds: float = TICK_SECONDS,
        mcp_plan: Any = None,
    ) -> None:
        self.db = db
        self.config = config
        self.config_path = config_path
        self.config_explicit = config_explicit
        self.log_level = log_level
        self.notifier = notifier or Notifier()
        self.tick_seconds = tick_seconds
        self.handle_signals = handle_signals
        self.stop_event = threading.Event()
        self._inbox = _Inbox()
        self._store: MemoryStore | None = None
        self._jobs: ServiceJobs | None = None
        self._scheduler: BackgroundScheduler | None = None
        self._lead: Leadership | None = None
        # `memkeeper run --mcp`: a memkeeper.mcp.http.HttpPlan, served beside the jobs.
        self.mcp_plan = mcp_plan
        self._mcp_store: MemoryStore | None = None

    @property
    def leadership(self) -> Leadership | None:
        """The service's claim on its memory while it runs (None before and after)."""
        return self._lead

    # -- requests from other threads (tests, embedding) -------------------------------------

    def request_stop(self) -> None:
        """Stop as on SIGTERM."""
        self._inbox.post(signal.SIGTERM)

    def request_reload(self) -> None:
        """Reload the configuration as on SIGHUP."""
        self._inbox.post(signal.SIGHUP)

    # -- the life of the process ------------------------------------------------------------

    def run(self) -> None:
        """Serve until stopped; returns normally after a graceful stop (exit 0)."""
        try:
            if self.handle_signals:
                self._inbox.catch_signals()
            self._configure_logging(self.config)
            job_triggers(self.config)  # every schedule readable, or ConfigError (exit 78)
            self._store = MemoryStore(self.db, config=self.config, actor="service")
            set_takeover(self._store.storage, self.config.service.takeover_seconds)
            lead = self._lead = Leadership(self._store)
            try:
                leading = lead.try_lead()  # SQLite: refuses a second service (LockBusy)
                with self._mcp_server():
                    self._serve_fleet(self._store, lead, leading)
            finally:
                lead.close()
        finally:
            if self._store is not None:
                self._store.close()
            self._inbox.close()

    def _serve_fleet(self, store: MemoryStore, lead: Leadership, leading: bool) -> None:
        """Lead when the lead is ours, stand by when it is not, until a stop signal."""
        ready = False
        while True:
            if not leading:
                if not ready:
                    self.notifier.ready(status="standing by")
                    ready = True
                stopped = self._stand_by(lead)
                if stopped is not None:
                    log.info("stopping", signal=signal.Signals(stopped).name)
                    self.notifier.stopping(status="stopping")
                    log.info("service stopped")
                    return
            try:
                stopped = self._serve(store, lead)
            except DatabaseUnreachable as exc:
                if not lead.fleet:
                    raise
                # The server went away while taking up the lead: stand by until it answers.
                log.warning("database lost while leading", error=str(exc))
                stopped = LOST
            ready = True
            if stopped != LOST:
                return
            lead.step_down()
            self.stop_event.clear()
            log.warning("leadership lost; scheduling stopped, standing by to re-elect")
            leading = False

    def _stand_by(self, lead: Leadership) -> int | None:
        """Follow until the lead is ours (None) or a stop signal arrives (the signal)."""
        shown = None
        interval = watchdog_interval()
        next_ping = next_beat = time.monotonic()
        while True:
            if time.monotonic() >= next_beat:
                lead.beat(leading=False)
                leader = leader_text(lead.leader())
                if leader != shown:
                    log.info(f"standing by, leader is {leader}", leader=leader)
                    shown = leader
                next_beat = time.monotonic() + lead.beat_seconds
            for signum in self._inbox.wait(lead.poll_seconds):
                if signum in STOP_SIGNALS:
                    return signum
                if signum in RELOAD_SIGNALS:
                    self.reload()
            if interval is not None and time.monotonic() >= next_ping:
                self.notifier.watchdog()
                next_ping = time.monotonic() + interval
            if lead.try_lead():
                log.info("took over the lead", previous=shown)
                return None

    def _serve(self, store: MemoryStore, lead: Leadership) -> int:
        abandoned = mark_abandoned_runs(store)
        if abandoned:
            log.warning(
                "runs left unfinished by a stopped process marked interrupted", runs=abandoned
            )
        lead.beat(leading=True)
        self._jobs = ServiceJobs(store, self.stop_event, confirm=lead.still_leading)
        self._scheduler = build_scheduler(self.config, self._jobs)
        self._scheduler.start()
        try:
            due = due_for_catch_up(self.config, last_successes(store), store.now())
            if due:
                log.info(
                    "catching up missed runs",
                    jobs=[name for name, _ in due],
                    scheduled_for=[moment.isoformat() for _, moment in due],
                )
            add_catch_up(self._scheduler, self._jobs, due)
            log.info(
                "service started",
                db=str(store.path),
                jobs=[job.name for job in self._scheduler.get_jobs()],
                timezone=self.config.service.timezone,
                pid=os.getpid(),
                role="leader",
            )
            self.notifier.ready(status=self._status_text(len(due)))
            stopped_by = self._main_loop(self._scheduler, lead)
        except BaseException:
            self.stop_event.set()
            if self._scheduler.running:
                self._scheduler.shutdown(wait=True)
            raise
        if stopped_by == LOST:
            self.stop_event.set()
            self._scheduler.shutdown(wait=True)
            return LOST
        self.notifier.stopping(status="stopping: finishing the current batch")
        log.info("stopping", signal=signal.Signals(stopped_by).name)
        self.stop_event.set()
        self._scheduler.shutdown(wait=True)
        log.info("service stopped")
        return stopped_by

    def _main_loop(self, scheduler: BackgroundScheduler, lead: Leadership) -> int:
        """Handle signals, ping the watchdog, wake the scheduler, refresh the fleet row;
        return the stop signal, or LOST when the lead ended."""
        interval = watchdog_interval()
        next_ping = next_beat = time.monotonic()
        while True:
            if lead.lost():
                return LOST
            if time.monotonic() >= next_beat:
                lead.beat(leading=True)
                next_beat = time.monotonic() + lead.beat_seconds
            for signum in self._inbox.wait(self.tick_seconds):
                if signum in STOP_SIGNALS:
                    return signum
                if signum in RELOAD_SIGNALS:
                    self.reload()
            if not self._healthy(scheduler):
                raise MemkeeperError("the scheduler thread stopped unexpectedly; exiting")
            # Re-read the wall clock now: fires due after a suspend or a clock step run at
            # once rather than after the scheduler's own (monotonic) sleep.
            scheduler.wakeup()
            if interval is not None and time.monotonic() >= next_ping:
                self.notifier.watchdog()
                next_ping = time.monotonic() + interval

    @staticmethod
    def _healthy(scheduler: BackgroundScheduler) -> bool:
        thread = getattr(scheduler, "_thread", None)
        return scheduler.running and (thread is None or thread.is_alive())

    # -- reload -------------------------------------------------------------------------------

    def reload(self) -> bool:
        """Re-read the config file; keep the running configuration if the new one is invalid."""
        self.notifier.reloading()
        try:
            config = load_config(self.config_path, explicit=self.config_explicit)
            triggers = job_triggers(config)
        except Exception as exc:  # ConfigError, or anything else: the service carries on
            log.error(
                "configuration reload rejected; keeping the running configuration",
                error=str(exc),
            )
            self.notifier.ready(status=f"reload rejected, previous configuration kept: {exc}")
            return False
        changed = [
            f"database.{key}"
            for key in RESTART_ONLY_KEYS
            if getattr(config.database, key) != getattr(self.config.database, key)
        ]
        if changed:
            log.warning("these settings take effect at the next start", keys=changed)
        takeover = config.service.takeover_seconds
        if self._lead is not None and takeover != self.config.service.takeover_seconds:
            set_takeover(self._lead.storage, takeover)
            self._lead.apply_takeover(takeover)
        self.config = config
        for store in (self._store, self._mcp_store):
            if store is not None:
                store.config = config
        if self._scheduler is not None and self._jobs is not None:
            schedule_jobs(self._scheduler, config, self._jobs, triggers)
        self._configure_logging(config)
        log.info("configuration reloaded", path=str(self.config_path))
        self.notifier.ready(status=self._status_text(0))
        return True

    # -- helpers ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _mcp_server(self) -> Iterator[None]:
        """The MCP HTTP server (``run --mcp``) in a thread while the service runs, on its own
        store (actor ``mcp``); stopped (requests in flight get a few seconds) once the
        scheduler has stopped."""
        if self.mcp_plan is None:
            yield
            return
        from memkeeper.mcp.http import HttpServer

        with MemoryStore(self.db, config=self.config, actor="mcp") as store:
            server = HttpServer(store, self.mcp_plan)
            server.start()
            self._mcp_store = store
            try:
                yield
            finally:
                self._mcp_store = None
                server.stop()

    def _configure_logging(self, config: Config) -> None:
        level = self.log_level or config.logging.level
        logs.configure(level=level, fmt=config.logging.format)
        # APScheduler narrates every add and removal at INFO; the service logs what matters.
        chatty = logging.getLogger("apscheduler.scheduler")
        chatty.setLevel(logging.DEBUG if level == "debug" else logging.WARNING)

    def _status_text(self, catching_up: int) -> str:
        scheduled = sum(getattr(self.config.jobs, name).enabled for name in JOB_ORDER)
        text = f"{scheduled} jobs scheduled ({self.config.service.timezone})"
        return f"{text}; catching up {catching_up}" if catching_up else text
