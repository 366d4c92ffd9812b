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
- **one writer per user at a time**: :meth:`write_transaction` takes memkeeper's write locks
  first (:mod:`~memkeeper.storage.postgres.write_locks`), the counterpart of SQLite's
  ``BEGIN IMMEDIATE`` narrowed to the users written: every re-check of the transition
  mechanism ("is the entry still as the job saw it?") holds until the commit, agents of
  other users never wait, and readers never wait at all (MVCC).
- **numbers as SQLite gives them**: ``numeric`` results (``sum`` of a bigint, ``avg``) come
  back as ``int`` when whole, else ``float``, never ``Decimal``; booleans bound as 0/1.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from memkeeper.errors import DatabaseUnreachable
from memkeeper.storage.postgres.dialect import one_statement, translate
from memkeeper.storage.postgres.named_statements import rows_named, sent_together
from memkeeper.storage.postgres.numbers import prepared
from memkeeper.storage.postgres.result_columns import column_names
from memkeeper.storage.postgres.round_trips import DEFERRED, Pending, retryable
from memkeeper.storage.postgres.write_locks import (
    Scope,
    blocking_locks,
    lock_users,
    tried,
    trying_locks,
)
from memkeeper.storage.sqlite.connection import _LAZY_KEYWORDS, _first_keyword

_SAVEPOINTS = itertools.count(1)
Rows = list[list[dict[str, Any]]]  # several reads' rows, each row a dict
Statement = tuple[str, Any]  # (sql, parameters)

_IN_TRANSACTION = frozenset(
    {TransactionStatus.INTRANS, TransactionStatus.INERROR, TransactionStatus.ACTIVE}
)


