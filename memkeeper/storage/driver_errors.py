"""A database driver's error that reached the command line untranslated, in words.

The storage layer turns the failures it expects into memkeeper's own errors, naming the
database. Any other error of ``sqlite3`` or ``psycopg`` that escapes is worded here, so that
only ``storage/`` knows the drivers (the import-linter contract "Only storage talks to a
database driver") and the CLI still prints one line an operator can act on. SQLite's words
are in :mod:`memkeeper.storage.sqlite.errors`; PostgreSQL's are here, read off ``psycopg`` only
once a PostgreSQL store has loaded it.
"""

from __future__ import annotations

import sys

from memkeeper.errors import EXIT_BUSY, EXIT_DATABASE
from memkeeper.storage.sqlite.errors import explain_sqlite, is_sqlite_operational


def explain(exc: BaseException) -> tuple[str, int] | None:
    """One line and the exit code for a driver's error; None when ``exc`` is not one."""
    worded = explain_sqlite(exc)
    if worded is not None:
        return worded
    psycopg = sys.modules.get("psycopg")  # loaded only when a PostgreSQL store was opened
    if psycopg is not None and isinstance(exc, psycopg.Error):
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        state = getattr(exc, "sqlstate", None) or ""
        lost = not state or state.startswith(("08", "57P"))  # connection exception, shutdown
        if isinstance(exc, psycopg.OperationalError) and lost:
            return (
                f"the connection to PostgreSQL was lost ({first}); nothing of this command "
                "that was not reported done was kept: run it again",
                EXIT_BUSY,
            )
        return f"database error (PostgreSQL {state or 'driver'}: {first})", EXIT_DATABASE
    return None


def is_operational(exc: BaseException) -> bool:
    """Whether ``exc`` is a driver's operational failure (a full disk, an I/O error, a lost
    server): something an operator fixes, not a bug."""
    if is_sqlite_operational(exc):
        return True
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.OperationalError)
