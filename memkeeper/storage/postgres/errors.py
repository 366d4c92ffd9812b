"""PostgreSQL's errors that reached the command line untranslated, in words (psycopg's).

The counterpart of :mod:`memkeeper.storage.sqlite.errors`: :mod:`memkeeper.storage.
driver_errors` asks here only once a PostgreSQL store has loaded ``psycopg`` (it is an
optional dependency), so this module may import the driver like the rest of
``storage.postgres``.
"""

from __future__ import annotations

import psycopg

from memkeeper.errors import EXIT_BUSY, EXIT_DATABASE


def explain_postgres(exc: BaseException) -> tuple[str, int] | None:
    """One line and the exit code for a psycopg error; None when ``exc`` is not one.

    A lost connection (SQLSTATE class 08, a shutdown 57P, or none at all) is exit 75, "run
    it again": nothing unacknowledged was kept. Anything else names its SQLSTATE."""
    if not isinstance(exc, psycopg.Error):
        return None
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
