"""The names of a PostgreSQL result's columns, as sqlite-utils names a SQLite cursor's.

Read from the result itself, not from psycopg's ``description``, which builds a ``Column``
object per column at every call: a quarter of an agent's CPU went there."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import psycopg
from psycopg.pq import ExecStatus

from memkeeper.storage.sqlite.connection import _keys

_TUPLES_OK = ExecStatus.TUPLES_OK


def column_names(cursor: psycopg.Cursor) -> list[str] | None:
    """The names of the current result's columns (a repeated one renamed as sqlite-utils
    does), None when it has no rows. Read from the result itself: psycopg's ``description``
    builds a ``Column`` per column at every call, a quarter of an agent's CPU."""
    result = cursor.pgresult
    if result is None or not (result.nfields or result.status == _TUPLES_OK):
        return None
    return list(_unique(tuple(result.fname(i).decode() for i in range(result.nfields))))


@functools.lru_cache(maxsize=1024)
def _unique(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(_keys(SimpleNamespace(description=[(name,) for name in names])))  # type: ignore[arg-type]
