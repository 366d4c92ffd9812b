"""The database handle on PostgreSQL: the calls storage makes on SQLite's, on one connection.

Storage functions take a handle and call ``execute``, ``query``, ``atomic`` and, through
``handle.conn``, the connection's ``execute`` / ``executemany`` / ``in_transaction``.
:class:`PostgresDatabase` offers the same calls on a psycopg connection, so the one
transition mechanism, the change log, explain, undo and the jobs run unchanged on both
backends; each statement goes through :func:`~memkeeper.storage.postgres.dialect.translate`.

How the connection behaves, and why:

- **autocommit, explicit transactions**, as memkeeper opens SQLite (``isolation_level=None``):
  a statement outside a transaction commits by itself; ``BEGIN`` ... ``COMMIT`` and savepoints
  are issued by :meth:`PostgresDatabase.atomic` and :meth:`write_transaction`.
- **client-side parameters** (``psycopg.ClientCursor``): values are quoted into the statement
  as literals, so a ``? IS NULL`` or a ``CASE`` over a parameter needs no type, as in SQLite.
- **one writer at a time**: :meth:`write_transaction` takes a transaction-scoped advisory lock
  first, the counterpart of SQLite's ``BEGIN IMMEDIATE``: every re-check of the transition
  mechanism ("is the entry still as the job saw it?") then holds until the commit. Readers
  never wait for it (MVCC); writers wait at most one short transaction (jobs size theirs
  with ``lock_hold_ms``).
- **numbers as SQLite gives them**: ``numeric`` results (``sum`` of a bigint, ``avg``) come
  back as ``int`` when whole, else ``float``, never ``Decimal``; booleans bound as 0/1.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql as psql
from psycopg.adapt import Loader
from psycopg.pq import TransactionStatus

from memkeeper.storage.connection import _LAZY_KEYWORDS, _first_keyword, _keys
from memkeeper.storage.postgres.dialect import translate

LOCK_CLASS = 0x4D4B4844  # "MKHD", as the migration lock (schema.LOCK_CLASS)
LOCK_WRITE = 2
_SAVEPOINTS = itertools.count(1)


class _NumberLoader(Loader):
    """``numeric`` as ``int`` when whole, else ``float`` (SQLite's types, JSON-friendly)."""

    def load(self, data: bytes | bytearray | memoryview) -> int | float:
        text = bytes(data).decode("ascii")
        if "." not in text and "e" not in text.lower() and text not in ("NaN", "Infinity"):
            return int(text)
        return float(text)


def _bound(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value


def _parameters(parameters: Sequence[Any] | Mapping[str, Any]) -> Any:
    if isinstance(parameters, Mapping):
        return {name: _bound(value) for name, value in parameters.items()}
    return [_bound(value) for value in parameters]


class PostgresConnection:
    """The part of ``sqlite3.Connection`` storage uses, on a psycopg connection."""

    __slots__ = ("raw",)

    def __init__(self, raw: psycopg.Connection) -> None:
        self.raw = raw

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != TransactionStatus.IDLE

    def execute(self, sql: str, parameters: Any = None) -> psycopg.Cursor:
        if parameters is None:
            return self.raw.execute(translate(sql, False))
        return self.raw.execute(translate(sql), _parameters(parameters))

    def executemany(self, sql: str, seq_of_parameters: Any) -> psycopg.Cursor:
        cursor = self.raw.cursor()
        rows = [_parameters(parameters) for parameters in seq_of_parameters]
        if rows:
            cursor.executemany(translate(sql), rows)
        return cursor

    def cursor(self) -> psycopg.Cursor:
        return self.raw.cursor()

    def close(self) -> None:
        self.raw.close()


class PostgresDatabase:
    """One PostgreSQL connection with the calls of :class:`~memkeeper.storage.connection.
    Database`; storage functions take either as their ``db``."""

    dialect = "postgres"
    __slots__ = ("__weakref__", "conn", "schema")

    def __init__(self, raw: psycopg.Connection, schema: str) -> None:
        raw.adapters.register_loader("numeric", _NumberLoader)
        self.conn = PostgresConnection(raw)
        self.schema = schema

    @property
    def raw(self) -> psycopg.Connection:
        """The psycopg connection (PostgreSQL-only statements: ``psycopg.sql`` compositions)."""
        return self.conn.raw

    def execute(self, sql: str, parameters: Any = None) -> psycopg.Cursor:
        return self.conn.execute(sql, parameters)

    def executescript(self, sql: str) -> psycopg.Cursor:
        """Several statements at once (no parameters): PostgreSQL runs them as one string."""
        return self.conn.execute(sql)

    def query(self, sql: str, params: Any = None) -> Iterator[dict[str, Any]]:
        cursor = self.execute(sql, params)
        if cursor.description is None:
            raise ValueError("query() is for SQL that returns rows; use execute()")
        keys = _keys(cursor)  # type: ignore[arg-type]
        if _first_keyword(sql) in _LAZY_KEYWORDS:
            return (dict(zip(keys, row, strict=True)) for row in cursor)
        return iter([dict(zip(keys, row, strict=True)) for row in cursor.fetchall()])

    @contextlib.contextmanager
    def atomic(self) -> Iterator[PostgresDatabase]:
        """A transaction, or a savepoint inside one; rolled back when the block raises."""
        raw = self.raw
        if self.conn.in_transaction:
            name = psql.Identifier(f"memkeeper_{next(_SAVEPOINTS)}")
            raw.execute(psql.SQL("SAVEPOINT {}").format(name))
            try:
                yield self
            except BaseException:
                if self.conn.in_transaction:
                    raw.execute(psql.SQL("ROLLBACK TO SAVEPOINT {}").format(name))
                    raw.execute(psql.SQL("RELEASE SAVEPOINT {}").format(name))
                raise
            raw.execute(psql.SQL("RELEASE SAVEPOINT {}").format(name))
            return
        raw.execute("BEGIN")
        try:
            yield self
            raw.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                with contextlib.suppress(psycopg.Error):
                    raw.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def write_transaction(self) -> Iterator[PostgresDatabase]:
        """A write transaction that first takes memkeeper's write lock (see the module
        docstring); inside another transaction, a savepoint (taking the lock there too, if a
        read-only transaction began it: a session may hold it more than once)."""
        with self.atomic():
            self.raw.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, LOCK_WRITE))
            yield self

    def close(self) -> None:
        self.conn.close()
