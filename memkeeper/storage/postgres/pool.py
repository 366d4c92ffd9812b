"""One connection pool per store, with no thread of its own.

Why psycopg 3: it is the maintained PostgreSQL driver for Python (libpq underneath, so every
libpq setting, environment variable, ``.pgpass`` and service file works as operators expect;
server-side parameters; pgvector ships adapters for it).

Why a pool of memkeeper's own rather than ``psycopg_pool``: a store's pool must work in the
programs memkeeper is for, and time-travel tests are one of them. ``psycopg_pool`` keeps a
scheduler thread and worker threads whose deadlines read ``time.monotonic``, which freezegun
freezes in some frames and not in others: under a frozen clock its scheduler never saw its
stop task, so every pool a program dropped kept its threads and connections ("couldn't stop
thread"), and the server ran out of connections after a few dozen stores. :class:`Pool` has
no thread at all: a caller borrows an idle connection, or opens one itself while the pool is
below its size, or waits (``threading.Condition``, whose timeout is the real clock's) for one
to come back, up to the connect timeout. A connection that comes back dead, broken or in an
unknown state is closed and its place freed (the next borrower opens a new one); one that
lived past :data:`MAX_LIFETIME` or idled past :data:`MAX_IDLE` beyond the pool's minimum is
closed as it passes. A store's pool is closed by ``close()``, or when the store is dropped
(:class:`~memkeeper.storage.postgres.storage.PostgresStorage` closes it from a finalizer).
A session-scoped need (an advisory lock held by the one scheduler) takes a dedicated
connection, not a pooled one.

Connections are opened by :func:`~memkeeper.storage.postgres.connecting.connect` (a bounded
timeout; a refused password or a dead host as memkeeper's own error, in one line).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

from memkeeper.errors import DatabaseUnreachable
from memkeeper.logs import get_logger
from memkeeper.storage.postgres.connecting import (  # noqa: F401 - connect's names, kept here
    APPLICATION_NAME,
    DEFAULT_CONNECT_TIMEOUT,
    connect,
    connect_kwargs,
    translate_connect_error,
)
from memkeeper.storage.postgres.url import DatabaseUrl

log = get_logger(__name__)

DEFAULT_MAX_SIZE = 10
DEFAULT_POOL_SIZE = 4
"""A store's connections at most (``[database] pool_size``): threads beyond it wait for one."""
MAX_LIFETIME = 3600.0
"""Seconds a pooled connection serves at most; it is closed when it next comes back (the
server's memory of a long session is returned, a moved host is picked up)."""
MAX_IDLE = 600.0
"""Seconds a connection beyond the pool's minimum may stay idle before it is closed."""


class PoolClosed(psycopg.OperationalError):
    """A connection was asked of a closed pool (the store was closed): a programming error."""


def _alive(raw: psycopg.Connection) -> bool:
    """Whether ``raw`` answers an empty statement now (outside any transaction)."""
    if raw.closed or raw.broken:
        return False
    try:
        if raw.autocommit:
            raw.execute("")
        else:
            raw.autocommit = True
            raw.execute("")
            raw.autocommit = False
    except psycopg.Error:
        return False
    return True


