"""Zeroing erased bytes in place: a frozen scan, a short catch-up, a truncated WAL.

:func:`memkeeper.storage.sqlite.scrub.scrub` calls :func:`zero_in_place` for each file after
an erasure commits; anything it cannot prove unused sends the file to the scrub's fallback,
the whole-file rebuild. The steps, with work that follows what is erased, not the size of
the file, and without holding anyone up for more than a moment:

1. **Freeze.** Under SQLite's write lock (a ``BEGIN IMMEDIATE`` of the scrub's own writer
   connection), a ``PASSIVE`` checkpoint folds the WAL into the main file, then the scrub's
   reader connection opens a read transaction: its snapshot is the whole WAL, already
   copied, and while it stays open no checkpoint may write the main file again (SQLite
   never backfills past the oldest reader's mark). The write lock is released at once:
   agents read and write as usual, their commits going to the WAL.
2. **Scan** the frozen main file (``pread`` through the process's descriptor of it,
   :mod:`memkeeper.storage.sqlite.rawfile`) for the needles, and classify each occurrence
   with the page format (:mod:`memkeeper.storage.sqlite.pages`): inside live bytes (a cell,
   a header: another row that holds the same text, left alone) or not. Each page with one
   outside live bytes has all its unused space (gap, freeblock bodies, fragments, a free
   page whole) zeroed with ``pwrite``, at once: the file is frozen, so the page read is the
   page written over, and only bytes SQLite never reads change, so a reader that reads the
   page meanwhile sees the same rows. When nothing needed zeroing, the read transaction
   ends and step 4 follows.
3. **Catch up**, under the write lock: the pages every commit since the freeze wrote are
   read from the WAL's frame headers (a writer may have started from an old image of a
   zeroed page in its cache); the reader's transaction ends and a ``PASSIVE`` checkpoint
   copies those frames; those pages are searched and zeroed as in step 2. A small commit
   (``user_version`` set to itself, which writes page 1) then changes the WAL index, so
   every connection drops its page cache at its next transaction and none writes an old
   image of a zeroed page back. The write lock is held for this step only: its cost
   follows the agents' commits during the scan, not the file's size.
4. **Truncate** the WAL (``wal_checkpoint(TRUNCATE)``, waiting for readers of older
   snapshots): the old frames with their page images go with it.
5. **Verify**: the pages zeroed and caught up are searched again; what remains must be
   live.

:func:`checkpoint_fully` (step 4) is also how the fallback empties the WAL after its rebuild.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Collection, Iterable
from pathlib import Path

from memkeeper import logs
from memkeeper.errors import LockBusy
from memkeeper.storage.sqlite.connection import Database
from memkeeper.storage.sqlite.errors import (
    erased_bytes_locked,
    erased_bytes_unusable,
    is_locked_error,
)
from memkeeper.storage.sqlite.pages import FileView, Layout, within
from memkeeper.storage.sqlite.rawfile import RawFile, find_all, minimal
from memkeeper.storage.sqlite.writing import poll_begin_immediate

log = logs.get_logger(__name__)


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
                raise erased_bytes_unusable(path, "checkpointed", exc) from None
            busy = 1
        except sqlite3.DatabaseError as exc:
            raise erased_bytes_unusable(path, "checkpointed", exc) from None
        if not busy:
            return
        if time.monotonic() >= deadline:
            raise LockBusy(
                f"the erasure is committed, but another connection kept an old snapshot of "
                f"{path} open, so erased page images are still in its write-ahead log; "
                "run the same forget again to finish (repeating it is safe)"
            )
        time.sleep(0.05)


def zero_in_place(
    db: Database, path: Path, raw: RawFile, needles: Collection[bytes], *, timeout_s: float
) -> str | None:
    """Steps 1-5 of the module docstring for one file. None when no needle is left outside
    live bytes; else why the file must be rebuilt (nothing was left half done: a zeroed
    page only ever lost bytes SQLite does not read)."""
    wanted = [needle for needle in needles if needle]
    if not wanted:
        checkpoint_fully(db, path, timeout_s=timeout_s)
        return None
    with raw.scrubbing:
        reader, writer = _helpers(raw, path, timeout_s)
        try:
            return _zero(db, path, raw, reader, writer, wanted, timeout_s)
        finally:
            for conn in (writer, reader):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")


def _helpers(raw: RawFile, path: Path, timeout_s: float) -> tuple[sqlite3.Connection, ...]:
    """The scrub's reader and writer connections of the file, kept with its descriptor."""
    if not raw.helpers:
        for _ in range(2):
            try:
                conn = sqlite3.connect(
                    str(path), timeout=timeout_s, isolation_level=None, check_same_thread=False
                )
            except sqlite3.Error as exc:
                raise erased_bytes_unusable(path, "opened", exc) from None
            raw.helpers.append(conn)
    for conn in raw.helpers:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
    return raw.helpers[0], raw.helpers[1]


