"""A store's storage on PostgreSQL: one connection, hot and cold tables in one schema.

:class:`PostgresStorage` is the :class:`~memkeeper.storage.base.Storage` of a PostgreSQL
database. The layers above see the same object: ``hot`` is the database handle, and
``cold()`` is the *same* handle, since cold storage is the table ``cold_memories`` beside
``memories``. A move between them is therefore one transaction: the transition mechanism's
crash protocol of two files (``moves_in_flight``) is not needed and not written
(:attr:`one_database`).

Opening connects (a refused password is :class:`~memkeeper.errors.AuthenticationFailed`, an
unreachable server :class:`~memkeeper.errors.DatabaseUnreachable`, each one line naming the
target, never the password), creates or migrates memkeeper's schema, and sets the
connection's ``search_path`` to it.
"""

from __future__ import annotations

import threading

import psycopg
from psycopg import sql

from memkeeper.clock import system_now
from memkeeper.errors import DatabaseMissing
from memkeeper.storage.base import DEFAULT_AUTOCHECKPOINT, Storage
from memkeeper.storage.postgres.database import PostgresDatabase
from memkeeper.storage.postgres.job_locks import AdvisoryLock
from memkeeper.storage.postgres.pool import DEFAULT_CONNECT_TIMEOUT, connect
from memkeeper.storage.postgres.schema import (
    DEFAULT_SCHEMA,
    applied_steps,
    extension_schemas,
    migrate,
)
from memkeeper.storage.postgres.url import DatabaseUrl, parse_url


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
    ) -> None:
        self.url = url if isinstance(url, DatabaseUrl) else parse_url(url)
        self.synchronous = synchronous
        self.schema = schema
        self.lock = threading.RLock()
        self.autocheckpoint_pages = DEFAULT_AUTOCHECKPOINT
        self.connect_timeout = connect_timeout
        self.hot_raw = self.cold_raw = None
        raw = connect(self.url, connect_timeout=connect_timeout)
        try:
            if not create and applied_steps(raw, schema) is None:
                raise DatabaseMissing(
                    f"memory database {self.url} (schema {schema!r}) does not exist "
                    "(nothing was created); check --db, MEMKEEPER_DB or database.url"
                )
            raw.rollback()
            migrate(raw, schema, now=system_now(), where=str(self.url))
            raw.autocommit = True
            self._search_path = [schema, *(s for s in extension_schemas(raw) if s != schema)]
            self._configure(raw)
        except BaseException:
            raw.close()
            raise
        self.hot = PostgresDatabase(  # type: ignore[assignment]
            raw, schema, opener=self._open, where=str(self.url)
        )

    def _configure(self, raw: psycopg.Connection) -> None:
        """Client-side parameters, memkeeper's schema first on the search path, and the
        commit durability of ``database.synchronous``: ``normal`` is SQLite's WAL ``NORMAL``
        (``synchronous_commit = off``: a crash of the server or the machine may lose the
        last commits, about half a second's, and never corrupts), ``full`` waits for the
        WAL flush of every commit (the server's default). An erasure always waits for it."""
        raw.cursor_factory = psycopg.ClientCursor
        durable = "on" if self.synchronous == "full" else "off"
        raw.execute(f"SET synchronous_commit = {durable}")
        raw.execute(
            sql.SQL("SET search_path TO {}").format(
                sql.SQL(", ").join(sql.Identifier(s) for s in self._search_path)
            )
        )

    def _open(self) -> psycopg.Connection:
        """A new connection like the first (after the server dropped the old one)."""
        raw = connect(self.url, connect_timeout=self.connect_timeout, autocommit=True)
        try:
            self._configure(raw)
        except BaseException:
            raw.close()
            raise
        return raw

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

    def cold(self, *, create: bool) -> PostgresDatabase:  # type: ignore[override]
        """Cold storage: the same database (its table ``cold_memories``)."""
        return self.hot  # type: ignore[return-value]

    def check_cold_file(self, cold: object) -> None:
        """No file to be swapped or deleted under us: the table is in the same database."""

    def checkpoint(self) -> None:
        """The server checkpoints by itself."""

    def process_lock(self, name: str, purpose: str) -> AdvisoryLock:
        """The lock ``name`` (``jobs``, ``daemon``) of this memory: a session advisory lock
        on a connection of its own (:mod:`memkeeper.storage.postgres.job_locks`)."""
        return AdvisoryLock(
            self.url, self.schema, name, purpose, connect_timeout=self.connect_timeout
        )

    def close(self) -> None:
        with self.lock:
            if not self.hot.conn.raw.closed:  # type: ignore[attr-defined]
                self.hot.close()
