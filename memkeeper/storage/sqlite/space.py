"""Space in memkeeper's files: returning free pages, and measuring what each table holds.

Both files use ``auto_vacuum = INCREMENTAL``: pages freed by deletes (retention, erasure,
moves to cold storage) go on the file's freelist, where later writes reuse them, and
:func:`release_free_pages` hands up to a bounded number of them back to the file system —
a few hundred pages per short write transaction, so agents never wait long for the lock.
In WAL mode the file itself shrinks at the next checkpoint that completes.

New files get the setting before their first table exists (:mod:`memkeeper.storage.sqlite.opening`);
:func:`convert_to_incremental` is the migration step that converts older files (it needs a
``VACUUM``, which cannot run inside a transaction).
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

from memkeeper.storage.sqlite.connection import Database

INCREMENTAL = 2
"""``PRAGMA auto_vacuum`` value of INCREMENTAL (0 is NONE, 1 is FULL)."""

STEP_PAGES = 256
"""Free pages released per write transaction: 1 MiB at the default page size."""


def auto_vacuum(db: Database) -> int:
    """The file's ``auto_vacuum`` mode: 0 none, 1 full, 2 incremental."""
    return int(db.conn.execute("PRAGMA auto_vacuum").fetchone()[0])


def convert_to_incremental(db: Database) -> None:
    """Migration step: switch an existing file to ``auto_vacuum = INCREMENTAL``.

    Changing the mode of a file that already has tables takes a ``VACUUM`` (the whole file
    rewritten, atomically: a crash leaves the old file or the new one), and ``VACUUM`` cannot
    run inside a transaction. Idempotent: a file already incremental (every new file) is left
    alone, so :func:`memkeeper.storage.sqlite.opening.migrate` can run it once on its own and again
    in the transaction that records it.
    """
    if auto_vacuum(db) == INCREMENTAL:
        return
    conn = db.conn
    if conn.in_transaction:
        raise RuntimeError(
            "converting a file to incremental auto-vacuum needs a VACUUM, which "
            "cannot run inside a transaction"
        )
    conn.execute(f"PRAGMA auto_vacuum = {INCREMENTAL}")
    conn.execute("VACUUM")
    # VACUUM wrote the whole file into the WAL: fold it back now (best effort).
    with contextlib.suppress(sqlite3.OperationalError):
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()


def free_pages(db: Database) -> int:
    """Pages on the file's freelist (unused, reusable)."""
    return int(db.conn.execute("PRAGMA freelist_count").fetchone()[0])


def release_free_pages(db: Database, max_pages: int, *, step_pages: int = STEP_PAGES) -> int:
    """Return up to ``max_pages`` free pages to the file system; returns how many went.

    Each step is one short write transaction (``PRAGMA incremental_vacuum(step_pages)``,
    which moves the file's last pages into free slots and cuts the tail off). Stops early
    when the freelist is empty, when the file is not incremental (nothing to do until its
    migration ran), or when another writer keeps the lock past the busy timeout (the next
    run continues). The caller must not hold a transaction on ``db``.
    """
    conn = db.conn
    if conn.in_transaction:
        raise RuntimeError("incremental_vacuum runs in its own transactions")
    released = 0
    if max_pages <= 0 or auto_vacuum(db) != INCREMENTAL:
        return 0
    while released < max_pages:
        free = free_pages(db)
        count = min(step_pages, max_pages - released, free)
        if count <= 0:
            break
        try:
            # executescript steps the pragma to completion; execute() would run one step of
            # it (one page) in Python's sqlite3.
            conn.executescript(f"PRAGMA incremental_vacuum({int(count)});")
        except sqlite3.OperationalError as exc:
            text = str(exc).lower()
            if "locked" in text or "busy" in text:
                break
            raise
        left = free_pages(db)
        if left >= free:
            break
        released += free - left
    return released


def file_sizes(path: Path) -> dict[str, int | None]:
    """Bytes of the database file and of its write-ahead log (None: absent)."""
    sizes: dict[str, int | None] = {}
    for suffix, name in (("", "db"), ("-wal", "wal")):
        candidate = Path(f"{path}{suffix}")
        sizes[name] = candidate.stat().st_size if candidate.exists() else None
    return sizes


def table_stats(db: Database) -> dict[str, dict[str, Any]]:
    """Each table of the file: its rows, and the bytes of its pages and its indexes' pages.

    Bytes come from SQLite's ``dbstat`` table (None where this SQLite lacks it). Counting
    rows reads each table's smallest index: quick, but proportional to the table.
    """
    names = [
        row[0]
        for row in db.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " AND name NOT LIKE '\\_%' ESCAPE '\\' ORDER BY name"
        )
    ]
    sizes: dict[str, int] | None = {}
    try:
        for table, size in db.conn.execute(
            "SELECT m.tbl_name, sum(s.pgsize) FROM dbstat AS s"
            " JOIN sqlite_master AS m ON m.name = s.name"
            " WHERE s.aggregate = 1 GROUP BY m.tbl_name"
        ):
            sizes[table] = int(size or 0)
    except sqlite3.OperationalError:  # SQLite built without the dbstat table
        sizes = None
    stats: dict[str, dict[str, Any]] = {}
    for name in names:
        (rows,) = db.conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()
        stats[name] = {"rows": int(rows), "bytes": None if sizes is None else sizes.get(name, 0)}
    return stats


def space_of(db: Database) -> dict[str, int]:
    """The file's pages: total, free (reusable), the page size and its auto-vacuum mode."""
    conn = db.conn
    return {
        "page_size": int(conn.execute("PRAGMA page_size").fetchone()[0]),
        "page_count": int(conn.execute("PRAGMA page_count").fetchone()[0]),
        "freelist_count": free_pages(db),
        "auto_vacuum": auto_vacuum(db),
    }
