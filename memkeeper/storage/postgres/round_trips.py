"""Fewer round trips to the server: statements sent with the next one, as storage uses it.

On PostgreSQL every statement sent on its own is a round trip, and on a busy host a round
trip costs more than the statement: an agent's recall was four (``BEGIN`` with its locks,
the read, the use's writes, ``COMMIT``), most of what it cost. Statements that need no
answer of their own therefore wait in the connection's :class:`Pending` and go to the server
in front of the next statement, in one simple-query string (one round trip; parameters are
bound client-side, so the text is final): the server runs them in order and stops at the
first error, which fails the statement that carried them, and the transaction around them
then rolls back as it would have. Which statements wait:

- a transaction's ``BEGIN`` and its write locks (a user-scoped write's locks are taken with
  its first statement, in the same trip: every read and write of it runs under them);
- a savepoint and its release;
- writes whose result nobody reads, inside a transaction (:func:`sent_with_next`): a
  batch's writes, a ``remember``'s. The ``COMMIT`` carries what is left.

A write that needs no decision between its read and its writes goes further: a recall's
or a search's use is one data-modifying statement (:func:`memkeeper.storage.uses.
mark_in_one_trip`) sent with its ``BEGIN``, locks and ``COMMIT`` in one string
(:func:`transaction_in_one_trip`): one round trip.

Someone about to use the psycopg connection itself (``db.raw``) sends them first; a
rollback forgets those never sent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from memkeeper.storage.postgres.write_locks import blocking_locks


class Pending:
    """A connection's statements not sent yet (final text, parameters bound client-side).

    ``unopened``: the transaction's ``BEGIN`` is among them (the connection is in a
    transaction as far as its callers know, not yet as far as the server knows). ``sends``
    counts how often they were sent, so a savepoint can tell whether its ``SAVEPOINT`` left.
    ``deferring``: inside :func:`sent_with_next`, statements join them instead of leaving.
    """

    __slots__ = ("deferring", "parts", "sends", "unopened")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.unopened = False
        self.sends = 0
        self.deferring = 0

    def take(self) -> list[str]:
        """The statements to send now (they count as sent: the transaction is open)."""
        parts, self.parts = self.parts, []
        self.unopened = False
        self.sends += 1
        return parts

    def mark(self) -> tuple[int, int]:
        """Where the statements deferred from now on start (see :meth:`drop_since`)."""
        return self.sends, len(self.parts)

    def drop_since(self, mark: tuple[int, int]) -> bool:
        """Forget the statements deferred since ``mark``; False when they were sent already
        (the server must roll them back), True when none of them left."""
        if mark[0] == self.sends:
            del self.parts[mark[1] :]
            return True
        self.parts.clear()
        return False

    def discard(self) -> None:
        """Forget everything not sent (the transaction rolls back)."""
        self.parts.clear()
        self.unopened = False


class Deferred:
    """What a deferred statement returns: it has no result yet (``rowcount`` -1, as a
    pipelined statement's before its answers are read)."""

    rowcount = -1
    description = None

    def fetchone(self) -> Any:
        raise RuntimeError("a statement sent with the next one has no result to read")

    fetchall = fetchone


DEFERRED = Deferred()


_RETRYABLE_PARTS = frozenset({"SELECT", "WITH", "BEGIN", "VALUES", "SAVEPOINT", "RELEASE"})
"""The statements that may be sent twice when the connection turns out dead before any
answer: reads, and the opening of a transaction and its savepoints (nothing committed)."""


def retryable(keywords: list[str]) -> bool:
    """Whether statements opening with these keywords, sent together outside a transaction,
    may be sent again on a new connection (nothing of theirs can have committed)."""
    return all(keyword in _RETRYABLE_PARTS for keyword in keywords)


@contextlib.contextmanager
def sent_with_next(db: Any) -> Iterator[None]:
    """The writes ``db`` runs in the block (inside a transaction, results never read) sent
    with the statement after it: the ``COMMIT`` at the latest (see :class:`Pending`). On
    SQLite (no round trips) the block runs as it is."""
    if getattr(db, "dialect", "sqlite") != "postgres" or not db.conn.in_transaction:
        yield
        return
    pending = db.conn.pending
    pending.deferring += 1
    try:
        yield
    finally:
        pending.deferring -= 1


def transaction_in_one_trip(
    db: Any, users: Collection[str], sql: str, parameters: Sequence[Any]
) -> list[dict[str, Any]]:
    """``sql`` in a write transaction of its own on ``db`` (a
    :class:`~memkeeper.storage.postgres.database.PostgresDatabase`) that holds ``users``'
    write locks, sent as one string with its ``BEGIN``, the locks and the ``COMMIT``: one
    round trip for a write that needs no decision between its read and its writes (a
    recall's use, a data-modifying ``WITH``); its rows as dicts. An error in any part fails
    the call and the transaction rolls back. Like a ``BEGIN`` found dead, a connection found
    dead before any answer is replaced and the string sent once more (the server ran none
    of it); only a link lost between the server's commit and its answer could count a use
    twice. Not inside another transaction, nor by a thread holding a job lock (whose fence
    checks before each ``COMMIT``: the caller, ``PooledDatabase``, sees to both)."""
    conn = db.conn
    if conn.in_transaction:
        raise RuntimeError("a one-trip transaction opens and commits on its own")
    opening, _ = blocking_locks(users)
    conn.pending.parts[:0] = ["BEGIN", opening]  # nothing else is pending outside one
    conn.pending.unopened = True
    try:
        return conn.read_together([(sql, parameters)], then=["COMMIT"], named=True)[0]
    except BaseException:
        import psycopg  # storage on PostgreSQL only: the module imports no driver itself

        conn.pending.discard()
        if conn.in_transaction and not conn.raw.broken:
            with contextlib.suppress(psycopg.Error):
                conn.raw.execute("ROLLBACK")
        raise
