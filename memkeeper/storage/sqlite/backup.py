"""Online backup: a consistent copy of both files while agents write and jobs move entries.

A move between the hot and the cold file is several commits, and every write to the cold
file happens under the hot file's write lock (:mod:`memkeeper.storage.transitions`). So a
backup takes that lock (``BEGIN IMMEDIATE`` on the hot file) only long enough to settle
interrupted moves (:func:`~memkeeper.storage.transitions.reconcile`) and open one read
transaction on each file; it then lets writers go and copies both files from those two
snapshots with SQLite's backup API. Both snapshots show the same instant of every move: no
entry is in both copies or in neither. Writers wait only for the two snapshots to open
(measured: ``writers_blocked_ms`` in the result), not for the copy.

The copies are written under temporary names, switched to a rollback journal (a backup is a
plain file, with no ``-wal`` beside it), checked (``PRAGMA integrity_check``, application
id, schema, row counts against the snapshot), made 0600 in a 0700 directory, then renamed
into place; the manifest (:mod:`memkeeper.storage.sqlite.backup_check`) is written last.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sqlite3
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from memkeeper.clock import to_db
from memkeeper.errors import DatabaseError, StorageFull, StorageUnwritable
from memkeeper.storage.base import Storage
from memkeeper.storage.sqlite.backup_check import (
    FILES,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    check_file,
    describe,
    sha256_of,
)
from memkeeper.storage.sqlite.opening import open_database
from memkeeper.storage.sqlite.schema import COLD
from memkeeper.storage.transaction import immediate_transaction
from memkeeper.storage.transitions import reconcile

PARTIAL = ".partial"
_SIDECARS = ("-journal", "-wal", "-shm")
_LEFTOVER = re.compile(
    "|".join(
        rf"{re.escape(name)}(?:{re.escape(PARTIAL)}(?:{'|'.join(_SIDECARS)}|\.scrub-\d+\.lock)?"
        rf"|{'|'.join(_SIDECARS)})"
        for name, _ in FILES.values()
    )
    + rf"|{re.escape(MANIFEST + PARTIAL)}"
)
"""Every name a backup (or ``--prune-forgotten``) writes only while it runs: the copies under
their temporary names, SQLite's journal, WAL and shared memory beside them and beside the
final files, the scrub lock files of a prune, and the manifest's temporary name. A killed
backup leaves some of them; none is ever part of a finished backup."""


def is_own_name(name: str) -> bool:
    """True for a name a backup directory may hold: a final file, the manifest, a leftover."""
    finals = {MANIFEST} | {file for file, _ in FILES.values()}
    return name in finals or _LEFTOVER.fullmatch(name) is not None


def clear_leftovers(dest: Path) -> list[str]:
    """Remove what a killed backup or prune left in ``dest``; returns the names removed.

    A stale ``-journal`` must not survive: SQLite would take it for the hot journal of the
    next file under that name and "roll back" a good copy with another file's pages.
    """
    removed = []
    for entry in sorted(Path(dest).iterdir()) if Path(dest).is_dir() else []:
        if _LEFTOVER.fullmatch(entry.name) and entry.is_file():
            entry.unlink(missing_ok=True)
            removed.append(entry.name)
    return removed


def _same_dir(a: Path, b: Path) -> bool:
    with contextlib.suppress(OSError):
        return a.resolve() == b.resolve()
    return False


def prepare_directory(dest: Path, storage: Storage) -> None:
    """Create ``dest`` (0700), or accept it when empty or already a memkeeper backup.

    Anything else is refused: a directory with other files, or the live database's own
    directory, is never written into.
    """
    for live in (storage.hot_path, storage.cold_path):
        if _same_dir(dest, live.parent):
            raise StorageUnwritable(
                f"{dest} holds the live database file {live.name}; back up into another directory"
            )
    if dest.exists() and not dest.is_dir():
        raise StorageUnwritable(f"{dest} exists and is not a directory")
    if dest.is_dir():
        names = {entry.name for entry in dest.iterdir()}
        strangers = sorted(name for name in names if not is_own_name(name))
        finals = {name for name, _ in FILES.values()} & names
        if strangers or (finals and MANIFEST not in names):
            shown = ", ".join(strangers[:3]) or ", ".join(sorted(finals))
            raise StorageUnwritable(
                f"{dest} is not empty and is not a memkeeper backup (it holds {shown}); "
                "give an empty or new directory, or an earlier backup to replace"
            )
    try:
        dest.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(dest, 0o700)
        clear_leftovers(dest)
    except OSError as exc:
        raise StorageUnwritable(
            f"cannot create backup directory {dest}: {exc.strerror or exc}"
        ) from None


def _snapshot(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """A connection holding an open read transaction on ``path``: its snapshot starts now."""
    conn = sqlite3.connect(str(path), timeout=busy_timeout_ms / 1000, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return conn


def new_private_file(path: Path) -> None:
    """Create an empty 0600 file at ``path`` (replacing a leftover)."""
    path.unlink(missing_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def fsync_path(path: Path) -> None:
    """Flush a file's (or a directory's) data to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def to_rollback_journal(path: Path) -> None:
    """Leave ``path`` as one self-contained file: rollback journal, no ``-wal`` beside it."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = DELETE").fetchone()
    finally:
        conn.close()


def _copy(source: sqlite3.Connection, target: Path) -> None:
    new_private_file(target)
    conn = sqlite3.connect(str(target), isolation_level=None)
    try:
        source.backup(conn)  # reads the source's open snapshot, in one step
    finally:
        conn.close()
    to_rollback_journal(target)


def _empty_cold(target: Path, busy_timeout_ms: int) -> dict[str, Any]:
    """A fresh cold file for a database that has none yet, so a backup always has both."""
    target.unlink(missing_ok=True)
    db = open_database(target, COLD, busy_timeout_ms=busy_timeout_ms, create=True)
    assert db is not None
    db.conn.close()
    to_rollback_journal(target)
    conn = sqlite3.connect(str(target))
    try:
        return describe(conn, COLD)
    finally:
        conn.close()


def file_entry(path: Path, described: dict[str, Any]) -> dict[str, Any]:
    """A manifest's entry for one finished backup file: what it holds, size and sha256."""
    fsync_path(path)
    return {**described, "bytes": path.stat().st_size, "sha256": sha256_of(path)}


