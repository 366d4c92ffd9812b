"""The statements memkeeper sends to PostgreSQL, recorded for the user-filter audit.

Issue 23 item 7: a memory larger than one primary is distributed by ``user_id``
(docs/guides/scaling.md), which only works when every statement the store issues on memory rows
names the user it is about. :class:`Recorder` wraps psycopg's ``Cursor.execute``,
``executemany`` and ``copy`` (the one place every statement passes, ``psycopg.sql``
compositions and the raw connection's calls included, without touching memkeeper's code),
and keeps each distinct statement text that memkeeper's own code sent (a statement from a
test helper, a ``TRUNCATE`` between tests, is not memkeeper's and is not kept) with the first
place in memkeeper that sent it. ``tests/helpers/user_filter.py`` judges them.

Cheap by design: a statement already seen costs one dict look-up; a new one walks the stack
once to find who sent it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql as psql

import memkeeper

PACKAGE = str(Path(memkeeper.__file__).resolve().parent)
_JOBS = str(Path(memkeeper.__file__).resolve().parent.parent / "jobs")
_PSYCOPG = str(Path(psycopg.__file__).resolve().parent)
_HANDLE = str(Path(PACKAGE) / "storage" / "postgres" / "database.py")
_LEASES = str(Path(PACKAGE) / "storage" / "postgres" / "leases.py")  # the pooled handle
_HERE = str(Path(__file__).resolve())


def _ours(filename: str) -> bool:
    return filename.startswith(PACKAGE) or filename.startswith(_JOBS)


def _origin() -> str | None:
    """``path:line function`` of the frame that sent the statement, past psycopg and
    memkeeper's database handle; None when that frame is not memkeeper's (a test, a helper:
    a test's own ``store.db.execute`` is not a statement the store issues)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_PSYCOPG) or name in (_HERE, _HANDLE, _LEASES):
            frame = frame.f_back
            continue
        if not _ours(name):
            return None
        where = Path(name)
        with contextlib.suppress(ValueError):
            where = where.relative_to(Path(PACKAGE).parent)
        return f"{where}:{frame.f_lineno} {frame.f_code.co_name}"
    return None


class Recorder:
    """Distinct statement texts memkeeper sent, each with the first place that sent it."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}
        self._lock = threading.Lock()

    def note(self, text: str) -> None:
        if text in self.seen:
            return
        origin = _origin()
        if origin is None:
            return
        with self._lock:
            self.seen.setdefault(text, origin)

    def start(self) -> None:
        """Record from now on, for good (the session's recorder)."""
        install()
        if self not in _ACTIVE:
            _ACTIVE.append(self)

    @contextmanager
    def recording(self) -> Iterator[Recorder]:
        """Record inside the block (a test's own workload), beside any other recorder."""
        install()
        _ACTIVE.append(self)
        try:
            yield self
        finally:
            _ACTIVE.remove(self)


_ACTIVE: list[Recorder] = []
_SAVED: dict[str, Callable[..., Any]] = {}


def _note(cursor: Any, query: Any) -> None:
    if not _ACTIVE:
        return
    text = query.as_string(cursor.connection) if isinstance(query, psql.Composable) else query
    if isinstance(text, bytes):
        text = text.decode()
    for recorder in tuple(_ACTIVE):
        recorder.note(text)


def install() -> None:
    """Wrap psycopg's cursor calls, once per process (a recorder records only while active)."""
    if _SAVED:
        return
    for name in ("execute", "executemany", "copy"):
        original = getattr(psycopg.Cursor, name)
        _SAVED[name] = original

        def wrapped(cursor: Any, query: Any, *args: Any, _o: Any = original, **kw: Any) -> Any:
            _note(cursor, query)
            return _o(cursor, query, *args, **kw)

        wrapped.__name__ = name
        wrapped.__doc__ = original.__doc__
        setattr(psycopg.Cursor, name, wrapped)


SESSION = Recorder()
"""The whole run's recorder (started by tests/conftest.py on every run)."""
