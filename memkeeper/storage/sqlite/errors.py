"""SQLite's failures during a write, as memkeeper's own errors that name the file."""

from __future__ import annotations

import contextlib
import sqlite3

from memkeeper.errors import (
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
