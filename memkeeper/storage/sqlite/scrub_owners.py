"""Who is scrubbing: an erasure's ``pending_scrubs`` row is interrupted only if its owner is gone.

A forget commits its erasure with a ``pending_scrubs`` row, then scrubs both files (minutes on
a large database, waiting for readers) and deletes the row. A row found later means either
"its owner is still scrubbing" or "its owner died after the commit" — and only the second
needs the other processes to rebuild both files. Taking every row for an interrupted one made
job runs and other forgets ``VACUUM`` both files under a live owner (``LockBusy`` after
committing, forget p99 of 7.6 s with 8 writers; issue 18, item 4).

The owner holds an exclusive ``flock`` on ``<db>.scrub-<row id>.lock`` from before its row is
committed until after it is deleted. The kernel drops a flock when its holder dies, however
it dies, so whoever takes that lock without waiting knows the owner is gone, and from then on
owns the unfinished scrub itself (a crash while finishing it hands it on again). Chosen over
a pid and start time in the row: no schema change, no reading other processes' details
(``/proc`` is Linux-only), and no pid reuse to reason about. The lock file is never the
database file: a lock taken and released on that would cancel SQLite's own locks
(:mod:`memkeeper.storage.sqlite.rawfile`). A lock file that cannot be created (a read-only
directory) makes its row look abandoned, which only costs a rebuild.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterable
from pathlib import Path


def lock_path(hot_path: Path, marker: int) -> Path:
    """The lock file of ``pending_scrubs`` row ``marker`` of the database at ``hot_path``."""
    return hot_path.with_name(f"{hot_path.name}.scrub-{int(marker)}.lock")


HOLD_WAIT_S = 2.0
"""How long a new row's owner waits for its lock file: SQLite reuses the id of a row just
deleted, whose previous owner lets its lock go right after that commit."""


HELD = -1
"""What :func:`_lock` answers when another descriptor holds the lock past the wait."""


def _lock(path: Path, *, wait_s: float) -> int | None:
    """Take the flock of ``path``: its descriptor; :data:`HELD` when someone holds it past
    ``wait_s``; None when the file cannot be opened or locked at all.

    The usual lock-file dance: a holder removes the file before letting go, so a lock taken
    on a descriptor whose file is no longer at ``path`` is retried on the new file.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() >= deadline:
                return HELD
            time.sleep(0.005)
            continue
        except OSError:
            os.close(fd)
            return None
        try:
            here = os.stat(path)
        except OSError:
            here = None
        mine = os.fstat(fd)
        if here is not None and (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino):
            return fd
        os.close(fd)  # removed by its previous holder meanwhile: lock the new file


def hold(hot_path: Path, marker: int) -> int | None:
    """Take the lock of a new row (before it commits); the descriptor, or None if impossible
    (the row then looks abandoned to others, which costs them a rebuild, nothing more)."""
    fd = _lock(lock_path(hot_path, marker), wait_s=HOLD_WAIT_S)
    return None if fd == HELD else fd


def claim_abandoned(hot_path: Path, markers: Iterable[int]) -> dict[int, int | None]:
    """Of ``markers``, those whose owner is gone, each with the lock now held for it.

    Call under the hot write lock, with the rows just read: an owner deletes its row before
    it lets its lock go, so a row whose lock is free has no owner. The value is None when
    the lock file cannot be opened at all (the row is then taken as abandoned).
    """
    claimed: dict[int, int | None] = {}
    for marker in markers:
        fd = _lock(lock_path(hot_path, marker), wait_s=0)
        if fd == HELD:
            continue  # its owner is alive and scrubbing: leave the row to it
        claimed[marker] = fd
    return claimed


def release(hot_path: Path, held: dict[int, int | None]) -> None:
    """Let go of locks held for rows that are deleted now (or left for a retry)."""
    for marker, fd in held.items():
        if fd is None:
            continue
        with contextlib.suppress(OSError):
            lock_path(hot_path, marker).unlink()
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    held.clear()
