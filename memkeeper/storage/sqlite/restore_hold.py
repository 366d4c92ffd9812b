"""Holding the live files alone while a backup is restored over them.

:mod:`memkeeper.maintenance.backup_restore` decides the order of a restore; the SQLite side of
two of its steps is here: taking each live file exclusively (so no agent or server has it
open when it is renamed away) and reading the live tombstones to apply to the copies.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

from memkeeper.errors import LockBusy
from memkeeper.storage import erased_values
from memkeeper.storage.sqlite.backup_check import open_read_only
from memkeeper.storage.sqlite.errors import is_locked_error
from memkeeper.storage.tombstones import Tombstone, since

Held = sqlite3.Connection
"""A live file held alone: pass it to :func:`let_go` to release it."""


def hold_alone(path: Path, busy_timeout_ms: int) -> Held | None:
    """A connection holding ``path`` alone (SQLite's EXCLUSIVE lock), its WAL folded in.

    Whether another process uses the file is asked of the locks, not inferred from the files
    beside it: every connection to a WAL database holds a shared lock on it for as long as it
    is open (the same test SQLite makes before deleting the ``-wal`` on close), so the
    exclusive lock is granted only when nobody else — no other process, and no other
    connection of this one — has the file open. ``locking_mode = EXCLUSIVE`` keeps it until
    :func:`let_go`, so nobody can open the file meanwhile. None when there is no file, or it
    is not a usable SQLite database (nobody can be using it through SQLite: it is set aside
    as it is). Raises :class:`~memkeeper.errors.LockBusy` when another process has it open.
    """
    if not path.exists():
        return None
    conn = sqlite3.connect(str(path), timeout=busy_timeout_ms / 1000, isolation_level=None)
    try:
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.OperationalError as exc:
        conn.close()
        if is_locked_error(exc):
            raise LockBusy(
                f"{path} is open in another process (it holds a lock on the file); stop the "
                "agents and services using this database, then run restore-backup again"
            ) from None
        return None
    except sqlite3.DatabaseError:
        conn.close()
        return None
    return conn


def let_go(conn: Held | None) -> None:
    """Close a :func:`hold_alone` connection: SQLite folds and removes the WAL, unlocks."""
    if conn is not None:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        conn.close()


def live_tombstones(hot_path: Path) -> list[Tombstone]:
    """Every tombstone of the live hot file (none when it or its table does not exist).

    Call it while the file is held (:func:`hold_alone`): checkpointed and held exclusively,
    its WAL is empty, so the read-only connection sees everything.
    """
    if not hot_path.exists():
        return []
    conn = open_read_only(hot_path)  # checkpointed and held exclusively: the WAL is empty
    try:
        has = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tombstones'"
        ).fetchone()
        return since(conn, None) if has else []
    finally:
        conn.close()


def live_erased_values(hot_path: Path) -> tuple[bytes | None, list[tuple[Any, ...]]]:
    """The live hot file's erased-value hashes and their secret
    (:func:`memkeeper.storage.erased_values.carried_over`; none when it or its table does not
    exist). Call it while the file is held, as :func:`live_tombstones`."""
    if not hot_path.exists():
        return None, []
    conn = open_read_only(hot_path)
    try:
        has = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'erased_values'"
        ).fetchone()
        return erased_values.carried_over(conn) if has else (None, [])
    finally:
        conn.close()
