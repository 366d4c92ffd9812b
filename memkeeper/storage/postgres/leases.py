"""A store's connections on PostgreSQL: one pool, a connection leased to each thread in turn.

On SQLite ``storage.lock`` is a mutex: the store's threads share one connection and take
turns. On PostgreSQL it is a :class:`ConnectionLease`: re-entrant per thread, and not
exclusive between threads. The outermost ``with storage.lock:`` of a thread borrows a
connection from the store's pool (:class:`~memkeeper.storage.postgres.pool.Pool`) and binds
it to that thread; nested ones reuse it; leaving the outermost gives it back (rolled back
first if a transaction was left open). Threads of one store therefore run on separate
connections at once, and what isolates their writes is PostgreSQL's own locking: the write
locks of :mod:`~memkeeper.storage.postgres.write_locks` (one writer per user) and MVCC
(readers never wait).

``storage.hot`` is a :class:`PooledDatabase`: the calls of a database handle, each on the
calling thread's leased connection; outside a lease, a statement borrows a connection for
itself alone (and a transaction, for the transaction). Its ``conn`` resolves the thread's
connection at every call, so a handle kept in a variable never reaches another thread's.
``raw`` (psycopg's connection itself, for ``psycopg.sql`` statements) exists only inside a
lease. A lazy ``query()`` may be consumed after its lease ended: psycopg's client-side
cursor holds the whole result once the statement returned, so reading it touches no
connection.

A leased connection the server dropped is replaced for the rest of the lease by a new one
opened directly (so a refused password or a dead host says so at once, as on a store's
first connect); the dead one goes back to the pool, which closes it, the pool's idle
connections are tested then (after a restart, they died too), and the new one joins the pool
in the dead one's place when the lease ends.
"""

from __future__ import annotations

import contextlib
import re
import threading
import weakref
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any

import psycopg

from memkeeper.logs import get_logger
from memkeeper.storage.postgres.database import PostgresDatabase
from memkeeper.storage.postgres.pool import Pool
from memkeeper.storage.postgres.round_trips import Pending, transaction_in_one_trip
from memkeeper.storage.postgres.session_settings import apply_settings
from memkeeper.storage.postgres.write_locks import Scope

if TYPE_CHECKING:
    from memkeeper.storage.postgres.leadership import Fence

log = get_logger(__name__)


class _Held:
    """One thread's lease: its database handle, how deep its ``with`` blocks nest, and the
    pool's connection it borrowed (None once that one died and a direct one replaced it)."""

    __slots__ = ("borrowed", "db", "depth")

    def __init__(self, db: PostgresDatabase, borrowed: psycopg.Connection) -> None:
        self.db = db
        self.borrowed: psycopg.Connection | None = borrowed
        self.depth = 0


