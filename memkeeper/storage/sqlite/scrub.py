"""Erased bytes leave the files: find them, zero them where SQLite no longer reads, verify.

``secure_delete`` zeroes a deleted row's cell, but SQLite's page rebuilds (when a b-tree page
splits or merges) leave stale copies of moved cells in the unused gap of live pages, and in
freeblock bodies, where no later delete reaches them. After an erasure commits,
:func:`scrub` removes every copy of the erased texts (``needles``: the values, and their
JSON-escaped form as the change log stored them) from each file and its write-ahead log,
with work that follows what is erased, not the size of the file, and without holding
anyone up for more than a moment: each file is scanned and zeroed in place
(:mod:`memkeeper.storage.sqlite.zeroing`: the file frozen for the scan, the write lock held
only to catch up with the pages agents committed meanwhile, the WAL truncated, the zeroed
pages verified).

Whatever cannot be proven unused (an occurrence in page 1 or a pointer-map page, a file without
a pointer map, a page the format reading does not accept, a verification that still finds
one) sends the file to the fallback: :func:`rebuild`, ``VACUUM``, every page written anew
from the live rows under an exclusive lock, then the WAL truncated. So does an erasure
whose texts are unknown (``needles`` None: one interrupted after its commit, found later
through ``pending_scrubs``) or too many to scan for (:data:`MAX_SCANNED_NEEDLES`), and a
file this process can only read.

The scan never opens or closes the database file itself: a ``close()`` of any descriptor of
a file cancels every POSIX lock the process holds on it, the SQLite connection's included
(:mod:`memkeeper.storage.sqlite.rawfile`). The WAL is read through a descriptor of its own,
which is safe: SQLite takes no lock on the ``-wal`` file (its locks are on the main file and
the ``-shm``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterable
from pathlib import Path

from memkeeper import logs
from memkeeper.errors import MemkeeperError
from memkeeper.storage.sqlite.connection import Database
from memkeeper.storage.sqlite.errors import (
    erased_bytes_locked,
    erased_bytes_unusable,
    is_locked_error,
)
from memkeeper.storage.sqlite.rawfile import RawFile, holds_any, minimal
from memkeeper.storage.sqlite.zeroing import checkpoint_fully, zero_in_place

log = logs.get_logger(__name__)

MAX_SCANNED_NEEDLES = 64
"""Above this many distinct byte strings (none inside another), the file is rebuilt instead.

Each needle costs about 0.25 s per GiB of file to search for (``bytes.find``; the read is
0.2 s per GiB), with no lock held: 64 needles on a 1 GB file take about as long as its
rebuild, which holds every agent up meanwhile."""

ZERO_IN_PLACE = True
"""False: every file holding a needle is rebuilt (the fallback), as before zeroing in place
existed. ``memkeeper bench --forget`` measures both; tests force the fallback with it."""


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
            raise erased_bytes_locked(path, "rebuilt") from None
        raise erased_bytes_unusable(path, "rebuilt", exc) from None
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
    wanted = None if needles is None else minimal(needles)
    unknown = wanted is None or len(wanted) > MAX_SCANNED_NEEDLES
    for db, path, raw in files:
        if not unknown and ZERO_IN_PLACE and raw is not None and raw.writable:
            reason = zero_in_place(db, path, raw, needles or (), timeout_s=timeout_s)
            if reason is None:
                continue
            log.warning(
                "erased bytes not zeroed in place: rebuilding the file",
                file=str(path),
                reason=reason,
            )
        else:
            checkpoint_fully(db, path, timeout_s=timeout_s)
            if not unknown and not file_holds_any(raw, wanted or ()):
                continue
        checkpoint_fully(db, path, timeout_s=timeout_s)
        rebuild(db, path, timeout_s=timeout_s)
        rebuilt.append(path)
    return rebuilt
