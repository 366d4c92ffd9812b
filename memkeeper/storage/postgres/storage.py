"""A store's storage on PostgreSQL: one connection pool, hot and cold tables in one schema.

:class:`PostgresStorage` is the :class:`~memkeeper.storage.base.Storage` of a PostgreSQL
database. The layers above see the same object: ``hot`` is the database handle, and
``cold()`` is the *same* handle, since cold storage is the table ``cold_memories`` beside
``memories``. A move between them is therefore one transaction: the transition mechanism's
crash protocol of two files (``moves_in_flight``) is not needed and not written
(:attr:`one_database`).

Opening connects (a refused password is :class:`~memkeeper.errors.AuthenticationFailed`, an
unreachable server :class:`~memkeeper.errors.DatabaseUnreachable`, each one line naming the
target, never the password), creates or migrates memkeeper's schema, and opens the store's
connection pool (``pool_size`` connections at most, ``[database] pool_size``): every
connection gets memkeeper's schema first on its ``search_path``. ``lock`` is a per-thread
connection lease and ``hot`` resolves to the calling thread's connection
(:mod:`~memkeeper.storage.postgres.leases`): the store's threads run at once, isolated by
PostgreSQL's locks, not by a mutex.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from memkeeper import logs
from memkeeper.clock import system_now
from memkeeper.errors import DatabaseMissing
from memkeeper.storage.base import DEFAULT_AUTOCHECKPOINT, Storage
from memkeeper.storage.postgres.as_found import Found, found_in
from memkeeper.storage.postgres.database import prepared
from memkeeper.storage.postgres.images import current_images
from memkeeper.storage.postgres.job_locks import AdvisoryLock
from memkeeper.storage.postgres.leases import ConnectionLease, PooledDatabase
from memkeeper.storage.postgres.pool import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_POOL_SIZE,
    Pool,
    connect,
)
from memkeeper.storage.postgres.schema import (
    DEFAULT_SCHEMA,
    KNOWN_STEPS,
    applied_steps,
    extension_schemas,
    migrate,
)
from memkeeper.storage.postgres.url import DatabaseUrl, parse_url

# psycopg and its pool log through the stdlib: their records must meet the CLI's handler.
logs.settle()


class PostgresStorage(Storage):
    """memkeeper's tables in one PostgreSQL schema, behind the Storage interface."""

    one_database = True

    def __init__(
        self,
        url: DatabaseUrl | str,
        *,
        schema: str = DEFAULT_SCHEMA,
        create: bool = True,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        synchronous: str = "normal",
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        self.url = url if isinstance(url, DatabaseUrl) else parse_url(url)
        self.synchronous = synchronous
        self.schema = schema
        self.autocheckpoint_pages = DEFAULT_AUTOCHECKPOINT
        self.connect_timeout = connect_timeout
        self.hot_raw = self.cold_raw = None
        self.found_on_opening: Found | None = None
        raw = connect(self.url, connect_timeout=connect_timeout)
        try:
            if not create and applied_steps(raw, schema) is None:
                raise DatabaseMissing(
                    f"memory database {self.url} (schema {schema!r}) does not exist "
                    "(nothing was created); check --db, MEMKEEPER_DB or database.url"
                )
            # What opening may add (the schema, the extensions): a failed migrate-to copy
            # takes it away again (memkeeper.storage.postgres.as_found).
            self.found_on_opening = found_in(raw, schema)
            raw.rollback()
            steps = migrate(raw, schema, now=system_now(), where=str(self.url))
            self.created = KNOWN_STEPS[0] in steps  # the first step: this opening made it
            raw.autocommit = True
            search_path = [schema, *(s for s in extension_schemas(raw) if s != schema)]
        finally:
            raw.close()
        # What sets up each session, apart from the storage: the pool holds it, and the
        # pool must not hold the storage, whose finalizer closes the pool.
        self.sessions = Sessions(self.url, connect_timeout, synchronous, search_path)
        self.pool = Pool(
            self.url,
            schema=schema,
            min_size=1,
            max_size=pool_size,
            connect_timeout=connect_timeout,
            configure=self.sessions.configure,
            autocommit=True,
            checked=False,
        ).open()
        # A store a program drops without close() gives its connections back when it is
        # collected (at once, by reference counting: nothing of the pool refers back here).
        self._release = weakref.finalize(self, self.pool.close)
        self._release.atexit = False  # the process's end closes every connection anyway
        self.lock = ConnectionLease(  # type: ignore[assignment]
            self.pool, schema, open_direct=self.sessions.open, where=str(self.url)
        )
        self.hot = PooledDatabase(self.lock)  # type: ignore[assignment]

    def backend_pids(self) -> set[int]:
        """The server processes of this store's open connections (pooled, idle or leased,
        and any opened beside the pool after a reconnect), as ``pg_stat_activity`` and
        ``pg_locks`` show them."""
        return self.sessions.backend_pids()

    @property
    def hot_path(self) -> str:  # type: ignore[override]
        """The database, named for messages: the URL, its password masked."""
        return str(self.url)

    @property
    def cold_path(self) -> str:  # type: ignore[override]
        """Cold storage is a table of the same database."""
        return str(self.url)

    def autocheckpoint(self, pages: int) -> None:
        """SQLite's WAL setting: nothing to do on PostgreSQL (the server checkpoints)."""
        self.autocheckpoint_pages = pages

    def cold(self, *, create: bool) -> PooledDatabase:  # type: ignore[override]
        """Cold storage: the same database (its table ``cold_memories``)."""
        return self.hot  # type: ignore[return-value]

    def current_images(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Where each id lives now: hot and cold read in one round trip."""
        return current_images(self.hot, ids)[0]

    def current_images_and(
        self, ids: Sequence[str], reads: Sequence[tuple[str, Sequence[Any]]]
    ) -> tuple[dict[str, dict[str, Any]], list[list[dict[str, Any]]]]:
        """Where each id lives now and the rows of ``reads``: all in one round trip."""
        return current_images(self.hot, ids, reads)

    def check_cold_file(self, cold: object) -> None:
        """No file to be swapped or deleted under us: the table is in the same database."""

    def checkpoint(self) -> None:
        """The server checkpoints by itself."""

    def write_without_sync(self) -> None:
        """``synchronous_commit = off`` for this store's session."""
        self.hot.execute("SET synchronous_commit = off")

    def process_lock(self, name: str, purpose: str, *, shared: bool = False) -> AdvisoryLock:
        """The lock ``name`` (``daemon``, ``jobs``, ``job:<name>``) of this memory: a session
        advisory lock on a connection of its own (:mod:`memkeeper.storage.postgres.job_locks`)."""
        return AdvisoryLock(
            self.url,
            self.schema,
            name,
            purpose,
            connect_timeout=self.connect_timeout,
            shared=shared,
        )

    def close(self) -> None:
        """Close the pool: its idle connections now, a leased one when its lease ends."""
        self._release()


class Sessions:
    """How a store's sessions are set up (the pool's and those a lease opens beside it), and
    which are open: apart from :class:`PostgresStorage` so the pool does not refer to it."""

    def __init__(
        self, url: DatabaseUrl, connect_timeout: float, synchronous: str, search_path: list[str]
    ) -> None:
        self.url = url
        self.connect_timeout = connect_timeout
        self.synchronous = synchronous
        self.search_path = search_path
        self._opened: weakref.WeakSet[psycopg.Connection] = weakref.WeakSet()
        self._opened_lock = threading.Lock()

    def configure(self, raw: psycopg.Connection) -> None:
        """Client-side parameters, memkeeper's schema first on the search path, and the
        commit durability of ``database.synchronous``: ``normal`` is SQLite's WAL ``NORMAL``
        (``synchronous_commit = off``: a crash of the server or the machine may lose the
        last commits, about half a second's, and never corrupts), ``full`` waits for the
        WAL flush of every commit (the server's default). An erasure always waits for it."""
        raw.cursor_factory = psycopg.ClientCursor
        prepared(raw)
        with self._opened_lock:
            self._opened.add(raw)
        durable = "on" if self.synchronous == "full" else "off"
        raw.execute(f"SET synchronous_commit = {durable}")
        raw.execute(
            sql.SQL("SET search_path TO {}").format(
                sql.SQL(", ").join(sql.Identifier(s) for s in self.search_path)
            )
        )

    def open(self) -> psycopg.Connection:
        """A new connection like the pool's, outside it (for a lease whose connection the
        server dropped: a refused password or a dead host is reported at once)."""
        raw = connect(self.url, connect_timeout=self.connect_timeout, autocommit=True)
        try:
            self.configure(raw)
        except BaseException:
            raw.close()
            raise
        return raw

    def backend_pids(self) -> set[int]:
        """The server processes of the open connections (pooled, idle or leased, and any
        opened beside the pool after a reconnect)."""
        with self._opened_lock:
            opened = list(self._opened)
        return {raw.info.backend_pid for raw in opened if not raw.closed}