class ConnectionLease:
    """``storage.lock`` on PostgreSQL: the calling thread's connection, re-entrant."""

    def __init__(
        self,
        pool: Pool,
        schema: str,
        *,
        open_direct: Callable[[], psycopg.Connection],
        where: str,
    ) -> None:
        self.pool = pool
        self.schema = schema
        self.where = where
        self._open_direct = open_direct
        self._local = threading.local()
        self._applied: weakref.WeakKeyDictionary[psycopg.Connection, dict[str, str | None]] = (
            weakref.WeakKeyDictionary()
        )
        """The thread settings each pooled session holds now (a value None: perhaps changed,
        reset it), so that a lease sets only what differs from the session it borrowed."""

    def current(self) -> PostgresDatabase | None:
        """The calling thread's leased handle, None outside a lease."""
        held = getattr(self._local, "held", None)
        return held.db if held is not None else None

    def __enter__(self) -> ConnectionLease:
        held = getattr(self._local, "held", None)
        if held is None:
            held = self._borrow()
            self._local.held = held
        held.depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        held: _Held = self._local.held
        held.depth -= 1
        if held.depth == 0:
            self._local.held = None
            self._give_back(held)

    def _borrow(self) -> _Held:
        raw = self.pool.getconn()
        held = _Held(PostgresDatabase(raw, self.schema, where=self.where), raw)
        held.db.conn.opener = lambda: self._replace(held)
        held.db.fence = self._check_fence
        self._settle(raw, getattr(self._local, "settings", None) or {})
        return held

    def _settle(self, raw: psycopg.Connection, wanted: dict[str, str | None]) -> None:
        """Give ``raw``'s session this thread's settings (``wanted``) and the server's default
        for the others a lease set there before. A job borrows a connection for each of its
        batches: setting its limits at every borrow and resetting them at every give-back
        was two round trips a batch, as many as the batch itself, for what the session
        mostly held already (the same thread borrowed it last)."""
        held = self._applied.get(raw, {})
        changes: dict[str, str | None] = {
            name: value for name, value in wanted.items() if held.get(name) != value
        }
        changes.update((name, None) for name in held if name not in wanted)
        if changes:
            self._applied[raw] = apply_settings(raw, changes, held)

    # A job's fence and session settings belong to the thread that holds the job lock: every
    # lease that thread takes (each may get another pooled connection) carries them, and
    # the other threads' (agents' on the same store) never do.

    def _check_fence(self, conn: Any) -> Callable[[BaseException], Any] | None:
        """The thread's fence before a ``COMMIT``, sent with it
        (:meth:`~memkeeper.storage.postgres.leadership.Fence.before_commit`): what reads the
        ``COMMIT``'s error (None: no fence)."""
        fence = getattr(self._local, "fence", None)
        if fence is None:
            return None
        fence.before_commit(conn)
        return fence.refusal

    @property
    def thread_fence(self) -> Fence | None:
        """The check every commit of this thread runs (a job's lock epochs), or None."""
        return getattr(self._local, "fence", None)

    @thread_fence.setter
    def thread_fence(self, fence: Fence | None) -> None:
        self._local.fence = fence

    def thread_setting(self, name: str, value: str | None) -> None:
        """A session setting for this thread's connections (None: the server's default),
        on the one leased now and on each it borrows later; reset by the next lease of that
        connection for a thread without it (:meth:`_settle`)."""
        settings: dict[str, str | None] = self._local.__dict__.setdefault("settings", {})
        settings[name] = value
        db = self.current()
        if value is None:
            settings.pop(name, None)
        if db is not None:
            raw = db.conn.raw
            applied = apply_settings(raw, {name: value}, self._applied.get(raw, {}))
            if db.conn.in_transaction:  # undone if the transaction rolls back
                applied[name] = None
            self._applied[raw] = applied

    def _replace(self, held: _Held) -> psycopg.Connection:
        """A new connection for the rest of ``held``'s lease (its own one died)."""
        log.info("a pooled connection was lost: reconnecting", where=self.where)
        if held.borrowed is not None:
            dead, held.borrowed = held.borrowed, None
            self.pool.putconn(dead)  # closed by now: the pool frees its place
            with contextlib.suppress(psycopg.Error):
                self.pool.check()  # a restart killed the idle ones too
        fresh = self._open_direct()
        settings = getattr(self._local, "settings", None)
        if settings:  # a job's limits hold on the new session too (the lease's thread)
            self._applied[fresh] = apply_settings(fresh, settings, {})
        return fresh

    def _give_back(self, held: _Held) -> None:
        raw = held.db.conn.raw
        held.db.conn.pending.discard()  # never sent: nothing to roll back of them
        if held.db.conn.in_transaction and not raw.broken:
            log.warning("a lease ended inside a transaction: rolled back", where=self.where)
            with contextlib.suppress(psycopg.Error):
                raw.rollback()
        held.db.scope = None
        # The thread's settings stay on the session: the next lease of it sets or resets
        # only what differs for its own thread (``_settle``), usually nothing.
        if held.borrowed is raw:
            self.pool.putconn(raw)
        else:  # a direct connection that replaced a dead one: the pool's now, in its place
            self.pool.adopt(raw)

    def status(self) -> dict[str, int]:
        """The pool at a glance: its most (``size``), how many are open and in use, and
        how many threads wait for one (the caller's own lease counts as in use)."""
        stats = self.pool.stats()
        opened = stats.get("pool_size", 0)
        return {
            "size": self.pool.max_size,
            "open": opened,
            "in_use": opened - stats.get("pool_available", 0),
            "waiting": stats.get("requests_waiting", 0),
        }


_WRITES = re.compile(r"\s*(INSERT|UPDATE|DELETE|MERGE|TRUNCATE|WITH)\b", re.IGNORECASE)
"""Statements that may write rows (a ``WITH`` may hold an ``INSERT``)."""


