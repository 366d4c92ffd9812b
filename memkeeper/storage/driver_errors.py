"""A database driver's error that reached the command line untranslated, in words.

The storage layer turns the failures it expects into memkeeper's own errors, naming the
database. Any other error of ``sqlite3`` or ``psycopg`` that escapes is worded by its
backend's module (:mod:`memkeeper.storage.sqlite.errors`,
:mod:`memkeeper.storage.postgres.errors`), so that only ``storage/`` knows the drivers (the
import-linter contract "Only storage talks to a database driver") and the CLI still prints
one line an operator can act on.
"""

from __future__ import annotations

import sys

from memkeeper.storage.sqlite.errors import explain_sqlite


def explain(exc: BaseException) -> tuple[str, int] | None:
    """One line and the exit code for a driver's error; None when ``exc`` is not one."""
    worded = explain_sqlite(exc)
    if worded is not None:
        return worded
    if "psycopg" not in sys.modules:  # an optional driver: only a PostgreSQL store loads it
        return None
    from memkeeper.storage.postgres.errors import explain_postgres

    return explain_postgres(exc)