class Pool:
    """A store's connection pool: no thread of its own, bounded size and waits.

    ``schema``: every connection's ``search_path`` starts with memkeeper's schema (then the
    schemas the vector and trigram extensions live in, so their types and operators resolve
    on managed servers that keep extensions apart, and ``public``). ``configure`` replaces
    that setup (a store's: :class:`~memkeeper.storage.postgres.storage.Sessions`);
    ``checked`` false hands connections out without the round trip that tests each (a
    store's leases find a dead one on their first statement and reconnect, as
    :class:`~memkeeper.storage.postgres.database.PostgresConnection` does).
    """

    def __init__(
        self,
        url: DatabaseUrl,
        *,
        schema: str,
        extension_schemas: tuple[str, ...] = ("public",),
        min_size: int = 1,
        max_size: int = DEFAULT_MAX_SIZE,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        configure: Callable[[psycopg.Connection], None] | None = None,
        autocommit: bool = False,
        checked: bool = True,
    ) -> None:
        self.url = url
        self.schema = schema
        self.connect_timeout = connect_timeout
        self.min_size = min(min_size, max_size)
        self.max_size = max_size
        path = [schema, *(s for s in extension_schemas if s != schema)]
        self._search_path = sql.SQL(", ").join(sql.Identifier(s) for s in path)
        self._autocommit = autocommit
        self._setup = configure or self._configure
        self._checked = checked
        self._ready = threading.Condition(threading.Lock())
        self._idle: list[tuple[psycopg.Connection, float]] = []  # (connection, idle since)
        self._born: dict[int, float] = {}  # id(connection) -> when it was opened
        self._size = 0  # open connections: idle, lent, and being opened
        self._waiting = 0
        self._opened = 0  # connections opened in all
        self._closed = True

    def _configure(self, conn: psycopg.Connection) -> None:
        conn.execute(sql.SQL("SET search_path TO {}").format(self._search_path))
        if not conn.autocommit:
            conn.commit()

    def open(self, *, probe: bool = True) -> Pool:
        """Open the pool's minimum of connections now (so a refused password or a dead host
        is reported here, in one line); ``probe`` is kept for callers that connected a moment
        ago (the first connection tells the same either way)."""
        del probe  # the first connection is the probe: nothing runs in the background
        with self._ready:
            self._closed = False
        try:
            opened = [self._reserve_and_connect() for _ in range(self.min_size)]
        except BaseException:
            self.close()
            raise
        for raw in opened:
            self.putconn(raw)
        log.debug("postgres pool open", target=self.url.target(), schema=self.schema)
        return self

    def _connect(self) -> psycopg.Connection:
        extra: dict[str, Any] = {"autocommit": True} if self._autocommit else {}
        raw = connect(self.url, connect_timeout=self.connect_timeout, **extra)
        try:
            self._setup(raw)
            if raw.info.transaction_status != TransactionStatus.IDLE:
                raw.commit()
        except BaseException:
            raw.close()
            raise
        with self._ready:
            self._born[id(raw)] = time.monotonic()
            self._opened += 1
        return raw

    def _reserve_and_connect(self) -> psycopg.Connection:
        with self._ready:
            self._size += 1
        return self._connect_reserved()

    def _connect_reserved(self) -> psycopg.Connection:
        """A new connection for a place already counted in the size (freed on failure)."""
        try:
            return self._connect()
        except BaseException:
            with self._ready:
                self._size -= 1
                self._ready.notify()
            raise

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """Borrow a connection for one transaction (committed on success, rolled back on error)."""
        raw = self.getconn()
        try:
            yield raw
        except BaseException:
            if not raw.closed:
                with contextlib.suppress(psycopg.Error):
                    raw.rollback()
            raise
        else:
            if not raw.closed and not raw.autocommit:
                raw.commit()
        finally:
            self.putconn(raw)

    def getconn(self) -> psycopg.Connection:
        """Borrow a connection (for a lease that spans several statements); give it back
        with :meth:`putconn`. Waits ``connect_timeout`` at most for a free one."""
        stale: list[psycopg.Connection] = []
        try:
            with self._ready:
                self._check_open()
                stale = self._idled_out()
                if not self._idle and self._size >= self.max_size:
                    self._wait_for_room()
                if self._idle:
                    raw, _since = self._idle.pop()  # the most recently used: warm, alive
                else:
                    self._size += 1
                    raw = None
        finally:
            for old in stale:
                self._close(old)
        if raw is None:
            return self._connect_reserved()
        if self._checked and not _alive(raw):
            self._discard(raw)
            return self.getconn()
        return raw

    def _check_open(self) -> None:
        if self._closed:
            raise PoolClosed(f"the connection pool of {self.url.target()} is closed")

    def _wait_for_room(self) -> None:
        """Wait (the lock held, released while waiting) until a connection comes back or a
        place frees; the real clock bounds it, whatever a test does to time.monotonic."""
        self._waiting += 1
        try:
            ready = self._ready.wait_for(
                lambda: self._closed or bool(self._idle) or self._size < self.max_size,
                timeout=self.connect_timeout,
            )
        finally:
            self._waiting -= 1
        self._check_open()
        if not ready:
            busy = self._size - len(self._idle)
            raise DatabaseUnreachable(
                f"no PostgreSQL connection to {self.url.target()} free or reachable within "
                f"{self.connect_timeout:g} s ({busy} of at most {self.max_size} in use; "
                "[database] pool_size sets the most)"
            )

    def _idled_out(self) -> list[psycopg.Connection]:
        """Take the connections idle past :data:`MAX_IDLE` beyond the minimum out of the pool
        (the lock held; the caller closes them)."""
        now = time.monotonic()
        out: list[psycopg.Connection] = []
        while self._idle and self._size > self.min_size and now - self._idle[0][1] > MAX_IDLE:
            raw, _since = self._idle.pop(0)  # the least recently used first
            self._size -= 1
            out.append(raw)
        return out

    def putconn(self, conn: psycopg.Connection) -> None:
        """Give a borrowed connection back: rolled back if a transaction was left open; a
        broken, closed or worn-out one is closed and its place freed."""
        keep = self._reusable(conn)
        with self._ready:
            if keep and not self._closed:
                self._idle.append((conn, time.monotonic()))
                self._ready.notify()
                return
            self._size -= 1
            self._ready.notify()
        if not keep:
            log.debug("the pool discarded a connection", target=self.url.target())
        self._close(conn)

    def adopt(self, conn: psycopg.Connection) -> None:
        """Take in a connection opened beside the pool and set up as its own are (a lease's,
        in place of a pooled one that died), so the pool keeps its connections without a new
        connect; closed instead when the pool is closed or full, or the connection unusable."""
        if self._reusable(conn):
            with self._ready:
                if not self._closed and self._size < self.max_size:
                    self._size += 1
                    self._born[id(conn)] = time.monotonic()
                    self._idle.append((conn, time.monotonic()))
                    self._ready.notify()
                    return
        self._close(conn)

    def _reusable(self, conn: psycopg.Connection) -> bool:
        if conn.closed or conn.broken:
            return False
        status = conn.info.transaction_status
        if status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            try:
                conn.rollback()
            except psycopg.Error:
                return False
        elif status != TransactionStatus.IDLE:  # a statement still running, or unknown
            return False
        born = self._born.get(id(conn))
        return born is None or time.monotonic() - born <= MAX_LIFETIME

    def _discard(self, conn: psycopg.Connection) -> None:
        with self._ready:
            self._size -= 1
            self._ready.notify()
        self._close(conn)

    def _close(self, conn: psycopg.Connection) -> None:
        with self._ready:
            self._born.pop(id(conn), None)
        with contextlib.suppress(psycopg.Error):
            conn.close()

    def check(self) -> None:
        """Test the idle connections now and close the dead (after a server restart); the
        next borrowers open new ones in their place."""
        with self._ready:
            idle, self._idle = self._idle, []
        alive: list[tuple[psycopg.Connection, float]] = []
        dead: list[psycopg.Connection] = []
        for raw, since in idle:
            if _alive(raw):
                alive.append((raw, since))
            else:
                dead.append(raw)
        with self._ready:
            if self._closed:
                dead += [raw for raw, _since in alive]
                alive = []
            self._idle = alive + self._idle
            self._size -= len(dead)
            self._ready.notify(len(dead) or 1)
        for raw in dead:
            self._close(raw)

    def stats(self) -> dict[str, int]:
        """The pool's counters, for status and tests: ``pool_size`` (open, idle or lent),
        ``pool_available`` (idle), ``requests_waiting``, ``pool_min``, ``pool_max`` and
        ``connections_num`` (opened in all)."""
        with self._ready:
            return {
                "pool_min": self.min_size,
                "pool_max": self.max_size,
                "pool_size": self._size,
                "pool_available": len(self._idle),
                "requests_waiting": self._waiting,
                "connections_num": self._opened,
            }

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the pool: its idle connections now, a lent one when it comes back; waiting
        borrowers hear :class:`PoolClosed`. Closing twice is harmless."""
        with self._ready:
            self._closed = True
            idle, self._idle = self._idle, []
            self._size -= len(idle)
            self._ready.notify_all()
        for raw, _since in idle:
            self._close(raw)

    def __enter__(self) -> Pool:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()