def _begin_write(writer: sqlite3.Connection, path: Path) -> None:
    """The write lock, queued for as memkeeper's own writers queue (polled with jitter, not
    SQLite's growing sleeps, which let a busy file's other writers starve this one)."""
    full_ms = int(writer.execute("PRAGMA busy_timeout").fetchone()[0])
    try:
        poll_begin_immediate(writer, full_ms)
    except LockBusy:
        raise erased_bytes_locked(path, "scrubbed") from None
    except sqlite3.OperationalError as exc:
        raise erased_bytes_unusable(path, "scrubbed", exc) from None


def _backfilled(conn: sqlite3.Connection) -> bool:
    """A ``PASSIVE`` checkpoint; True when every frame of the WAL is in the main file."""
    busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return not busy and frames == copied


def _freeze(
    reader: sqlite3.Connection, writer: sqlite3.Connection, path: Path, deadline: float
) -> None:
    """Step 1: the reader holds a snapshot with nothing left to copy (so the main file stays
    as it is until it ends), taken while the writer held the write lock for a moment."""
    while True:
        _begin_write(writer, path)
        try:
            if _backfilled(reader):
                reader.execute("BEGIN")
                reader.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return
        finally:
            writer.execute("ROLLBACK")
        if time.monotonic() >= deadline:
            raise LockBusy(
                f"the erasure is committed, but another connection kept an old snapshot of "
                f"{path} open, so its write-ahead log could not be folded in to remove erased "
                "bytes; run the same forget again to finish (repeating it is safe)"
            )
        time.sleep(0.01)


