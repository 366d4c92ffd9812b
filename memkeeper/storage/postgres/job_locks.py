"""Process locks on PostgreSQL: the service's lead, the job locks, per memory schema.

On SQLite these are ``flock`` files beside the database (:mod:`memkeeper.maintenance.locks`);
a PostgreSQL memory has no file every host can see, so the lock is a **session-level advisory
lock** (``pg_try_advisory_lock``) taken on a connection of its own, opened for the lock and
held while the job runs. The server drops it when that session ends — the holder exits, is
killed, or loses its connection — just as the kernel drops a dead process's flock, so a lock
left by a killed process is never obeyed.

Why a dedicated connection: a session lock belongs to the session that took it, so it must not
be taken on the store's own connection (whose transactions come and go) nor on a pooled one
(returned to the pool while the lock is still held). The key is ``(LOCK_CLASS, crc32 of
"<schema>.<name>")``: stable across processes and hosts, distinct per schema and per lock
name, and apart from the migration and write locks (another class).

A lock is exclusive (``pg_try_advisory_lock``) or shared (``pg_try_advisory_lock_shared``:
held by many at once, excluding an exclusive holder): every job run holds the ``jobs`` lock
shared and its own ``job:<name>`` exclusively; ``undo`` holds ``jobs`` exclusively
(:mod:`memkeeper.maintenance.locks`).

The interface is :class:`~memkeeper.maintenance.locks.FileLock`'s: ``acquire(wait_seconds)``
polls until the deadline and raises :class:`~memkeeper.errors.LockBusy` naming the holder
(its ``application_name`` carries the holding process's pid and host), ``release``, ``hold``.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
import zlib
from collections.abc import Iterator

import psycopg

from memkeeper.clock import system_now
from memkeeper.errors import DatabaseUnreachable, LockBusy, PoolerDetected
from memkeeper.logs import get_logger
from memkeeper.storage.postgres import leadership
from memkeeper.storage.postgres.pool import APPLICATION_NAME, DEFAULT_CONNECT_TIMEOUT, connect
from memkeeper.storage.postgres.url import DatabaseUrl

LOCK_CLASS = 0x4D4B4A42  # "MKJB": job and service locks (the migration/write class is "MKHD")
POLL_SECONDS = 0.1
DEFAULT_IDLE_LIMIT_SECONDS = 15.0
"""A holder that stops answering loses its lock after this long (``service.takeover_seconds``
where the caller passes it)."""

log = get_logger(__name__)

_HOLDER = (
    "SELECT a.pid, a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s"
    " AND l.objsubid = 2 AND l.mode = ANY(%s) AND l.database = (SELECT oid FROM pg_database"
    " WHERE datname = current_database()) ORDER BY a.backend_start LIMIT 1"
)
_EXCLUSIVE_MODE = ["ExclusiveLock"]
_ANY_MODE = ["ExclusiveLock", "ShareLock"]


_LABEL = re.compile(re.escape(APPLICATION_NAME) + r" pid (\d+) on (.*)")
"""The ``application_name`` a lock's session carries (its holder, for messages)."""


def lock_key(schema: str, name: str) -> int:
    """The lock's second key: a stable 31-bit hash of the schema and the lock's name."""
    return zlib.crc32(f"{schema}.{name}".encode()) & 0x7FFFFFFF


def _as_oid(key: int) -> int:
    """``pg_locks.classid``/``objid`` show an int4 key as an unsigned oid."""
    return key & 0xFFFFFFFF


