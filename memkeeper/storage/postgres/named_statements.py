"""Statements a session keeps parsed and planned: an agent's use and a search's read.

Every statement memkeeper sends is text with its parameters quoted in (client-side binding,
:mod:`~memkeeper.storage.postgres.database`), so the server parses, analyses and plans it
each time. For most statements that is a small part of their cost; for the one an agent
pays on every search and recall — the use's data-modifying ``WITH`` (:func:`memkeeper.
storage.uses.mark_in_one_trip`: three CTEs, a join, an upsert) — it was about half of its
round trip: 0.75 ms sent as text against 0.40 ms as ``EXECUTE`` of the same statement
prepared once in the session (its ``BEGIN``, locks and ``COMMIT`` around it, three rounds of 400
calls each on the bench's 1,000,000-row database, this 2-core machine). A search's read of a
small user's rows (:func:`memkeeper.storage.postgres.keywords.ordered_rows`) is sent so too.

So such a statement goes as ``EXECUTE name(literals)``, preceded in the same string, the
first time on a connection, by ``PREPARE name AS ...``. The name is a hash of the
statement's text: a name always means the same text, whichever process prepared it on
whichever session. What a session has prepared is tracked per psycopg connection
(:func:`statements_of`: a store's pooled connections outlive the handles that lease them);
a connection replaced after a lost link starts with none. A session keeps at most
:data:`MOST_PER_SESSION` of them (a search's use has one text per number of hits): a
statement beyond them goes as plain text.

Where the session's statements are not what the connection believes (a pooler in
transaction mode hands each transaction another server session; someone ran ``DEALLOCATE``
or ``DISCARD ALL``), or the server will not prepare one, the string fails with nothing
committed: it is sent once more as plain text, and that connection sends plain text from
then on (:meth:`NamedStatements.give_up`). Only a string that opens and ends its own
transaction is sent so (:meth:`memkeeper.storage.postgres.database.PostgresConnection.
read_together`), so that failure can be retried as a whole.
"""

from __future__ import annotations

import hashlib
import re
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg

from memkeeper import logs
from memkeeper.storage.postgres.result_columns import column_names

log = logs.get_logger(__name__)

_PLACEHOLDER = re.compile(r"%%|%s")

MOST_PER_SESSION = 64
"""Statements one session keeps prepared at most; others go as plain text."""

RETRIED_CLASSES = ("26", "42", "0A")
"""SQLSTATE classes of a named statement out of step with its session or refused by the
server (``26000``: no such prepared statement; ``42P05``: it exists already; ``42P18``: a
parameter whose type cannot be told; ``0A000``: "cached plan must not change result type",
a column added under a prepared ``RETURNING m.*``): the string is sent again as plain text.
An error of the statement itself comes back the same way from the plain text, and is raised
then."""


def statement_name(text: str) -> str:
    """The session name of ``text`` (the statement as psycopg takes it): a hash of it."""
    return "memkeeper_" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def numbered(text: str) -> str:
    """``text`` with psycopg's placeholders (``%s``; ``%%`` for ``%``) as ``PREPARE`` takes
    them: ``$1``, ``$2``, ... and ``%``."""
    count = 0

    def swap(match: re.Match[str]) -> str:
        nonlocal count
        if match.group() == "%%":
            return "%"
        count += 1
        return f"${count}"

    return _PLACEHOLDER.sub(swap, text)


class NamedStatements:
    """What one connection has prepared (by name), or that it sends plain text only."""

    __slots__ = ("known", "off")

    def __init__(self) -> None:
        self.known: set[str] = set()
        self.off = False

    def parts(
        self,
        statements: Sequence[tuple[str, Sequence[Any]]],
        quote: Callable[[str, Sequence[Any]], str],
    ) -> tuple[list[str], list[str], list[str]]:
        """For ``statements`` (each its text with ``%s`` placeholders, and its parameters):
        the ``PREPARE`` this connection still needs, the text of each to send (``EXECUTE``,
        or the plain statement beyond :data:`MOST_PER_SESSION`) and the names prepared by
        sending them; ``quote`` binds parameters client-side, as every statement is sent."""
        prepares: list[str] = []
        texts: list[str] = []
        names: list[str] = []
        for text, bound in statements:
            name = statement_name(text)
            if name not in self.known:
                if len(self.known) + len(names) >= MOST_PER_SESSION:
                    texts.append(quote(text, bound))
                    continue
                prepares.append(f"PREPARE {name} AS {numbered(text)}")
                names.append(name)
            literals = quote(", ".join(["%s"] * len(bound)), bound) if bound else ""
            texts.append(f"EXECUTE {name}({literals})" if literals else f"EXECUTE {name}")
        return prepares, texts, names

    def prepared(self, names: Sequence[str]) -> None:
        """Record that the statements ``names`` are now prepared on the connection."""
        self.known.update(names)

    def give_up(self, exc: Exception) -> None:
        """Send plain text from now on, ``exc`` being why (logged, without parameters)."""
        self.off = True
        self.known.clear()
        log.info("named statements off for this connection", reason=type(exc).__name__)