def _wal_pages(path: Path, page_size: int) -> set[int]:
    """The page numbers of every frame in the WAL file (a superset of the last commits')."""
    try:
        fd = os.open(f"{path}-wal", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return set()
    try:
        frame = 24 + page_size
        frames = max(0, (os.fstat(fd).st_size - 32) // frame)
        pages = set()
        for index in range(frames):
            head = os.pread(fd, 4, 32 + index * frame)
            if len(head) == 4:
                pages.add(int.from_bytes(head, "big"))
        return pages
    finally:
        os.close(fd)  # not the database file: SQLite locks only it and the -shm


def _plan(
    view: FileView, needles: list[bytes], pages: Iterable[int]
) -> tuple[dict[int, Layout], str | None]:
    """Pages among ``pages`` that hold a needle outside live bytes, with their layouts;
    or why that cannot be told (then the file is rebuilt)."""
    size, span = view.pages * view.page_size, max(len(needle) for needle in needles) - 1
    found: set[tuple[int, int]] = set()
    for page in sorted(set(pages)):
        if 1 <= page <= view.pages:
            low = (page - 1) * view.page_size
            high = min(size, low + view.page_size + span)
            found.update(find_all(view.fd, needles, start=max(0, low - span), end=high))
    by_page: dict[int, list[tuple[int, int]]] = {}
    closer: list[tuple[int, int]] = []  # across pages, or in a page the cheap reading left
    for start, end in found:
        page = view.page_of(start)
        if page == view.page_of(end - 1):
            by_page.setdefault(page, []).append((start, end))
        else:
            closer.append((start, end))
    for page, occurrences in by_page.items():
        low = (page - 1) * view.page_size
        if not view.quickly_live(page, [(s - low, e - low) for s, e in occurrences]):
            closer.extend(occurrences)
    layouts: dict[int, Layout | None] = {}
    plan: dict[int, Layout] = {}
    for start, end in sorted(closer):
        touched = range(view.page_of(start), view.page_of(end - 1) + 1)
        live = True
        for page in touched:
            if page not in layouts:
                layouts[page] = view.layout(page)
            layout = layouts[page]
            if layout is None:
                return {}, f"an erased text is in page {page}, whose use cannot be proven"
            low = (page - 1) * view.page_size
            clipped = (max(start, low) - low, min(end, low + view.page_size) - low)
            live = live and within(layout.live, *clipped)
        if live:
            continue  # another row's live bytes hold the same text
        for page in touched:
            if view.is_special(page):
                return {}, f"an erased text is in page {page}, which is never written here"
            plan[page] = layouts[page]  # type: ignore[assignment]
    return plan, None


def _apply(view: FileView, plan: dict[int, Layout]) -> int:
    """Zero the unused ranges of the planned pages; how many bytes were written."""
    written = 0
    for page, layout in plan.items():
        low = (page - 1) * view.page_size
        for start, end in layout.unused:
            written += os.pwrite(view.fd, bytes(end - start), low + start)
    return written


def _zero(
    db: Database,
    path: Path,
    raw: RawFile,
    reader: sqlite3.Connection,
    writer: sqlite3.Connection,
    needles: list[bytes],
    timeout_s: float,
) -> str | None:
    deadline = time.monotonic() + timeout_s
    try:
        _freeze(reader, writer, path, deadline)
        view = FileView.read(raw.fd)
        if view is None or not view.pointer_map:
            reader.execute("COMMIT")
            return "the file has no pointer map to tell its pages' kinds"
        hits = find_all(raw.fd, minimal(needles))
        pages = {view.page_of(offset) for start, end in hits for offset in (start, end - 1)}
        plan, reason = _plan(view, needles, pages)
        if reason is not None or not plan:
            reader.execute("COMMIT")
            checkpoint_fully(db, path, timeout_s=timeout_s)
            return reason
        # The main file is frozen (no checkpoint may write it while the reader holds its
        # snapshot), and only unused bytes change: no lock is needed to zero them.
        zeroed = _apply(view, plan)
        _begin_write(writer, path)
        changed = _wal_pages(path, view.page_size)  # every commit since the freeze
        reader.execute("COMMIT")
        deadline = time.monotonic() + timeout_s
        while not _backfilled(reader):
            if time.monotonic() >= deadline:
                raise erased_bytes_locked(path, "scrubbed")
            # What keeps the WAL from being folded in is an older snapshot: maybe another
            # process's scrub, frozen for its scan, which then needs this write lock to end
            # it. Let go for a moment; the pages written meanwhile join the check (and a page
            # zeroed here that an old image overwrote is found by the final verification).
            writer.execute("ROLLBACK")
            time.sleep(0.005)
            _begin_write(writer, path)
            changed |= _wal_pages(path, view.page_size)
        view = FileView.read(raw.fd)
        assert view is not None
        again, reason = _plan(view, needles, changed)
        if reason is not None:
            writer.execute("ROLLBACK")
            return reason
        zeroed += _apply(view, again)
        os.fsync(raw.fd)
        (version,) = writer.execute("PRAGMA user_version").fetchone()
        writer.execute(f"PRAGMA user_version = {int(version)}")  # page 1 rewritten: caches reset
        writer.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        if is_locked_error(exc):
            raise erased_bytes_locked(path, "scrubbed") from None
        raise erased_bytes_unusable(path, "scrubbed", exc) from None
    except sqlite3.DatabaseError as exc:
        raise erased_bytes_unusable(path, "scrubbed", exc) from None
    checkpoint_fully(db, path, timeout_s=timeout_s)
    view = FileView.read(raw.fd)
    assert view is not None
    left, reason = _plan(view, needles, set(plan) | set(again) | changed)
    if reason is not None or left:
        return reason or f"erased bytes still found in pages {sorted(left)[:5]} after zeroing"
    log.info(
        "erased bytes zeroed in place",
        file=str(path),
        pages=len(set(plan) | set(again)),
        bytes=zeroed,
        wal_pages=len(changed),
    )
    return None
