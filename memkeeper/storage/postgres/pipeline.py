"""Several statements in one round trip on PostgreSQL (psycopg's pipeline mode).

A statement whose result the caller does not read before sending the next one (an
``UPDATE`` then an upsert of the same batch) need not wait for the server between them:
inside :func:`pipelined` psycopg sends them together and reads their results at the end,
one round trip instead of one each. On SQLite (in-process, no round trip) it does nothing.
An error in one statement still raises (at the end of the block, at the latest), and the
transaction it is part of rolls back as usual.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def pipelined(db: Any) -> Iterator[None]:
    """The block's statements on ``db`` sent in one round trip when ``db`` is PostgreSQL."""
    if getattr(db, "dialect", "sqlite") != "postgres":
        yield
        return
    with db.raw.pipeline():
        yield