class AdvisoryLock:
    """An exclusive, non-reentrant lock named ``name`` in one PostgreSQL memory schema."""

    def __init__(
        self,
        url: DatabaseUrl,
        schema: str,
        name: str,
        purpose: str,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        shared: bool = False,
    ) -> None:
        self.url = url
        self.schema = schema
        self.name = name
        self.purpose = purpose
        self.shared = shared
        """Held with others holding it shared too; excludes (and waits for) an exclusive one."""
        self.key = lock_key(schema, name)
        self.connect_timeout = connect_timeout
        self._conn: psycopg.Connection | None = None
        self.idle_limit_seconds = DEFAULT_IDLE_LIMIT_SECONDS
        """The server ends the lock's session after this long without a statement; the
        holder's pinger runs a statement four times as often while it is alive."""
        self.fenced = name in ("daemon", "jobs") or name.startswith("job:")
        """Each acquisition starts a new epoch in ``leadership`` (steps 0003, 0004): see there."""
        self.epoch: int | None = None
        """The epoch this holder started (of ``name``, or of ``<name>:shared`` when shared)."""
        self.epochs: dict[str, int] | None = None
        """What this holder's fence checks: the epochs that must not change while it holds."""
        self.lost = threading.Event()
        """Set by the pinger when the lock's session ended (the lock may be someone else's)."""
        self.keep_connection = False
        """Keep the session between tries that found the lock taken (a follower trying every
        second stands by on one connection, not a new one per try)."""
        self._spare: psycopg.Connection | None = None
        self._backend_pid: int | None = None
        self._pinger: threading.Thread | None = None
        self._stop_pinging = threading.Event()

    @property
    def path(self) -> str:
        """Where the lock lives, for messages (the URL, its password masked)."""
        return f"{self.url} advisory lock {self.schema}.{self.name}"

    @property
    def held(self) -> bool:
        return self._conn is not None

    def _try(self, conn: psycopg.Connection) -> bool:
        take = "pg_try_advisory_lock_shared" if self.shared else "pg_try_advisory_lock"
        row = conn.execute(f"SELECT {take}(%s, %s)", (LOCK_CLASS, self.key)).fetchone()
        return bool(row and row[0])

    def _holder_row(
        self, conn: psycopg.Connection, *, exclusive_only: bool | None = None
    ) -> tuple[int, int | None, str] | None:
        """(server pid, holder's pid, holder's host) of a session holding the lock: the one in
        the way of this lock (an exclusive holder when this one is shared), or any holder."""
        only = self.shared if exclusive_only is None else exclusive_only
        modes = _EXCLUSIVE_MODE if only else _ANY_MODE
        row = conn.execute(_HOLDER, (_as_oid(LOCK_CLASS), _as_oid(self.key), modes)).fetchone()
        if row is None:
            return None
        found = _LABEL.fullmatch(row[1] or "")
        return (row[0], int(found[1]), found[2]) if found else (row[0], None, "")

    def _holder(self, conn: psycopg.Connection) -> str:
        try:
            row = self._holder_row(conn)
        except psycopg.Error:
            return "another process"
        if row is None:
            return "another process"
        server_pid, pid, host = row
        if pid is None:
            return f"server pid {server_pid}"
        return f"pid {pid} on {host} (server pid {server_pid})"

    def acquire(self, wait_seconds: float = 0.0, *, asked: float | None = None) -> None:
        """Take the lock, waiting up to ``wait_seconds``; raise LockBusy if it stays taken
        (saying it waited ``asked`` seconds: the caller's whole wait, default this one)."""
        if self._conn is not None:
            raise RuntimeError(f"{self.purpose} lock is already held by this object")
        conn, kept = self._spare, True
        self._spare = None
        try:
            if conn is None or conn.closed or conn.broken:
                conn, kept = self._session(), False
            deadline = time.monotonic() + max(wait_seconds, 0.0)
            while not self._try(conn):
                if time.monotonic() >= deadline:
                    holder = self._holder(conn)
                    shown = wait_seconds if asked is None else asked
                    waited = f" after waiting {shown:g} s" if shown else ""
                    if self.keep_connection:
                        self._spare, conn = conn, None
                    raise LockBusy(
                        f"the {self.purpose} lock ({self.path}) is held by {holder}{waited}"
                    )
                time.sleep(POLL_SECONDS)
            self._backend_pid = check_session(conn, self.key, self.path)
            self._new_epoch(conn)
        except psycopg.OperationalError as exc:
            if conn is not None:
                conn.close()
            if kept:  # the kept session died meanwhile (the server ended it): a new one
                return self.acquire(wait_seconds, asked=asked)
            raise self._lost(exc) from None
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        self._conn = conn
        self.lost.clear()
        self._stop_pinging.clear()
        self._pinger = threading.Thread(
            target=self._ping, args=(conn,), name=f"memkeeper-lock-{self.name}", daemon=True
        )
        self._pinger.start()

    def _session(self) -> psycopg.Connection:
        """A new session for the lock, labelled with its holder (pid, host) for messages."""
        conn = connect(self.url, connect_timeout=self.connect_timeout, autocommit=True)
        try:
            label = f"{APPLICATION_NAME} pid {os.getpid()} on {leadership.host_name()}"[:63]
            conn.execute("SELECT set_config('application_name', %s, false)", (label,))
            self._set_idle_limit(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _set_idle_limit(self, conn: psycopg.Connection) -> None:
        idle_ms = str(int(self.idle_limit_seconds * 1000))
        conn.execute("SELECT set_config('idle_session_timeout', %s, false)", (idle_ms,))

    def set_idle_limit(self, seconds: float) -> None:
        """A new ``service.takeover_seconds`` (a reload): on the held or kept session now,
        and the pinger's pace follows at its next ping."""
        self.idle_limit_seconds = seconds
        for conn in (self._conn, self._spare):
            if conn is not None:
                with contextlib.suppress(psycopg.Error):
                    self._set_idle_limit(conn)

    def _new_epoch(self, conn: psycopg.Connection) -> None:
        """Start this holder's epoch and note what its fence checks (module ``leadership``):
        an exclusive holder bumps ``name`` and must see no shared holder start after it
        (``<name>:shared`` unchanged); a shared one bumps ``<name>:shared`` (so a deposed
        exclusive holder stops) and must see no exclusive holder start after it."""
        self.epoch, self.epochs = None, None
        if not self.fenced or not leadership.has_fleet_tables(conn, self.schema):
            return
        mine, other = self.name, leadership.shared_name(self.name)
        if self.shared:
            mine, other = other, mine
        self.epoch = leadership.bump_epoch(
            conn, self.schema, mine, host=leadership.host_name(), pid=os.getpid(), now=system_now()
        )
        # A shared holder's own row moves with every other shared holder: not checked.
        self.epochs = {} if self.shared else {mine: self.epoch}
        if self.shared or self.name in leadership.TAKEN_SHARED:
            self.epochs[other] = leadership.read_epoch(conn, self.schema, other)

    def _ping(self, conn: psycopg.Connection) -> None:
        """Keep the session alive (idle_session_timeout) and notice when it ended."""
        while not self._stop_pinging.wait(max(self.idle_limit_seconds / 4, 0.05)):
            try:
                row = conn.execute("SELECT pg_backend_pid()").fetchone()
            except psycopg.Error as exc:
                log.warning("lock session lost", lock=self.name, reason=_first_line(exc))
                self.lost.set()
                return
            if row is None or row[0] != self._backend_pid:
                log.error(
                    "lock session changed backend: a transaction-mode pooler?", lock=self.name
                )
                self.lost.set()
                return

    def ping_now(self) -> bool:
        """One ping from the caller's thread; False (and :attr:`lost` set) when it failed."""
        conn = self._conn
        if conn is None or self.lost.is_set():
            return False
        try:
            conn.execute("SELECT 1")
        except psycopg.Error:
            self.lost.set()
        return not self.lost.is_set()

    @property
    def connection(self) -> psycopg.Connection | None:
        """The lock's own session while held (the fleet's heartbeat writes on it)."""
        return self._conn

    def _lost(self, exc: psycopg.Error) -> DatabaseUnreachable:
        """The lock's connection failed (the server went away): memkeeper's own error."""
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return DatabaseUnreachable(
            f"the connection to {self.url} was lost while taking the {self.purpose} lock ({first})"
        )

    def release(self) -> None:
        """Give the lock up; closing the session would drop it too (a lost connection)."""
        spare, self._spare = self._spare, None
        if spare is not None:
            spare.close()
        if self._conn is None:
            return
        conn, self._conn = self._conn, None
        self._stop_pinging.set()
        if self._pinger is not None and self._pinger is not threading.current_thread():
            self._pinger.join(timeout=5)
        self._pinger = None
        with contextlib.suppress(psycopg.Error):
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, self.key))
        conn.close()

    @contextlib.contextmanager
    def hold(self, wait_seconds: float = 0.0) -> Iterator[AdvisoryLock]:
        """``with lock.hold(wait):`` — acquire, yield, always release."""
        self.acquire(wait_seconds)
        try:
            yield self
        finally:
            self.release()

    def holder_state(self) -> dict[str, object]:
        """Whether a session holds the lock now, and the holding process's pid (``status``),
        without taking it."""
        with connect(self.url, connect_timeout=self.connect_timeout, autocommit=True) as conn:
            try:
                row = self._holder_row(conn, exclusive_only=False)
            except psycopg.OperationalError as exc:
                raise self._lost(exc) from None
        return {"running": row is not None, "pid": row[1] if row else None}


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def check_session(conn: psycopg.Connection, key: int, where: str) -> int:
    """The backend pid holding lock ``key`` on ``conn``; PoolerDetected when the lock just
    taken is not held by the session the next statement runs on (a transaction-mode pooler
    hands each statement to any server connection: a session lock cannot be held through it).
    """
    row = conn.execute(
        "SELECT pg_backend_pid(), EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'"
        " AND granted AND pid = pg_backend_pid() AND classid = %s AND objid = %s"
        " AND objsubid = 2)",
        (_as_oid(LOCK_CLASS), _as_oid(key)),
    ).fetchone()
    if row is None or not row[1]:
        raise PoolerDetected(
            f"{where}: the lock just taken is not held by this connection's session; the URL "
            "goes through a transaction-mode pooler (PgBouncer pool_mode=transaction?). The "
            "service and run-once need a direct or session-mode connection for their locks "
            "(agents may keep the pooler)"
        )
    return int(row[0])
