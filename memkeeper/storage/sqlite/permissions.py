"""Permission problems, in an operator's words: why a database file cannot be written.

SQLite opens a file it cannot write read-only without saying so, and the first write fails
with "attempt to write a readonly database", naming neither the file nor the cause (the file,
its directory, the -wal/-shm beside it, a read-only file system). :class:`ExplainedConnection`
turns that into :class:`ReadOnlyDatabase`, which does.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from memkeeper.errors import StorageUnwritable

# SQLite result codes (the low byte of an extended code is the primary code).
_SQLITE_READONLY = 8
_SQLITE_READONLY_DIRECTORY = 8 | (6 << 8)
_SQLITE_READONLY_CANTINIT = 8 | (5 << 8)
_SQLITE_CANTOPEN = 14


class ReadOnlyDatabase(StorageUnwritable, sqlite3.OperationalError):
    """A write refused because this user cannot write the file, its WAL or its directory.

    Catch it as :class:`memkeeper.errors.StorageUnwritable` (exit 73). It is also a
    ``sqlite3.OperationalError``, so code that already handles SQLite's own error (a best-effort
    checkpoint, say) keeps working. ``path`` is the database file; the message names it.
    """

    def __init__(self, message: str, path: Path, code: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.sqlite_errorcode = code
        self.sqlite_errorname = "SQLITE_READONLY"


def _is_read_only_error(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF == _SQLITE_READONLY
    text = str(exc).lower()
    return "readonly database" in text or "read-only" in text


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK)


def _read_only_cause(path: Path, code: int | None) -> tuple[str, str] | None:
    """Why ``path`` cannot be written, and what to do about it, in an operator's words.

    None when no permission problem is found (the file, its directory and its -wal/-shm are
    all writable, on a file system mounted read-write).
    """
    try:
        read_only_fs = bool(
            os.statvfs(path if path.exists() else path.parent).f_flag & os.ST_RDONLY
        )
    except OSError:
        read_only_fs = False
    if read_only_fs:
        return (
            f"database file {path} is on a read-only file system",
            "mount it read-write, or move the database",
        )
    owner = "or run memkeeper as the user that owns the database"
    sidecars = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
    directory = (
        f"the directory {path.parent} of database file {path} is not writable for this user "
        f"(permission denied), and SQLite must create {sidecars[0].name} and "
        f"{sidecars[1].name} in it",
        f"make the directory writable for this user, {owner}",
    )
    needs_directory = code in (_SQLITE_READONLY_DIRECTORY, _SQLITE_READONLY_CANTINIT)
    if needs_directory and not _writable(path.parent):
        return directory
    if path.exists() and not _writable(path):
        return (
            f"database file {path} is read-only for this user (permission denied)",
            f"make the file writable for this user, {owner}",
        )
    if not all(side.exists() for side in sidecars) and not _writable(path.parent):
        return directory
    for side in sidecars:
        if side.exists() and not _writable(side):
            return (
                f"{side}, which SQLite keeps beside database file {path}, is read-only for "
                "this user (permission denied)",
                f"make it writable for this user, {owner}",
            )
    return None


def read_only_error(exc: sqlite3.Error, path: Path, doing: str) -> ReadOnlyDatabase | None:
    """The permission problem behind a SQLite error, naming the file; None if it is not one.

    SQLite says "attempt to write a readonly database" (or, on a read-only file system,
    "unable to open database file"); the answer names the file and the actual cause.

    ``doing`` says what could not be done ("nothing was written", "the database cannot be
    opened").
    """
    code = getattr(exc, "sqlite_errorcode", None)
    read_only = _is_read_only_error(exc)
    if not read_only and not (isinstance(code, int) and code & 0xFF == _SQLITE_CANTOPEN):
        return None
    found = _read_only_cause(Path(path), code)
    if found is None:
        if not read_only:
            return None  # cannot open, but not for lack of permission: not ours to explain
        found = (
            f"database file {path} is read-only for this user",
            "check the permissions of the file and its directory, or run memkeeper as the "
            "user that owns the database",
        )
    cause, remedy = found
    return ReadOnlyDatabase(
        f"{cause}: {doing}; {remedy}", Path(path), code if isinstance(code, int) else None
    )


class ExplainedConnection(sqlite3.Connection):
    """A connection whose writes to a read-only file fail with :class:`ReadOnlyDatabase`.

    SQLite opens a file it cannot write read-only without saying so; the first write then
    fails with "attempt to write a readonly database", which names neither the file nor the
    cause. Every statement memkeeper runs goes through these three methods (sqlite-utils
    too), so that error becomes one that does.
    """

    memkeeper_path: Path
    memkeeper_busy_ms: int

    def _raise_if_read_only(self, exc: sqlite3.OperationalError) -> None:
        unwritable = read_only_error(exc, self.memkeeper_path, "nothing was written")
        if unwritable is not None:
            raise unwritable from exc

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            return super().execute(sql, parameters)
        except sqlite3.OperationalError as exc:
            self._raise_if_read_only(exc)
            raise

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        try:
            return super().executemany(sql, parameters)
        except sqlite3.OperationalError as exc:
            self._raise_if_read_only(exc)
            raise

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        try:
            return super().executescript(sql_script)
        except sqlite3.OperationalError as exc:
            self._raise_if_read_only(exc)
            raise
