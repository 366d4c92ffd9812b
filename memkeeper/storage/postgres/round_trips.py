"""Several writes in one round trip to the server: psycopg's pipeline mode, as storage uses it.

A maintenance job's batch is a handful of statements (the hot rows, the cold rows, the
change-log rows); each sent on its own costs a round trip, and on a busy host a round trip
costs more than the statement. In pipeline mode they are sent together and the server's
answers read once, at the end of the block (``executemany`` rides the same pipeline). Only
for statements whose results are not read before the block ends: an error in any of them
is raised when it ends, and the transaction around it is then rolled back by its owner.

A connection lost meanwhile is reported as on any other statement
(:class:`~memkeeper.errors.DatabaseUnreachable`: what it was writing did not commit).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg

from memkeeper.errors import DatabaseUnreachable


@contextlib.contextmanager
def pipelined(db: Any) -> Iterator[None]:
    """The statements ``db`` runs in the block, sent together (see the module docstring)."""
    raw = db.raw
    pipeline = raw.pipeline()
    pipeline.__enter__()
    try:
        yield
    except BaseException as exc:
        if not raw.broken:
            if not pipeline.__exit__(type(exc), exc, exc.__traceback__):
                raise
            return
        # The link is gone: leaving pipeline mode cannot reach the server, and saying so
        # (psycopg would log it) adds nothing to the error the block raises.
        with contextlib.suppress(psycopg.Error):
            pipeline.__exit__(None, None, None)
        if isinstance(exc, psycopg.OperationalError):
            raise _unreachable(exc) from None
        raise
    try:
        pipeline.__exit__(None, None, None)
    except psycopg.OperationalError as exc:
        if not raw.broken:
            raise
        raise _unreachable(exc) from None


def _unreachable(exc: psycopg.Error) -> DatabaseUnreachable:
    reason = (str(exc).strip().splitlines() or ["connection lost"])[0]
    return DatabaseUnreachable(
        f"the connection to PostgreSQL was lost during a write ({reason}); what it was "
        "writing did not commit"
    )
