"""One connection pool per store, and the driver's connection errors as memkeeper's own.

Why psycopg 3 and psycopg_pool: psycopg 3 is the maintained PostgreSQL driver for Python
(libpq underneath, so every libpq setting, environment variable, ``.pgpass`` and service file
works as operators expect; server-side parameters; pgvector ships adapters for it), and
``psycopg_pool.ConnectionPool`` is its own thread-safe pool: agents' short transactions
borrow a connection and give it back, the pool checks connections it hands out, replaces
broken ones in the background and bounds how long a caller waits. A session-scoped need (an
advisory lock held by the one scheduler) takes a dedicated connection, not a pooled one.

Every connection is opened with a bounded ``connect_timeout``. Failing to connect raises
:class:`~memkeeper.errors.AuthenticationFailed` (exit 77) for refused credentials and
:class:`~memkeeper.errors.DatabaseUnreachable` (exit 75) otherwise, each with one line that
names the user, host and port, never the password.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from memkeeper.errors import AuthenticationFailed, DatabaseUnreachable
from memkeeper.logs import get_logger
from memkeeper.storage.postgres.url import MASK, DatabaseUrl

log = get_logger(__name__)

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_MAX_SIZE = 10
DEFAULT_POOL_SIZE = 4
"""A store's connections at most (``[database] pool_size``): threads beyond it wait for one."""
APPLICATION_NAME = "memkeeper"
# SQLSTATEs of refused credentials: invalid_password, invalid_authorization_specification,
# and insufficient_privilege (CONNECT not granted on the database).
_AUTH_SQLSTATES = frozenset({"28P01", "28000", "42501"})
_AUTH_PHRASES = ("password authentication failed", "authentication failed", "no password supplied")


_EXPECTED = ("discarding closed connection", "discarding broken connection")


def _expected_discard(record: logging.LogRecord) -> bool:
    """psycopg_pool warns of each dead connection it discards. A store's lease gives one
    back only after it died under the lease (the caller heard DatabaseUnreachable, or the
    lease reconnected), and a check after a restart discards the rest: expected, so told
    in memkeeper's log at DEBUG, not as a second warning beside memkeeper's one-line error."""
    if record.levelno == logging.WARNING and str(record.msg).startswith(_EXPECTED):
        log.debug("the pool discarded a dead connection", pool=record.name)
        return False
    return True


logging.getLogger("psycopg.pool").addFilter(_expected_discard)


def connect_kwargs(connect_timeout: float) -> dict[str, Any]:
    """The options memkeeper adds to every connection: a whole-second timeout (libpq's unit,
    at least 2 as libpq enforces) and the application name that ``pg_stat_activity`` shows."""
    return {
        "connect_timeout": max(2, math.ceil(connect_timeout)),
        "application_name": APPLICATION_NAME,
    }


def connect(url: DatabaseUrl, *, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, **kwargs: Any):
    """One connection outside any pool (migrations, an advisory lock); errors translated."""
    try:
        return psycopg.connect(url.conninfo(), **connect_kwargs(connect_timeout), **kwargs)
    except psycopg.OperationalError as exc:
        raise translate_connect_error(exc, url) from None


def translate_connect_error(
    exc: psycopg.Error, url: DatabaseUrl
) -> AuthenticationFailed | DatabaseUnreachable:
    """Our exception for a failed connection: one line, the server's reason, no password."""
    reason = _reason(exc, url)
    who = f"user {url.user!r}" if url.user else "the default user"
    if exc.sqlstate in _AUTH_SQLSTATES or any(p in reason.lower() for p in _AUTH_PHRASES):
        return AuthenticationFailed(
            f"PostgreSQL at {url.target()} refused the credentials of {who} ({reason}); "
            "check the password (URL, PGPASSWORD or ~/.pgpass) and the user's access"
        )
    return DatabaseUnreachable(f"cannot connect to PostgreSQL at {url.target()}: {reason}")