def _bound(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value


def _parameters(parameters: Sequence[Any] | Mapping[str, Any]) -> Any:
    if isinstance(parameters, Mapping):
        return {name: _bound(value) for name, value in parameters.items()}
    return [_bound(value) for value in parameters]


class PostgresConnection:
    """The part of ``sqlite3.Connection`` storage uses, on a psycopg connection.

    A connection the server dropped (a restart, a failover, a killed backend) is replaced
    by a new one from ``opener`` before the next statement outside a transaction; a read or
    a ``BEGIN`` that found it dead runs once more on the new one. Inside a transaction a lost
    connection fails the transaction (it rolled back on the server): the caller hears
    :class:`~memkeeper.errors.DatabaseUnreachable` and nothing it was writing committed.

    Statements that need no answer of their own wait in :attr:`pending` and go in front of
    the next one, in the same round trip (:class:`~memkeeper.storage.postgres.round_trips.
    Pending`): a transaction's ``BEGIN`` and locks, savepoints, writes deferred by
    :func:`~memkeeper.storage.postgres.round_trips.sent_with_next`.
    """

    __slots__ = ("opener", "pending", "raw", "where")

    def __init__(
        self,
        raw: psycopg.Connection,
        opener: Callable[[], psycopg.Connection] | None = None,
        where: str = "PostgreSQL",
    ) -> None:
        self.raw = prepared(raw)
        self.opener = opener
        self.where = where
        self.pending = Pending()

    @property
    def in_transaction(self) -> bool:
        """In a transaction (its ``BEGIN`` perhaps not sent yet; a dead connection is in
        none: its transaction is gone)."""
        return self.pending.unopened or self._server_in_transaction

    @property
    def _server_in_transaction(self) -> bool:
        return self.raw.info.transaction_status in _IN_TRANSACTION

    def _reopen(self) -> None:
        if self.opener is None:
            if self.raw.closed:
                raise psycopg.InterfaceError("the connection is closed (the store was closed)")
            raise DatabaseUnreachable(f"the connection to {self.where} was lost")
        with contextlib.suppress(psycopg.Error):
            self.raw.close()
        self.raw = prepared(self.opener())

    def _run(
        self, call: Callable[[], psycopg.Cursor], sql: str, before: Sequence[str] = ()
    ) -> psycopg.Cursor:
        if self.raw.closed or self.raw.broken:
            self._reopen()
        outside = not self._server_in_transaction
        try:
            return call()
        except psycopg.OperationalError as exc:
            if not self.raw.broken:
                raise  # a statement's own error (a lock timeout, a cancel): not the link
            keywords = [_first_keyword(part) for part in (*before, sql)]
            if outside and retryable(keywords):
                self._reopen()
                return call()
            raise DatabaseUnreachable(
                f"the connection to PostgreSQL was lost during a statement ({self.where}: "
                f"{_reason(exc)}); what it was writing did not commit"
            ) from None

    def quoted(self, text: str, bound: Any) -> str:
        """The statement as sent, its parameters quoted in (psycopg's client-side binding)."""
        return psycopg.ClientCursor(self.raw).mogrify(text, bound)

    def defer(self, sql: str, parameters: Any = None) -> None:
        """Send ``sql`` with the next statement (its result is never read)."""
        text = translate(sql, parameters is not None)
        if parameters is not None:
            text = self.quoted(text, _parameters(parameters))
        self.pending.parts.append(text)

    def execute(self, sql: str, parameters: Any = None) -> psycopg.Cursor:
        if self.pending.deferring and self.in_transaction:
            self.defer(sql, parameters)
            return DEFERRED  # type: ignore[return-value]
        if parameters is None:
            text = translate(sql, False)
            if self.pending.parts:
                return self._with_pending(text, sql)
            return self._run(lambda: self.raw.execute(text), sql)
        text, bound = translate(sql), _parameters(parameters)
        if self.pending.parts:
            return self._with_pending(self.quoted(text, bound), sql)
        return self._run(lambda: self.raw.execute(text, bound), sql)

    def _with_pending(self, text: str, sql: str) -> psycopg.Cursor:
        """``text`` sent behind the pending statements in one round trip; the cursor on its
        own result."""
        before = self.pending.take()
        joined = "; ".join([*before, text])

        def call() -> psycopg.Cursor:
            cursor = self.raw.execute(joined)
            for _ in before:
                cursor.nextset()
            return cursor

        return self._run(call, sql, before)

    def read_together(
        self, statements: Sequence[Statement], then: Sequence[str] = (), *, named: bool = False
    ) -> Rows:
        """The rows (dicts) of several reads (each ``(sql, parameters)``), in order, sent in one
        round trip behind any pending statements; ``then``: plain statements after them.
        ``named``: sent as ``EXECUTE`` of statements the session keeps prepared
        (:mod:`~memkeeper.storage.postgres.named_statements`), when the string opens its own
        transaction or runs in none (so that a failure of theirs can be sent again whole)."""
        before = self.pending.take() if self.pending.parts else []
        bound = [(translate(sql), _parameters(params)) for sql, params in statements]
        named = named and not self._server_in_transaction
        keywords = [sql for sql, _ in statements]  # what _run reads of them: first words
        return self._run(  # type: ignore[arg-type,return-value]
            lambda: sent_together(self, before, bound, then, named=named),
            keywords[-1],
            [*before, *keywords[:-1]],
        )

    def read_named(self, sql: str, parameters: Sequence[Any]) -> list[tuple[Any, ...]]:
        """The rows of one read, sent as ``EXECUTE`` of a statement the session keeps
        prepared (:mod:`~memkeeper.storage.postgres.named_statements`) when no transaction is
        open and nothing waits to be sent; otherwise as :meth:`execute` sends it."""
        if self.in_transaction or self.pending.parts:
            return list(self.execute(sql, parameters).fetchall())
        bound = [(translate(sql), _parameters(parameters))]
        return self._run(lambda: rows_named(self, bound), sql)  # type: ignore[arg-type,return-value]

    def flush(self) -> None:
        """Send the pending statements now (someone is about to use the raw connection)."""
        if self.pending.parts:
            parts = self.pending.take()
            self._run(lambda: self.raw.execute("; ".join(parts)), parts[-1], parts[:-1])

    def on_raw(self, call: Callable[[psycopg.Connection], Any]) -> Any:
        """``call(raw)``, run again on a new connection as a read is (leases.py: on_raw)."""
        self.flush()
        return self._run(lambda: call(self.raw), "SELECT")

    def executemany(self, sql: str, seq_of_parameters: Any) -> psycopg.Cursor:
        rows = [_parameters(parameters) for parameters in seq_of_parameters]
        text = translate(sql)
        merged = one_statement(text, rows)  # many rows of an INSERT, UPDATE or DELETE
        if self.pending.deferring and self.in_transaction:
            for statement, bound in [merged] if merged else [(text, row) for row in rows]:
                self.pending.parts.append(self.quoted(statement, bound))
            return DEFERRED  # type: ignore[return-value]
        self.flush()

        def many() -> psycopg.Cursor:
            cursor = self.raw.cursor()
            if merged is not None:
                cursor.execute(*merged)
            elif rows:
                cursor.executemany(text, rows)
            return cursor

        return self._run(many, sql)

    def cursor(self) -> psycopg.Cursor:
        self.flush()
        return self.raw.cursor()

    def close(self) -> None:
        """Close for good: a closed store's connection is never reopened."""
        self.opener = None
        self.pending.discard()
        self.raw.close()


def _reason(exc: psycopg.Error) -> str:
    """The first line of the server's or libpq's message (it never holds the password)."""
    return (str(exc).strip().splitlines() or ["connection lost"])[0]


class PostgresDatabase:
    """One PostgreSQL connection with the calls of :class:`~memkeeper.storage.sqlite.connection.
    Database`; storage functions take either as their ``db``."""

    dialect = "postgres"
    __slots__ = ("__weakref__", "conn", "fence", "opened", "schema", "scope")

    def __init__(
        self,
        raw: psycopg.Connection,
        schema: str,
        *,
        opener: Callable[[], psycopg.Connection] | None = None,
        where: str = "PostgreSQL",
    ) -> None:
        self.conn = PostgresConnection(raw, opener, where)
        self.schema = schema
        self.scope: Scope | None = None
        """What the write transaction in progress holds (None: none in progress)."""
        self.fence: Callable[[PostgresConnection], Callable[[BaseException], Any] | None] | None
        self.fence = None
        """Run before each COMMIT while a job lock is held (:class:`~memkeeper.storage.postgres.
        leadership.Fence`): raises when the lock was lost, or queues a check sent with the
        COMMIT and returns what reads the COMMIT's error (the ``LockLost`` to raise, or None)."""
        self.opened: psycopg.Cursor | None = None
        """The cursor of the last ``BEGIN`` and its opening (the result of the lock tries)."""

    @property
    def raw(self) -> psycopg.Connection:
        """The psycopg connection (PostgreSQL-only statements: ``psycopg.sql`` compositions),
        with every pending statement sent first."""
        self.conn.flush()
        return self.conn.raw

    def execute(self, sql: str, parameters: Any = None) -> psycopg.Cursor:
        return self.conn.execute(sql, parameters)

    def executescript(self, sql: str) -> psycopg.Cursor:
        """Several statements at once (no parameters): PostgreSQL runs them as one string."""
        return self.conn.execute(sql)

    def query(self, sql: str, params: Any = None) -> Iterator[dict[str, Any]]:
        cursor = self.execute(sql, params)
        keys = column_names(cursor)
        if keys is None:
            raise ValueError("query() is for SQL that returns rows; use execute()")
        if _first_keyword(sql) in _LAZY_KEYWORDS:
            return (dict(zip(keys, row, strict=True)) for row in cursor)
        return iter([dict(zip(keys, row, strict=True)) for row in cursor.fetchall()])

    @contextlib.contextmanager
    def atomic(
        self, opening: str | None = None, *, answered: bool = False
    ) -> Iterator[PostgresDatabase]:
        """A transaction, or a savepoint inside one; rolled back when the block raises.

        ``opening``: a statement without parameters sent with the ``BEGIN`` (the write
        locks); inside a transaction it runs after the savepoint. The ``BEGIN``, the opening
        and a savepoint wait for the block's first statement and go with it, in its round
        trip (``answered``: the opening is sent at once, :attr:`opened` holding its answer).
        """
        conn = self.conn
        pending = conn.pending
        if conn.in_transaction:
            name = f'"memkeeper_{next(_SAVEPOINTS)}"'
            mark = pending.mark()
            pending.parts.append(f"SAVEPOINT {name}")
            try:
                if opening is not None:
                    conn.execute(opening)
                yield self
            except BaseException:
                left = pending.drop_since(mark)  # True: nothing of the savepoint was sent
                if not left and conn.in_transaction and not conn.raw.broken:
                    conn.execute(f"ROLLBACK TO SAVEPOINT {name}; RELEASE SAVEPOINT {name}")
                raise
            pending.parts.append(f"RELEASE SAVEPOINT {name}")
            return
        begin = ["BEGIN"] if opening is None else ["BEGIN", opening]
        self.opened = None
        if answered:  # on a live connection (a dead one is replaced first), in one trip
            self.opened = conn.execute("; ".join(begin))
        else:
            pending.parts[:0] = begin  # nothing else is pending outside a transaction
            pending.unopened = True
        try:
            yield self
            refusal = self.fence(conn) if self.fence is not None else None
            try:
                conn.execute("COMMIT")
            except psycopg.Error as exc:
                if refusal is not None and (lost := refusal(exc)) is not None:
                    raise lost from None
                raise
        except BaseException:
            pending.discard()
            if conn.in_transaction and not conn.raw.broken:
                with contextlib.suppress(psycopg.Error):
                    conn.raw.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def write_transaction(
        self, users: Collection[str] | None = None, *, try_users: bool = False
    ) -> Iterator[PostgresDatabase]:
        """A write transaction holding memkeeper's write locks (``write_locks``): for
        ``users`` only, or (None) for the whole memory; with ``try_users`` (a job) the users
        already being written are left out (:attr:`busy_users`) instead of waited for.

        Inside another write transaction, a savepoint: the outermost one declared what is
        written; a nested one adds the users it names that the outer did not hold.
        """
        outer = self.scope is None
        tries = try_users and users is not None
        ordered: list[str] = []
        opening, scope = None, None
        if outer and tries:
            opening, ordered = trying_locks(users or ())
        elif outer:
            opening, scope = blocking_locks(users)
        # A user-scoped write's locks go with its first statement (they guard statements:
        # every read and write of the transaction runs under them); a job's tries are read
        # at once, and a write of the whole memory takes its lock before the block runs.
        answered = outer and (scope is None or scope.everything)
        with self.atomic(opening, answered=answered):
            if outer:
                if scope is None:  # the tries, answered in the BEGIN's round trip
                    assert self.opened is not None
                    self.opened.nextset()
                    scope = tried(ordered, self.opened.fetchone())
                self.scope = scope
            elif users is not None and not self.scope.covers(users):
                more = lock_users(self.conn, set(users) - self.scope.users, wait=True, shared=False)
                self.scope.users |= more.users
            try:
                yield self
            finally:
                if outer:
                    self.scope = None

    @property
    def busy_users(self) -> frozenset[str]:
        """The users the current write transaction tried and left to their writers."""
        return self.scope.busy if self.scope is not None else frozenset()

    def close(self) -> None:
        self.conn.close()
