"""Erased bytes leave the files: checkpoint, scan, and rebuild a file that still holds them.

``secure_delete`` zeroes a deleted row's cell, but SQLite's page rebuilds (when a b-tree page
splits or merges) leave stale copies of moved cells in the unused gap of live pages, where
no later delete reaches them. After an erasure, :func:`scrub` therefore:

1. checkpoints each file with ``wal_checkpoint(TRUNCATE)``, waiting for readers of older
   snapshots, so the write-ahead log is empty and the main file holds the committed pages;
2. scans the main file's raw bytes for each erased text (the values, and their JSON-escaped
   form as the change log stored them);
3. rebuilds a file in which any is still found with ``VACUUM`` — every page written anew from
   the live rows only — and checkpoints it again.

When the erased texts are unknown (an erasure interrupted after its commit, found later
through ``pending_scrubs``) or too many to scan for, both files are rebuilt unconditionally.
The scan reads the file once (``pread`` through the process's long-lived descriptor of it,
:mod:`memkeeper.storage.sqlite.rawfile`), which is far cheaper than a ``VACUUM`` for the usual
one-key forget; the rebuild is what guarantees the result. The scan never opens or closes
the file itself: a ``close()`` of any descriptor of a file cancels every POSIX lock the
process holds on it, the SQLite connection's included (issue 18, item 1). Without such a
descriptor the file is rebuilt instead of scanned.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Collection, Iterable
from pathlib import Path

from memkeeper.errors import DatabaseError, LockBusy, MemkeeperError, StorageFull
from memkeeper.storage.sqlite.connection import Database
from memkeeper.storage.sqlite.errors import is_locked_error
from memkeeper.storage.sqlite.rawfile import RawFile, holds_any

MAX_SCANNED_NEEDLES = 32
"""Above this many byte strings to look for, rebuilding is cheaper than scanning once per text."""


def needles_of(texts: Iterable[str | None]) -> set[bytes]:
    """The byte strings an erased text can leave behind: as stored, and JSON-escaped."""
    found: set[bytes] = set()
    for text in texts:
        if not text:
            continue
        found.add(text.encode("utf-8", "surrogatepass"))
        escaped = json.dumps(text, ensure_ascii=False)[1:-1]
        found.add(escaped.encode("utf-8", "surrogatepass"))
    return found


def _unusable(path: Path, doing: str, exc: sqlite3.Error) -> MemkeeperError:
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


def checkpoint_fully(db: Database, path: Path, *, timeout_s: float) -> None:
    """Fold the whole WAL into the main file and truncate it, waiting for old readers.

    Raises LockBusy when a reader keeps an old snapshot open past ``timeout_s``: erased page
    images would otherwise stay in the write-ahead log.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            busy, _log, _done = db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.OperationalError as exc:
            if not is_locked_error(exc):
                raise _unusable(path, "checkpointed", exc) from None
            busy = 1
        except sqlite3.DatabaseError as exc:
            raise _unusable(path, "checkpointed", exc) from None
        if not busy:
            return
        if time.monotonic() >= deadline:
            raise LockBusy(
                f"the erasure is committed, but another connection kept an old snapshot of "
                f"{path} open, so erased page images are still in its write-ahead log; "
                "run the same forget again to finish (repeating it is safe)"
            )
        time.sleep(0.05)


def file_holds_any(raw: RawFile | None, needles: Collection[bytes]) -> bool:
    """True when the file's raw bytes contain any of the needles, or cannot be read.

    ``raw`` is the process's descriptor of the file (:mod:`memkeeper.storage.sqlite.rawfile`); the
    file is never opened or closed here.
    """
    if not needles:
        return False
    if raw is None:
        return True  # unreadable here: the caller rebuilds, which guarantees the result
    return holds_any(raw, needles)


def rebuild(db: Database, path: Path, *, timeout_s: float) -> None:
    """``VACUUM`` the file (every page rewritten from live rows), then empty its WAL."""
    try:
        db.conn.execute("VACUUM")
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, MemkeeperError):
            raise  # already explained (a read-only file, say)
        if isinstance(exc, sqlite3.OperationalError) and is_locked_error(exc):
            raise LockBusy(
                f"cannot rebuild {path} to remove erased bytes: it stayed locked; "
                "run the same forget again to finish (repeating it is safe)"
            ) from None
        raise _unusable(path, "rebuilt", exc) from None
    checkpoint_fully(db, path, timeout_s=timeout_s)


def scrub(
    files: Iterable[tuple[Database, Path, RawFile | None]],
    needles: Collection[bytes] | None,
    *,
    timeout_s: float,
) -> list[Path]:
    """Leave no needle in any of the files or their WALs; returns the files rebuilt.

    Each file comes with its SQLite connection, its path (for messages) and the process's
    raw descriptor of it. ``needles`` None means "unknown": every file is rebuilt.
    """
    rebuilt = []
    unknown = needles is None or len(needles) > MAX_SCANNED_NEEDLES
    for db, path, raw in files:
        checkpoint_fully(db, path, timeout_s=timeout_s)
        if unknown or file_holds_any(raw, needles or ()):
            rebuild(db, path, timeout_s=timeout_s)
            rebuilt.append(path)
    return rebuilt
