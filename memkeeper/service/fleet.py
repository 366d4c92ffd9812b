"""Who schedules: the service's leadership of its memory (one leader per PostgreSQL memory).

On SQLite a memory is one file on one host: the service takes the ``daemon`` flock and a
second service on the same file is refused (LockBusy, exit 75), as before fleets.

On PostgreSQL every ``memkeeper run`` of a fleet tries the ``daemon`` session advisory lock
(:mod:`memkeeper.storage.postgres.job_locks`); the holder leads (schedules the jobs), the
others stand by, try again every :data:`POLL_SECONDS` and take over when the leader's
session ends: at once when it exits or is killed, within ``service.takeover_seconds`` when it
stops answering (paused, partitioned; the server ends its idle session). A leader whose
session ended (a server restart, a killed backend) notices through the lock's pinger or its
own ping before each job, stops scheduling and stands by again. Job writes are fenced by the
job lock's epoch (:mod:`memkeeper.storage.postgres.leadership`). Every service refreshes its
row in ``fleet_members`` every few seconds, for ``status``.
"""

from __future__ import annotations

import contextlib
import os
from datetime import timedelta
from typing import Any

from memkeeper import logs
from memkeeper.clock import system_now
from memkeeper.errors import DatabaseUnreachable, LockBusy, MemkeeperError
from memkeeper.maintenance.locks import daemon_lock, service_state, set_leader_epoch
from memkeeper.store import MemoryStore

log = logs.get_logger("memkeeper.service")

POLL_SECONDS = 1.0
SOLO_LOCK_WAIT_SECONDS = 0.5
"""A ``status`` probing the SQLite lock holds it for microseconds; a starting service waits
this long for it rather than mistaking the probe for another service."""


class Leadership:
    """The service's claim on its memory: :meth:`try_lead`, :meth:`still_leading`, :meth:`beat`."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.storage = store.storage
        self.lock = daemon_lock(self.storage)
        self.fleet = getattr(self.storage, "process_lock", None) is not None
        self.takeover_seconds = float(store.config.service.takeover_seconds)
        if self.fleet:
            self.lock.idle_limit_seconds = self.takeover_seconds  # type: ignore[attr-defined]
            self.lock.keep_connection = True  # type: ignore[attr-defined]
        self.started = system_now()
        self.pid = os.getpid()
        self._member: Any = None
        self._unreachable = False

    @property
    def beat_seconds(self) -> float:
        return min(2.0, self.takeover_seconds / 4)

    @property
    def poll_seconds(self) -> float:
        return min(POLL_SECONDS, self.takeover_seconds / 4)

    def apply_takeover(self, seconds: float) -> None:
        """A reloaded ``service.takeover_seconds``: the lead's session limit and ping pace,
        the tries' and heartbeats' pace, and the heartbeat session's limit, now (a running
        job's session keeps its limit until the job ends; the next job takes the new one)."""
        self.takeover_seconds = float(seconds)
        if self.fleet:
            self.lock.set_idle_limit(self.takeover_seconds)  # type: ignore[attr-defined]
            self._drop_connection()  # reopened at the next beat, with the new limit

    def try_lead(self) -> bool:
        """Take the lead if it is free. SQLite: raises LockBusy when another service runs."""
        if not self.fleet:
            try:
                self.lock.acquire(SOLO_LOCK_WAIT_SECONDS)
            except LockBusy:
                pid = service_state(self.storage)["pid"]
                holder = f" (pid {pid})" if pid else ""
                raise LockBusy(
                    f"another memkeeper service{holder} is already running on "
                    f"{self.store.path}; only one service may run per SQLite database (a "
                    "fleet of services on several hosts needs a PostgreSQL memory)"
                ) from None
            return True
        try:
            self.lock.acquire(0)
        except LockBusy:
            return False
        except DatabaseUnreachable as exc:
            self._report_unreachable(exc)
            return False
        self._unreachable = False
        set_leader_epoch(self.storage, self.lock.epoch)  # type: ignore[attr-defined]
        return True

    def _report_unreachable(self, exc: MemkeeperError) -> None:
        if not self._unreachable:
            log.warning("database unreachable; standing by until it answers", error=str(exc))
        self._unreachable = True

    def still_leading(self) -> bool:
        """Whether this service still holds the lead (one round trip on the lock's session)."""
        if not self.fleet:
            return self.lock.held
        return self.lock.held and self.lock.ping_now()  # type: ignore[attr-defined]

    def lost(self) -> bool:
        """True once the lock's pinger saw its session end (no round trip)."""
        return self.fleet and self.lock.lost.is_set()  # type: ignore[attr-defined]

    def step_down(self) -> None:
        """Give the lead up (or forget a lock whose session already ended)."""
        set_leader_epoch(self.storage, None)
        self.lock.release()

    def leader(self) -> dict[str, Any] | None:
        """The current leader's lease as recorded (host, pid, since), or None."""
        state = self._state()
        return state["leader"] if state else None

    def _state(self) -> dict[str, Any] | None:
        from memkeeper.storage.postgres import leadership

        try:
            conn = self._connection()
            return leadership.fleet_state(
                conn,
                self.storage.schema,  # type: ignore[attr-defined]
                now=system_now(),
                recent=timedelta(seconds=self.takeover_seconds * 2),
            )
        except Exception as exc:  # a status read must never stop the service
            self._drop_connection()
            log.debug("fleet state unreadable", error=str(exc))
            return None

    def beat(self, *, leading: bool) -> None:
        """Refresh this service's row in ``fleet_members`` (PostgreSQL only)."""
        if not self.fleet:
            return
        from memkeeper.storage.postgres import leadership

        try:
            leadership.beat(
                self._connection(),
                self.storage.schema,  # type: ignore[attr-defined]
                host=leadership.host_name(),
                pid=self.pid,
                role="leader" if leading else "follower",
                started=self.started,
                now=system_now(),
            )
        except Exception as exc:
            self._drop_connection()
            log.debug("fleet heartbeat failed", error=str(exc))

    def _connection(self) -> Any:
        if self._member is None or self._member.closed or self._member.broken:
            from memkeeper.storage.postgres.leadership import member_session
            from memkeeper.storage.postgres.pool import connect

            self._member = member_session(
                connect(
                    self.storage.url,  # type: ignore[attr-defined]
                    connect_timeout=self.storage.connect_timeout,  # type: ignore[attr-defined]
                    autocommit=True,
                ),
                self.takeover_seconds,
            )
        return self._member

    def _drop_connection(self) -> None:
        if self._member is not None:
            with contextlib.suppress(Exception):
                self._member.close()
        self._member = None

    def close(self) -> None:
        """Release the lead and leave the fleet (a clean stop)."""
        self.step_down()
        if self.fleet and self._member is not None:
            from memkeeper.storage.postgres import leadership

            with contextlib.suppress(Exception):
                leadership.leave(
                    self._member,
                    self.storage.schema,  # type: ignore[attr-defined]
                    host=leadership.host_name(),
                    pid=self.pid,
                )
        self._drop_connection()


def leader_text(leader: dict[str, Any] | None) -> str:
    """``host/pid`` of a lease (for "standing by, leader is …")."""
    if not leader:
        return "unknown"
    return f"{leader['host']}/{leader['pid']}"
