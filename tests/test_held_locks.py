"""Meeting a lock that is really held (issue 18, item 19).

No test held SQLite's write lock: ``LockBusy`` after the busy timeouts, forget's ``LockBusy``
when a reader pins the WAL, a ``VACUUM`` or ``incremental_vacuum`` meeting a held lock, and
most branches of the error translation never ran. Here another connection, or another
process, holds ``BEGIN IMMEDIATE`` or an old read snapshot for real, and each error comes
from SQLite itself. Nothing is timed: each test asserts what happened, in what order.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import raw_rows
from helpers.locks import integrity
from sqlite_utils import Database

from memkeeper import MemoryStore
from memkeeper.config import Config, DatabaseSection
from memkeeper.errors import DatabaseError, LockBusy, StorageFull, StorageUnwritable, WriteConflict
from memkeeper.storage.sqlite.errors import translate_error
from memkeeper.storage.sqlite.scrub import rebuild
from memkeeper.storage.sqlite.space import free_pages, release_free_pages
from memkeeper.storage.sqlite.writing import BEGIN_ATTEMPTS
from memkeeper.storage.transaction import immediate_transaction

BUSY_MS = 150

HOLDER = textwrap.dedent(
    """
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    print("holding", flush=True)
    sys.stdin.readline()
    conn.execute("COMMIT")
    """
)


@pytest.fixture
def quick(db_path: Path) -> Iterator[MemoryStore]:
    store = MemoryStore(db_path, config=Config(database=DatabaseSection(busy_timeout_ms=BUSY_MS)))
    store.remember("u", "k", "v")
    yield store
    store.close()


@pytest.fixture
def writer(db_path: Path, quick: MemoryStore) -> Iterator[sqlite3.Connection]:
    """Another connection holding the write lock until the test lets go."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    yield conn
    if conn.in_transaction:
        conn.execute("ROLLBACK")
    conn.close()


def test_a_writer_gets_lock_busy_after_its_busy_timeouts_while_a_process_holds_the_lock(
    db_path: Path, quick: MemoryStore
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with pytest.raises(LockBusy, match=f"beyond {BEGIN_ATTEMPTS} busy timeouts"):
            quick.remember("u", "blocked", "never written")
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
    assert "blocked" not in {row["key"] for row in raw_rows(db_path, "memories")}
    quick.remember("u", "blocked", "written once the lock is free")
    assert quick.recall("u", "blocked").value == "written once the lock is free"


def test_forget_says_lock_busy_when_a_reader_pins_the_wal_and_a_retry_finishes(
    db_path: Path, quick: MemoryStore
) -> None:
    quick.remember("u", "secret", "PINNED-SECRET")
    reader = sqlite3.connect(db_path, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM memories").fetchone()[0] == 2  # old snapshot
    try:
        with pytest.raises(LockBusy, match="kept an old snapshot"):
            quick.forget("u", "secret")
        assert quick.recall("u", "secret") is None  # the erasure itself is committed
        assert raw_rows(db_path, "pending_scrubs")  # the scrub is still owed
    finally:
        reader.execute("COMMIT")
        reader.close()
    quick.forget("u", "secret")  # repeating it is safe, and finishes the scrub
    assert raw_rows(db_path, "pending_scrubs") == []
    assert integrity(db_path) == ["ok"]


def test_vacuum_meeting_a_held_write_lock_is_lock_busy(
    db_path: Path, quick: MemoryStore, writer: sqlite3.Connection
) -> None:
    with pytest.raises(LockBusy, match=r"the erasure is committed, but .* stayed locked"):
        rebuild(quick.storage.hot, db_path, timeout_s=BUSY_MS / 1000)
    writer.execute("COMMIT")
    rebuild(quick.storage.hot, db_path, timeout_s=1)  # free again: the rebuild goes through
    assert quick.recall("u", "k").value == "v"


def test_incremental_vacuum_meeting_a_held_lock_stops_and_releases_nothing(
    db_path: Path, quick: MemoryStore
) -> None:
    for index in range(300):
        quick.remember("bulk", f"k{index}", "x" * 2000)
    hot = quick.storage.hot
    with immediate_transaction(hot):  # freed pages go on the freelist (no VACUUM here)
        hot.conn.execute("DELETE FROM memories WHERE user_id = 'bulk'")
    free = free_pages(hot)
    assert free > 0
    writer = sqlite3.connect(db_path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        assert release_free_pages(hot, free) == 0
        assert free_pages(hot) == free
    finally:
        writer.execute("COMMIT")
        writer.close()
    assert release_free_pages(hot, free) > 0
    assert free_pages(hot) < free


def _raised(db: Database, sql: str, params: tuple = ()) -> Exception:
    """What ``immediate_transaction`` raises when ``sql`` fails inside it."""
    with pytest.raises(Exception) as caught, immediate_transaction(db):
        db.conn.execute(sql, params)
    return caught.value


def test_the_translation_of_real_sqlite_failures(db_path: Path, quick: MemoryStore) -> None:
    hot = quick.storage.hot
    row_id = raw_rows(db_path, "memories")[0]["id"]
    # Integrity: two writers raced past the checks.
    error = _raised(hot, "INSERT INTO pending_scrubs (id, at) SELECT id, at FROM pending_scrubs"
                    " UNION ALL SELECT 1, 'x' UNION ALL SELECT 1, 'x'")  # fmt: skip
    assert isinstance(error, WriteConflict) and "nothing was changed" in str(error)
    # Generic: any other failure of a write is memkeeper's DatabaseError, naming the file.
    error = _raised(hot, "UPDATE no_such_table SET x = 1")
    assert type(error) is DatabaseError and str(db_path) in str(error)
    # Full: the file may not grow.
    pages = hot.conn.execute("PRAGMA page_count").fetchone()[0]
    hot.conn.execute(f"PRAGMA max_page_count = {pages}")
    try:
        error = _raised(hot, "UPDATE memories SET value = ? WHERE id = ?", ("y" * 500_000, row_id))
    finally:
        hot.conn.execute("PRAGMA max_page_count = 1073741823")
    assert isinstance(error, StorageFull)
    # Read-only: a connection that may not write.
    read_only = Database(sqlite3.connect(f"{db_path.as_uri()}?mode=ro", uri=True))
    try:
        error = _raised(read_only, "DELETE FROM memories")
        assert isinstance(error, StorageUnwritable) and "read-only" in str(error)
    finally:
        read_only.conn.close()
    assert quick.recall("u", "k").value == "v"  # none of them changed anything


def test_a_locked_write_translates_to_lock_busy(
    db_path: Path, quick: MemoryStore, writer: sqlite3.Connection
) -> None:
    other = sqlite3.connect(db_path, timeout=0, isolation_level=None)
    try:
        with pytest.raises(sqlite3.OperationalError) as caught:
            other.execute("DELETE FROM memories")
        error = translate_error(caught.value, Database(other))
    finally:
        other.close()
    assert isinstance(error, LockBusy) and "stayed locked" in str(error)
