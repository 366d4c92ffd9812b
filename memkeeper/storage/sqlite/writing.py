"""SQLite's write transaction: ``BEGIN IMMEDIATE`` with queued, bounded waits for the lock.

sqlite-utils' ``db.atomic()`` opens a deferred ``BEGIN``; in WAL mode a deferred transaction
that reads and then writes can fail at once with SQLITE_BUSY when another process committed in
between, without waiting for the busy timeout. ``BEGIN IMMEDIATE`` takes the write lock first
and waits, so concurrent writers queue instead of failing; a writer starved past the busy
timeout queues again, up to :data:`BEGIN_ATTEMPTS` times. Expected SQLite failures in the body
or the commit (full disk, read-only file, a constraint raced past the checks) roll back and
surface as memkeeper's own errors. The layers above reach it through
:func:`memkeeper.storage.transaction.immediate_transaction`, which picks the backend's.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator

from memkeeper.errors import LockBusy
from memkeeper.storage.sqlite.connection import Database
from memkeeper.storage.sqlite.errors import is_locked_error, translate_error

BEGIN_ATTEMPTS = 3
"""How many busy timeouts a writer queues for the write lock before :class:`LockBusy` reaches
the caller. Nothing is written before the lock is held, so waiting repeats nothing."""

_POLL_BUSY_MS = 2
"""While taking the write lock, SQLite's own wait is cut to this many milliseconds and
memkeeper polls again at once (with a little jitter). SQLite's busy handler sleeps in steps
that grow to 100 ms (1, 2, 5, 10, 15, 20, 25, 25, 25, 50 ...): measured during a pass, agents
waited 53, 78 and 103 ms — exactly those sums — for a lock the pass held under 20 ms."""


def begin_immediate(db: Database) -> None:
    """``BEGIN IMMEDIATE``, polled with jitter until the write lock is held or the waits run out."""
    conn = db.conn
    full_ms = getattr(conn, "memkeeper_busy_ms", None)
    if full_ms is None:
        full_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
    try:
        poll_begin_immediate(conn, full_ms)
    except sqlite3.OperationalError as exc:
        error = translate_error(exc, db)
        if error is None:
            raise
        raise error from None


def poll_begin_immediate(conn: sqlite3.Connection, full_ms: int) -> None:
    """``BEGIN IMMEDIATE`` on a plain connection, polled as :func:`begin_immediate` does (for
    :data:`BEGIN_ATTEMPTS` busy timeouts of ``full_ms``): :class:`LockBusy` when the waits
    run out; any other SQLite failure as it came."""
    deadline = time.monotonic() + BEGIN_ATTEMPTS * full_ms / 1000
    conn.execute(f"PRAGMA busy_timeout = {_POLL_BUSY_MS}")
    try:
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if not is_locked_error(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise LockBusy(
                        "the memory database stayed locked by other writers beyond "
                        f"{BEGIN_ATTEMPTS} busy timeouts ({BEGIN_ATTEMPTS * full_ms} ms)"
                    ) from None
            import random  # only under contention: start-up stays free of it

            time.sleep(random.uniform(0.0002, 0.001))  # noqa: S311 - jitter, not security
    finally:
        conn.execute(f"PRAGMA busy_timeout = {full_ms}")


@contextlib.contextmanager
def sqlite_write_transaction(db: Database) -> Iterator[Database]:
    """One short write transaction on a SQLite file that takes the write lock up front.

    Nested calls (and sqlite-utils' own ``atomic()`` inside) become savepoints.
    """
    conn = db.conn
    if conn.in_transaction:
        with db.atomic():
            yield db
        return
    begin_immediate(db)
    try:
        yield db
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error):
            error = translate_error(exc, db)
            if error is not None:
                raise error from None
        raise
