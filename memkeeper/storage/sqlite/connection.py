"""The database handle every storage function takes: one SQLite connection and its SQL calls.

memkeeper reads and writes through SQL only; what it used of sqlite-utils' ``Database`` at run
time was ``conn``, ``execute``, ``executescript``, ``query`` and ``atomic``. :class:`Database`
is those calls alone, with the same behaviour, so that opening a file and recalling a value
does not import sqlite-utils (~80-120 ms with dateutil, pluggy and its plugin machinery;
README, Performance: start-up). sqlite-utils itself stays the schema's migration runner and
is imported only when a file has steps to apply (:func:`utils_database`).

The connection is in autocommit mode (``isolation_level=None``): a statement outside a
transaction commits by itself, and transactions are explicit — :func:`memkeeper.storage.sqlite.
immediate_transaction` for writes, :meth:`Database.atomic` (a savepoint when nested) inside.
"""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite_utils

Params = Sequence[Any] | Mapping[str, Any] | None

_LAZY_KEYWORDS = frozenset({"SELECT", "WITH", "PRAGMA", "VALUES", "EXPLAIN"})
"""Statements whose rows :meth:`Database.query` may hand out as they are read; any other
(``INSERT ... RETURNING``) is read to its end at once, so its write is done by the return."""


_SAVEPOINTS = itertools.count(1)
"""Numbers savepoint names: unique in the process, hence on every connection."""


def _first_keyword(sql: str) -> str:
    """The statement's first word, upper-cased, past blanks and ``--`` / ``/* */`` comments."""
    text = sql.lstrip()
    while text.startswith(("--", "/*")):
        end = text.find("\n") if text.startswith("--") else text.find("*/")
        if end < 0:
            return ""
        text = text[end + (1 if text.startswith("--") else 2) :].lstrip()
    word = text.split(None, 1)[0] if text else ""
    return "".join(c for c in word if c.isalpha() or c == "_").upper()


def _keys(cursor: sqlite3.Cursor) -> list[str]:
    """The row's column names, a repeated one renamed ``name_2``, ``name_3`` (as sqlite-utils)."""
    keys = [column[0] for column in cursor.description]
    if len(set(keys)) == len(keys):
        return keys
    taken, unique = set(keys), []
    for key in keys:
        name, number = key, 2
        while name in unique or (name != key and name in taken):
            name, number = f"{key}_{number}", number + 1
        unique.append(name)
    return unique


class Database:
    """One open SQLite file: the connection (``conn``) and the calls memkeeper makes on it.

    A drop-in for the part of ``sqlite_utils.Database`` memkeeper uses (see the module's
    docstring); storage functions take it as their ``db``.
    """

    __slots__ = ("__weakref__", "conn")
    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, parameters: Params = None) -> sqlite3.Cursor:
        """Run one statement; returns its cursor."""
        if parameters is None:
            return self.conn.execute(sql)
        return self.conn.execute(sql, parameters)

    def executescript(self, sql: str) -> sqlite3.Cursor:
        """Run several statements; inside a transaction they stay part of it (sqlite3's own
        ``executescript`` would commit it first)."""
        if not self.conn.in_transaction:
            return self.conn.executescript(sql)
        cursor = self.conn.cursor()
        statement, parts = "", sql.split(";")
        for number, part in enumerate(parts, 1):
            statement += part if number == len(parts) else part + ";"
            if statement.strip() and sqlite3.complete_statement(statement):
                cursor.execute(statement)  # a trigger's body (BEGIN ...; END;) stays whole
                statement = ""
        if statement.strip():
            cursor.execute(statement)
        return cursor

    def query(self, sql: str, params: Params = None) -> Iterator[dict[str, Any]]:
        """Run a statement that returns rows; yields each row as a dict (column: value)."""
        cursor = self.execute(sql, params)
        if cursor.description is None:
            raise ValueError("query() is for SQL that returns rows; use execute()")
        keys = _keys(cursor)
        if _first_keyword(sql) in _LAZY_KEYWORDS:
            return (dict(zip(keys, row, strict=True)) for row in cursor)
        return iter([dict(zip(keys, row, strict=True)) for row in cursor.fetchall()])

    @contextlib.contextmanager
    def atomic(self) -> Iterator[Database]:
        """A transaction (``BEGIN`` ... ``COMMIT``), or a savepoint inside one; rolled back
        when the block raises. Writes use :func:`~memkeeper.storage.sqlite.
        immediate_transaction`, which takes the write lock first."""
        conn = self.conn
        if conn.in_transaction:
            savepoint = f"memkeeper_{next(_SAVEPOINTS)}"
            conn.execute(f"SAVEPOINT {savepoint}")
            try:
                yield self
            except BaseException:
                # An error that ended the whole transaction (a RAISE(ROLLBACK) trigger) took
                # the savepoint with it: nothing left to undo.
                if conn.in_transaction:
                    conn.execute(f"ROLLBACK TO SAVEPOINT {savepoint}")
                    conn.execute(f"RELEASE SAVEPOINT {savepoint}")
                raise
            conn.execute(f"RELEASE SAVEPOINT {savepoint}")
            return
        conn.execute("BEGIN")
        try:
            yield self
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


def utils_database(db: Any) -> sqlite_utils.Database:
    """The same connection as a ``sqlite_utils.Database`` (its table API: the migrations)."""
    import sqlite_utils

    if isinstance(db, sqlite_utils.Database):
        return db
    return sqlite_utils.Database(db.conn, execute_plugins=False)