def write_manifest(dest: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest.json`` atomically (0600), after the files it describes."""
    partial = dest / f"{MANIFEST}{PARTIAL}"
    new_private_file(partial)
    partial.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    fsync_path(partial)
    os.replace(partial, dest / MANIFEST)
    fsync_path(dest)


def _disk_full(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite's error says the disk (the copy's, not the live file's) is full."""
    primary = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    return primary == sqlite3.SQLITE_FULL or "disk is full" in str(exc).lower()


def _one_line(exc: BaseException) -> str:
    """An error's text on one line (SQLite's integrity reports span many)."""
    return "; ".join(part.strip() for part in str(exc).splitlines() if part.strip())


def remove_with_sidecars(path: Path) -> None:
    """Delete a database file and its journal, WAL and shared-memory files, where present."""
    for suffix in ("", *_SIDECARS):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _discard(partial: dict[str, Path]) -> None:
    for path in partial.values():
        remove_with_sidecars(path)


def _live_corrupt(storage: Storage) -> DatabaseError | None:
    """When a copy fails, whether the live files are the culprit: one line saying so.

    ``PRAGMA quick_check`` through the store's own connections (the live files are never
    opened otherwise): a corrupt source makes a corrupt copy, and the operator must hear
    about the database, not about the copy.
    """
    for db, path in (
        (storage.hot, storage.hot_path),
        (storage.cold(create=False), storage.cold_path),
    ):
        if db is None:
            continue
        try:
            with storage.lock:
                found = [str(row[0]) for row in db.conn.execute("PRAGMA quick_check(1)")]
        except sqlite3.DatabaseError as exc:
            found = [str(exc)]
        if found != ["ok"]:
            first = found[0].strip().splitlines()
            detail = next((line for line in first if not line.startswith("***")), "")
            return DatabaseError(
                f"the live database {path} is corrupt (quick_check: {detail or 'failed'}); "
                "nothing was backed up. Stop the agents and the service, then restore the "
                "last good backup (memkeeper restore-backup DIR) or salvage it with "
                f"'sqlite3 {path} .recover'"
            )
    return None


def take(storage: Storage, dest: Path, *, now: datetime, version: str) -> dict[str, Any]:
    """Back up both files of ``storage`` into ``dest``; returns the manifest plus
    ``writers_blocked_ms`` (how long the hot write lock was held)."""
    if storage.hot.dialect == "postgres":
        from memkeeper.storage.postgres.backups import refuse

        raise refuse("backup", str(storage.hot_path))
    dest = Path(dest)
    prepare_directory(dest, storage)
    partial = {role: dest / f"{name}{PARTIAL}" for role, (name, _) in FILES.items()}
    readers: dict[str, sqlite3.Connection] = {}
    try:
        with storage.lock, immediate_transaction(storage.hot):
            started = time.perf_counter()  # from the moment writers are held
            reconcile(storage)  # settle moves a crash interrupted: no id in both files
            readers["hot"] = _snapshot(storage.hot_path, storage.busy_timeout_ms)
            if storage.cold(create=False) is not None:
                readers["cold"] = _snapshot(storage.cold_path, storage.busy_timeout_ms)
        blocked_ms = (time.perf_counter() - started) * 1000
        try:
            described = {role: describe(conn, FILES[role][1]) for role, conn in readers.items()}
            for role, conn in readers.items():
                _copy(conn, partial[role])
        except sqlite3.DatabaseError as exc:
            _discard(partial)
            if _disk_full(exc):
                raise StorageFull(
                    f"the disk holding {dest} is full ({_one_line(exc)}); nothing was kept. "
                    "Free some space, or back up onto another disk"
                ) from None
            raise _live_corrupt(storage) or DatabaseError(
                f"copying the database into {dest} failed, nothing was kept: {_one_line(exc)}"
            ) from None
        except OSError as exc:
            _discard(partial)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise StorageFull(
                    f"the disk holding {dest} is full ({exc.strerror or exc}); nothing was "
                    "kept. Free some space, or back up onto another disk"
                ) from None
            raise
    finally:
        for conn in readers.values():
            conn.close()
    if "cold" not in described:
        described["cold"] = _empty_cold(partial["cold"], storage.busy_timeout_ms)
    files = {}
    for role, (_name, kind) in FILES.items():
        files[role] = file_entry(partial[role], described[role])
        try:
            check_file(partial[role], kind, files[role])
        except DatabaseError as exc:
            _discard(partial)
            raise _live_corrupt(storage) or DatabaseError(
                f"the backup copy failed its check, nothing was kept: {_one_line(exc)}"
            ) from None
    for role, (name, _) in FILES.items():
        os.replace(partial[role], dest / name)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "taken_at": to_db(now),
        "memkeeper_version": version,
        "source": {"hot": str(storage.hot_path), "cold": str(storage.cold_path)},
        "files": files,
    }
    write_manifest(dest, manifest)
    return {**manifest, "writers_blocked_ms": round(blocked_ms, 3)}