_lock = threading.Lock()
_sessions: weakref.WeakKeyDictionary[Any, NamedStatements] = weakref.WeakKeyDictionary()


def statements_of(raw: Any) -> NamedStatements:
    """What the psycopg connection ``raw`` has prepared (nothing, for one not seen yet)."""
    with _lock:
        statements = _sessions.get(raw)
        if statements is None:
            statements = _sessions[raw] = NamedStatements()
        return statements


def retried(exc: Exception) -> bool:
    """Whether ``exc`` is one of :data:`RETRIED_CLASSES` (sent again as plain text)."""
    state = getattr(exc, "sqlstate", None) or ""
    return state[:2] in RETRIED_CLASSES


Bound = list[tuple[str, Sequence[Any]]]
"""Statements as psycopg takes them: each its text (``%s`` placeholders) and parameters."""


def sent_together(
    conn: Any, before: Sequence[str], bound: Bound, then: Sequence[str], *, named: bool
) -> list[list[dict[str, Any]]]:
    """The rows (dicts) of each of ``bound``, sent on ``conn`` (a
    :class:`~memkeeper.storage.postgres.database.PostgresConnection`) in one string behind
    ``before`` and followed by ``then``: as named statements when ``named`` (the string
    opens its own transaction or runs in none), else as plain text (:func:`_sent`)."""

    def send(prepares: list[str], texts: list[str]) -> list[list[dict[str, Any]]]:
        cursor = conn.raw.execute("; ".join([*before, *prepares, *texts, *then]))
        for _ in (*before, *prepares):
            cursor.nextset()
        results = []
        for n in range(len(texts)):
            if n:
                cursor.nextset()
            keys = column_names(cursor) or []
            results.append([dict(zip(keys, row, strict=True)) for row in cursor.fetchall()])
        return results

    return _sent(conn, bound, send) if named else send([], _plain(conn, bound))


def rows_named(conn: Any, bound: Bound) -> list[tuple[Any, ...]]:
    """The rows (tuples) of one read ``bound`` holds, sent on ``conn`` outside a transaction
    as a named statement (:func:`_sent`)."""

    def send(prepares: list[str], texts: list[str]) -> list[tuple[Any, ...]]:
        cursor = conn.raw.execute("; ".join([*prepares, *texts]))
        for _ in prepares:
            cursor.nextset()
        return list(cursor.fetchall())

    return _sent(conn, bound, send)


Result = TypeVar("Result")


def _sent(conn: Any, bound: Bound, send: Callable[[list[str], list[str]], Result]) -> Result:
    """What ``send(prepares, texts)`` gives for ``bound`` as ``EXECUTE`` of named statements
    (their ``PREPARE`` in front the first time on the session), or as plain text where the
    connection sends no named statements; a named send that fails with :func:`retried`'s
    errors is rolled back and sent again as plain text, once, and the connection sends plain
    text from then on (the statement's own error is raised by that second send)."""
    statements = statements_of(conn.raw)
    if statements.off:
        return send([], _plain(conn, bound))
    prepares, texts, names = statements.parts(bound, conn.quoted)
    try:
        result = send(prepares, texts)
    except psycopg.Error as exc:
        if conn.raw.broken or not retried(exc):
            raise
        if conn.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.raw.execute("ROLLBACK")
        result = send([], _plain(conn, bound))
        statements.give_up(exc)
        return result
    statements.prepared(names)
    return result


def _plain(conn: Any, bound: Bound) -> list[str]:
    """``bound`` as plain text, its parameters quoted in (as every other statement is sent)."""
    return [conn.quoted(text, values) for text, values in bound]
