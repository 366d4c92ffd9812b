"""SQLite's failures during a write, as memkeeper's own errors that name the file."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from memkeeper.errors import (
    EXIT_CANT_CREATE,
    EXIT_DATABASE,
    DatabaseError,
    LockBusy,
    MemkeeperError,
    StorageFull,
    StorageUnwritable,
    WriteConflict,
)
from memkeeper.storage.sqlite.connection import Database


def is_locked_error(exc: sqlite3.Error) -> bool:
    """Whether SQLite gave up waiting for a lock (SQLITE_BUSY / SQLITE_LOCKED)."""
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _database_path(db: Database) -> str:
    with contextlib.suppress(sqlite3.Error):
        row = db.conn.execute("PRAGMA database_list").fetchone()
        if row and row[2]:
            return str(row[2])
    return "the memory database"


def translate_error(exc: sqlite3.Error, db: Database) -> MemkeeperError | None:
    """memkeeper's own error for an expected SQLite failure during a write, or None.

    A full disk, a read-only file and an I/O error are operational problems the caller must
    hear about clearly (and nothing was changed: the transaction rolled back); a constraint
    violation means two writers raced past the checks, which is reported, not leaked raw.
    """
    if isinstance(exc, MemkeeperError):
        return None
    text = str(exc).lower()
    path = _database_path(db)
    if "full" in text:
        return StorageFull(
            f"the disk holding {path} is full; nothing was changed. Free space and retry"
        )
    if "readonly" in text or "read-only" in text:
        return StorageUnwritable(
            f"database file {path} is read-only for this user (permission problem); "
            "nothing was changed"
        )
    if is_locked_error(exc):
        return LockBusy(f"{path} stayed locked by another writer beyond the busy timeout")
    if isinstance(exc, sqlite3.IntegrityError):
        return WriteConflict(
            f"a concurrent write to {path} conflicted with this one ({exc}); nothing was "
            "changed, retry"
        )
    if isinstance(exc, sqlite3.OperationalError | sqlite3.DatabaseError):
        return DatabaseError(f"writing {path} failed: {exc}; nothing was changed")
    return None


_SQLITE_FULL = 13
_SQLITE_READONLY = 8


def explain_sqlite(exc: BaseException) -> tuple[str, int] | None:
    """One line and the exit code for a ``sqlite3`` error that reached the command line
    untranslated (:func:`memkeeper.storage.driver_errors.explain`); None for any other."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return None
    primary = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    text = str(exc).lower()
    if primary == _SQLITE_FULL or "disk is full" in text:
        return f"the disk is full (SQLite: {exc}); free some space and run the command again", (
            EXIT_CANT_CREATE
        )
    if primary == _SQLITE_READONLY or "readonly database" in text:
        return (
            f"the database is read-only for this user ({exc}): a permission problem; make it "
            "writable, or run memkeeper as the user that owns it",
            EXIT_CANT_CREATE,
        )
    return f"database error: {exc}", EXIT_DATABASE


def erased_bytes_unusable(path: Path, doing: str, exc: sqlite3.Error) -> MemkeeperError:
    """memkeeper's error for a file that failed mid-scrub for another reason than a lock."""
    text = str(exc).lower()
    if "full" in text:
        return StorageFull(
            f"the erasure is committed, but {path} could not be {doing} to remove erased "
            "bytes: the disk is full. Free space and run the same forget again"
        )
    return DatabaseError(
        f"the erasure is committed, but {path} could not be {doing} to remove erased bytes "
        f"({exc}); the file may be corrupt: check it (PRAGMA integrity_check), restore a "
        "backup if it fails, then run the same forget again"
    )


def erased_bytes_locked(path: Path, doing: str) -> LockBusy:
    """memkeeper's error for a file that stayed locked mid-scrub (the erasure committed)."""
    return LockBusy(
        f"the erasure is committed, but {path} stayed locked, so it could not be {doing} to "
        "remove erased bytes; run the same forget again to finish (repeating it is safe)"
    )