class _ThreadConnection:
    """``storage.hot.conn``: the calls storage makes on a connection, each on the calling
    thread's leased one, or on one borrowed for that statement alone."""

    __slots__ = ("_lease",)

    def __init__(self, lease: ConnectionLease) -> None:
        self._lease = lease

    @property
    def in_transaction(self) -> bool:
        db = self._lease.current()
        return db is not None and db.conn.in_transaction

    @property
    def pending(self) -> Pending:
        """The statements the thread's connection sends with its next one (in a lease)."""
        return _leased(self._lease).conn.pending

    def execute(self, sql: str, parameters: Any = None) -> psycopg.Cursor:
        db = self._lease.current()
        if db is None:
            with self._lease:
                return self.execute(sql, parameters)
        if self._unfenced_write(db, sql):
            with db.atomic():  # checks the fence before its COMMIT
                return db.conn.execute(sql, parameters)
        return db.conn.execute(sql, parameters)

    def read_named(self, sql: str, parameters: Any) -> list[tuple[Any, ...]]:
        """:meth:`PostgresConnection.read_named` on the thread's connection."""
        with self._lease:
            return _leased(self._lease).conn.read_named(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Any) -> psycopg.Cursor:
        db = self._lease.current()
        if db is None:
            with self._lease:
                return self.executemany(sql, seq_of_parameters)
        if self._unfenced_write(db, sql):
            with db.atomic():
                return db.conn.executemany(sql, seq_of_parameters)
        return db.conn.executemany(sql, seq_of_parameters)

    def _unfenced_write(self, db: PostgresDatabase, sql: str) -> bool:
        """A write outside a transaction by a thread holding a job lock: it would commit by
        itself, unchecked, so it runs in a transaction of its own, fenced like any other
        (none is known today; this keeps one from slipping past the fence)."""
        return (
            self._lease.thread_fence is not None
            and not db.conn.in_transaction
            and _WRITES.match(sql) is not None
        )

    def read_together(self, statements: Any) -> list[list[dict[str, Any]]]:
        """Several reads in one round trip (:meth:`PostgresConnection.read_together`)."""
        with self._lease:
            return _leased(self._lease).conn.read_together(statements)

    def on_raw(self, call: Callable[[psycopg.Connection], Any]) -> Any:
        """``call(raw)`` on the thread's psycopg connection: ``psycopg.sql`` statements safe
        to send twice (the vector searches; an index built ``IF NOT EXISTS``), reconnecting
        as a read does. Outside a transaction a connection found dead is replaced and
        ``call`` runs once more on the new one; inside one the caller hears
        :class:`~memkeeper.errors.DatabaseUnreachable` (the transaction is gone)."""
        with self._lease:
            return _leased(self._lease).conn.on_raw(call)

    @property
    def raw(self) -> psycopg.Connection:
        return _leased(self._lease).raw


def _leased(lease: ConnectionLease) -> PostgresDatabase:
    db = lease.current()
    if db is None:
        raise RuntimeError(
            "the psycopg connection of a PostgreSQL store exists only inside its lease: "
            "take it with `with storage.lock:` first"
        )
    return db


class PooledDatabase:
    """``storage.hot`` on PostgreSQL: :class:`PostgresDatabase`'s calls on the calling
    thread's leased connection (one handle for every thread, so caches keyed by it hold)."""

    dialect = "postgres"
    __slots__ = ("__weakref__", "conn", "lease", "schema")

    def __init__(self, lease: ConnectionLease) -> None:
        self.lease = lease
        self.schema = lease.schema
        self.conn = _ThreadConnection(lease)

    @property
    def raw(self) -> psycopg.Connection:
        """The thread's psycopg connection (inside a lease only)."""
        return _leased(self.lease).raw

    def transaction_in_one_trip(
        self, users: Any, sql: str, parameters: Any
    ) -> list[dict[str, Any]] | None:
        """:func:`~memkeeper.storage.postgres.round_trips.transaction_in_one_trip` on the
        thread's connection; None
        (nothing sent) inside a transaction or for a thread holding a job lock, whose
        commits go through the fence: the caller takes its ordinary path."""
        with self.lease:
            db = _leased(self.lease)
            if self.lease.thread_fence is not None or db.conn.in_transaction:
                return None
            return transaction_in_one_trip(db, users, sql, parameters)

    @property
    def fence(self) -> Fence | None:
        """The calling thread's commit check (a job's lock epochs; see ``leadership``)."""
        return self.lease.thread_fence

    @fence.setter
    def fence(self, fence: Fence | None) -> None:
        self.lease.thread_fence = fence

    def thread_setting(self, name: str, value: str | None) -> None:
        """A session setting for the calling thread's connections (see the lease)."""
        self.lease.thread_setting(name, value)

    @property
    def scope(self) -> Scope | None:
        """What the thread's write transaction holds (None: none in progress)."""
        db = self.lease.current()
        return db.scope if db is not None else None

    @property
    def busy_users(self) -> frozenset[str]:
        db = self.lease.current()
        return db.busy_users if db is not None else frozenset()

    def execute(self, sql: str, parameters: Any = None) -> psycopg.Cursor:
        return self.conn.execute(sql, parameters)

    def executescript(self, sql: str) -> psycopg.Cursor:
        return self.conn.execute(sql)

    def query(self, sql: str, params: Any = None) -> Iterator[dict[str, Any]]:
        db = self.lease.current()
        if db is not None:
            return db.query(sql, params)
        with self.lease:
            return _leased(self.lease).query(sql, params)  # read once returned: see above

    @contextlib.contextmanager
    def atomic(self, opening: str | None = None) -> Iterator[PooledDatabase]:
        """:meth:`PostgresDatabase.atomic` on the thread's connection (leased for it)."""
        with self.lease, _leased(self.lease).atomic(opening):
            yield self

    @contextlib.contextmanager
    def write_transaction(
        self, users: Collection[str] | None = None, *, try_users: bool = False
    ) -> Iterator[PooledDatabase]:
        """:meth:`PostgresDatabase.write_transaction` on the thread's connection."""
        with self.lease, _leased(self.lease).write_transaction(users, try_users=try_users):
            yield self

    def pool_status(self) -> dict[str, int]:
        return self.lease.status()

    def close(self) -> None:
        self.lease.pool.close()