def _reason(exc: psycopg.Error, url: DatabaseUrl) -> str:
    """libpq's message as one line: its last 'FATAL:' part, or its first line, scrubbed."""
    text = " ".join(str(exc).split())
    if "FATAL:" in text:
        text = text.rsplit("FATAL:", 1)[1].strip()
    elif ": " in text and text.startswith("connection failed"):
        text = text.split(": ", 1)[1]
    # libpq never echoes a password, but a hostile or mistyped URL must not smuggle one out.
    for secret in url.secrets():
        text = text.replace(secret, MASK)
    return text[:300]


class Pool:
    """A store's connection pool: opened once, checked connections, bounded waits.

    ``schema``: every connection's ``search_path`` starts with memkeeper's schema (then the
    schemas the vector and trigram extensions live in, so their types and operators resolve
    on managed servers that keep extensions apart, and ``public``). ``configure`` replaces
    that setup (a store's: :meth:`~memkeeper.storage.postgres.storage.PostgresStorage.
    _configure`); ``checked`` false hands connections out without the round trip that tests
    each (a store's leases find a dead one on their first statement and reconnect, as
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
        self.max_size = max_size
        path = [schema, *(s for s in extension_schemas if s != schema)]
        self._search_path = sql.SQL(", ").join(sql.Identifier(s) for s in path)
        kwargs = connect_kwargs(connect_timeout)
        if autocommit:
            kwargs["autocommit"] = True
        self._pool = ConnectionPool(
            url.conninfo(),
            kwargs=kwargs,
            min_size=min_size,
            max_size=max_size,
            open=False,
            configure=configure or self._configure,
            check=ConnectionPool.check_connection if checked else None,
            timeout=connect_timeout,
            reconnect_timeout=max(60.0, connect_timeout),
            name=f"memkeeper:{url.target()}",
        )

    def _configure(self, conn: psycopg.Connection) -> None:
        conn.execute(sql.SQL("SET search_path TO {}").format(self._search_path))
        conn.commit()

    def open(self, *, probe: bool = True) -> Pool:
        """Connect (once, to report a refused password or a dead host clearly: ``probe``,
        unless the caller just connected), then open."""
        if probe:
            connect(self.url, connect_timeout=self.connect_timeout).close()
        try:
            self._pool.open(wait=True, timeout=self.connect_timeout)
        except PoolTimeout:
            self._pool.close()
            raise DatabaseUnreachable(
                f"cannot connect to PostgreSQL at {self.url.target()}: no connection "
                f"within {self.connect_timeout:g} s"
            ) from None
        log.debug("postgres pool open", target=self.url.target(), schema=self.schema)
        return self

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """Borrow a connection for one transaction (committed on success, rolled back on error)."""
        try:
            with self._pool.connection(timeout=self.connect_timeout) as conn:
                yield conn
        except PoolTimeout:
            raise DatabaseUnreachable(
                f"no PostgreSQL connection to {self.url.target()} free or reachable within "
                f"{self.connect_timeout:g} s"
            ) from None
        except PoolClosed:
            raise  # a programming error: the store was closed
        except psycopg.OperationalError as exc:
            if exc.sqlstate is None:  # the connection itself failed, not a statement
                raise translate_connect_error(exc, self.url) from None
            raise

    def getconn(self) -> psycopg.Connection:
        """Borrow a connection (for a lease that spans several statements); give it back
        with :meth:`putconn`. Waits ``connect_timeout`` at most for a free one."""
        try:
            return self._pool.getconn(timeout=self.connect_timeout)
        except PoolTimeout:
            stats = self._pool.get_stats()
            busy = stats.get("pool_size", 0) - stats.get("pool_available", 0)
            raise DatabaseUnreachable(
                f"no PostgreSQL connection to {self.url.target()} free or reachable within "
                f"{self.connect_timeout:g} s ({busy} of at most {self.max_size} in use; "
                "[database] pool_size sets the most)"
            ) from None

    def putconn(self, conn: psycopg.Connection) -> None:
        """Give a borrowed connection back (a broken or closed one is replaced)."""
        self._pool.putconn(conn)

    def check(self) -> None:
        """Test the idle connections now, replacing the dead (after a server restart)."""
        self._pool.check()

    def stats(self) -> dict[str, int]:
        """The pool's counters (size, available, waiting...), for status and tests."""
        return dict(self._pool.get_stats())

    @property
    def closed(self) -> bool:
        return self._pool.closed

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> Pool:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()
