"""Reading a live database file's raw bytes without dropping this process's SQLite locks.

SQLite locks its files with POSIX advisory locks, which belong to a (process, file) pair:
``close()`` of *any* descriptor of the file, opened by anyone in the process, cancels every
lock the process holds on it (SQLite's "How To Corrupt An SQLite Database File", §2.2). A
residue scan that opened and closed ``memory.db`` therefore silently dropped the shared lock
of the process's own SQLite connection; the next short-lived process to close the database
then believed it was the last user, checkpointed and deleted the ``-wal`` still in use, and
the file was corrupted (issue 18, item 1).

The rule this module enforces: memkeeper never ``close()``\\s a descriptor of a database file
that the process may have open through SQLite. The scan reads through **one read-only
descriptor per file, kept for as long as any** :class:`~memkeeper.storage.base.Storage` **of
the process uses that file**: it is opened (never closed) when a Storage opens the file, and
closed only when the last such Storage has closed its SQLite connections — when no lock of
this process on the file remains to be lost. Alternatives weighed:

* the ``sqlite_dbpage`` virtual table (raw pages through the connection itself) is not
  compiled into the SQLite that Python ships on most systems (not into this one);
* a child process per scan costs a Python start per forget, and ``sys.executable`` is not a
  Python interpreter in every embedding host.

Reads use ``os.pread``, never ``mmap``: Python's ``mmap`` duplicates the descriptor and
closes the duplicate, which cancels the locks just the same. The descriptor also records
which file was opened (device and inode), so a writer can tell when the path now names
another file (:meth:`memkeeper.storage.base.Storage.check_cold_file`).

The descriptor is opened for reading and writing when the file allows it: the scrub zeroes
erased bytes in pages' unused space with ``pwrite`` through it, under SQLite's write lock
(:mod:`memkeeper.storage.sqlite.scrub`); read-only when the file is, and then the scrub
falls back to its rebuild. ``scrubbing`` serializes this process's scrubs of the file, and
``helpers`` keeps the scrub's two SQLite connections of it open between scrubs (each
``close()`` of one would otherwise be deferred by SQLite until no lock of the process on the
file remains: a descriptor per scrub for a long-running process).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHUNK = 1 << 20
"""Bytes read per ``pread`` while scanning."""


@dataclass
class RawFile:
    """One read-only descriptor of a database file, shared by this process's Storages."""

    path: Path
    fd: int
    identity: tuple[int, int]
    users: int = 0
    strays: list[int] = field(default_factory=list)
    writable: bool = False
    scrubbing: threading.Lock = field(default_factory=threading.Lock)
    helpers: list[Any] = field(default_factory=list)
    """The scrub's SQLite connections of this file, closed with the descriptor."""


_OPEN: dict[tuple[int, int], RawFile] = {}
_GUARD = threading.Lock()


def identity_of(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path`` now; None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def attach(path: Path) -> RawFile | None:
    """The process's descriptor of the file at ``path`` (opened on first use), counted.

    Call right after the SQLite connection opened the file, and :func:`detach` after that
    connection closed. None when the file cannot be opened (the scan then rebuilds).
    """
    path = Path(path)
    with _GUARD:
        key = identity_of(path)
        raw = _OPEN.get(key) if key is not None else None
        if raw is None:
            fd, writable = _open(path)
            if fd is None:
                return None
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino)
            raw = _OPEN.get(key)
            if raw is None:
                raw = _OPEN[key] = RawFile(path, fd, key, writable=writable)
            else:
                # The path was replaced between stat and open by a file already open here:
                # closing this descriptor would cancel that file's locks, so keep it.
                raw.strays.append(fd)
        raw.users += 1
        return raw


def _open(path: Path) -> tuple[int | None, bool]:
    """A new descriptor of ``path``, read-write when allowed, and whether it is writable."""
    cloexec = getattr(os, "O_CLOEXEC", 0)
    for flags, writable in ((os.O_RDWR, True), (os.O_RDONLY, False)):
        try:
            return os.open(path, flags | cloexec), writable
        except OSError:
            continue
    return None, False


def detach(raw: RawFile | None) -> None:
    """One Storage is done with the file; the last one closes the descriptor(s)."""
    if raw is None:
        return
    with _GUARD:
        raw.users -= 1
        if raw.users > 0:
            return
        _OPEN.pop(raw.identity, None)
        for conn in raw.helpers:  # SQLite's own close is safe: it defers while locks remain
            with contextlib.suppress(Exception):
                conn.close()
        raw.helpers.clear()
        for fd in (raw.fd, *raw.strays):
            os.close(fd)
        raw.fd = -1
        raw.strays.clear()


def holds_any(raw: RawFile, needles: Collection[bytes]) -> bool:
    """True when the file's bytes contain any of the needles (read with ``pread``)."""
    return bool(find_all(raw.fd, needles, first_only=True))


def minimal(needles: Collection[bytes]) -> list[bytes]:
    """The needles without duplicates and without any that contains another: every
    occurrence of a dropped needle holds one of a kept needle, so finding those finds all
    the places to look at."""
    kept: list[bytes] = []
    for needle in sorted({n for n in needles if n}, key=len):
        if not any(shorter in needle for shorter in kept):
            kept.append(needle)
    return kept


PREFIX_BYTES = 16
"""Needles are looked for by their first bytes, once for all needles that share them."""


def find_all(
    fd: int,
    needles: Collection[bytes],
    *,
    start: int = 0,
    end: int | None = None,
    first_only: bool = False,
) -> list[tuple[int, int]]:
    """Every occurrence of every needle in the file's bytes [start, end): (offset, end).

    One ``pread`` of :data:`CHUNK` at a time. Each chunk is searched once for each distinct
    :data:`PREFIX_BYTES`-byte start of the needles (``bytes.find``: about 0.25 s per GiB
    each here, the read itself 0.2 s), and every needle with that start is checked where
    it is found: the versions of one value, or a text and its JSON-escaped form, cost one
    search. An occurrence across two chunks is found through an overlap of the longest
    needle.
    """
    wanted = [needle for needle in needles if needle]
    if not wanted:
        return []
    by_start: dict[bytes, list[bytes]] = {}
    for needle in wanted:
        by_start.setdefault(needle[:PREFIX_BYTES], []).append(needle)
    overlap = max(len(needle) for needle in wanted) - 1
    stop = os.fstat(fd).st_size if end is None else end
    found: set[tuple[int, int]] = set()
    offset = start
    while offset < stop:
        base = max(start, offset - overlap)
        window = os.pread(fd, min(CHUNK, stop - offset) + (offset - base), base)
        if len(window) <= offset - base:
            break
        for prefix, members in by_start.items():
            at = window.find(prefix)
            while at >= 0:
                for needle in members:
                    if window.startswith(needle, at):
                        found.add((base + at, base + at + len(needle)))
                        if first_only:
                            return sorted(found)
                at = window.find(prefix, at + 1)
        offset = base + len(window)
    return sorted(found)
