"""Opening memkeeper's SQLite files safely, and the one way to write to them.

Every connection is in WAL mode (readers never block the writer), waits up to a real busy
timeout for locks, and has ``secure_delete`` on so that a forgotten value is overwritten on
disk rather than left in a free page. Files are created on first use with mode 0600 inside a
0700 directory. A file that is not SQLite, is corrupt, belongs to another program, or was
written by a newer memkeeper is refused with a clear message and left untouched.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from memkeeper.errors import DatabaseError, LockBusy, StorageUnwritable


@dataclass(frozen=True)
class FileKind:
    """What a memkeeper SQLite file is: its role, magic application id and migrations."""

    role: str
    application_id: int
    migrations: Migrations


def _is_locked_error(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _create_file(path: Path) -> None:
    """Create an empty database file with owner-only permissions (and its directory)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
    except FileExistsError:
        return  # another process created it first: fine, we open the same file
    except OSError as exc:
        raise StorageUnwritable(
            f"cannot create database file {path}: {exc.strerror or exc}"
        ) from None


def _connect(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(
            str(path),
            timeout=busy_timeout_ms / 1000,
            isolation_level=None,  # transactions are explicit: see immediate_transaction
            check_same_thread=False,
        )
    except sqlite3.Error as exc:
        raise StorageUnwritable(f"cannot open database file {path}: {exc}") from None
    return conn


def _probe(conn: sqlite3.Connection, path: Path, kind: FileKind) -> bool:
    """Check the file is a readable SQLite database that is ours; True when it is empty."""
    try:
        # One statement, so both answers come from one snapshot: another process may be
        # creating the schema (and setting the id, in the same commit) right now.
        app_id, names = conn.execute(
            "SELECT (SELECT application_id FROM pragma_application_id()),"
            " (SELECT group_concat(name, char(31)) FROM sqlite_master"
            "  WHERE type = 'table' AND name NOT LIKE 'sqlite_%')"
        ).fetchone()
        tables = names.split("\x1f") if names else []
    except sqlite3.DatabaseError as exc:
        raise DatabaseError(
            f"{path} is not a usable SQLite database ({exc}); the file was left untouched"
        ) from None
    if app_id == kind.application_id:
        return False
    if app_id == 0 and not tables:
        return True
    if app_id in {k.application_id for k in KNOWN_KINDS}:
        other = next(k.role for k in KNOWN_KINDS if k.application_id == app_id)
        raise DatabaseError(
            f"{path} is a memkeeper {other} file, not a {kind.role} file; check --db"
        )
    raise DatabaseError(
        f"{path} is a SQLite database of another program (tables: {', '.join(tables[:5])}"
        f"{'...' if len(tables) > 5 else ''}); memkeeper will not write into it"
    )


def _enable_wal(conn: sqlite3.Connection, busy_timeout_ms: int) -> str:
    """Switch the file to WAL, retrying while another process does the same.

    Changing the journal mode needs the file to itself; when several processes open a new
    database at once SQLite answers "database is locked" at once, without waiting for the busy
    timeout, so the wait is done here.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
            if mode != "wal":
                mode = str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
            if mode == "wal" or time.monotonic() >= deadline:
                return mode
        except sqlite3.OperationalError as exc:
            if not _is_locked_error(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(0.01)


def _set_pragmas(conn: sqlite3.Connection, path: Path, busy_timeout_ms: int) -> None:
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        mode = _enable_wal(conn, busy_timeout_ms)
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA secure_delete = ON")
    except sqlite3.OperationalError as exc:
        if "readonly" in str(exc).lower():
            raise StorageUnwritable(f"database file {path} is read-only: {exc}") from None
        if _is_locked_error(exc):
            raise LockBusy(f"database file {path} stayed locked: {exc}") from None
        raise DatabaseError(f"cannot configure database file {path}: {exc}") from None
    if str(mode).lower() != "wal":
        raise DatabaseError(f"database file {path} cannot use WAL mode (got {mode!r})")


def _check_not_newer(db: Database, path: Path, kind: FileKind) -> None:
    known = {m.name for m in kind.migrations._migrations}
    unknown = [m.name for m in kind.migrations.applied(db) if m.name not in known]
    if unknown:
        raise DatabaseError(
            f"{path} was written by a newer memkeeper (schema steps {', '.join(unknown)} are "
            "unknown to this version); upgrade memkeeper to use it"
        )


def migrate(db: Database, path: Path, kind: FileKind) -> None:
    """Bring the file's schema up to date; a file already current is not written at all."""
    _check_not_newer(db, path, kind)
    if not kind.migrations.pending(db):
        return
    with immediate_transaction(db):
        # Re-check under the write lock: another process may have migrated meanwhile.
        _check_not_newer(db, path, kind)
        if kind.migrations.pending(db):
            kind.migrations.apply(db)
            db.conn.execute(f"PRAGMA application_id = {kind.application_id}")


def open_database(
    path: Path, kind: FileKind, *, busy_timeout_ms: int, create: bool = True
) -> Database | None:
    """Open (and if asked, create) one memkeeper file, migrated and ready.

    Returns None when the file does not exist and ``create`` is false, so read-only callers
    never create files they do not need.
    """
    path = Path(path)
    if path.is_dir():
        raise DatabaseError(f"{path} is a directory, not a database file")
    if not path.exists():
        if not create:
            return None
        _create_file(path)
    if not os.access(path, os.R_OK):
        raise StorageUnwritable(f"database file {path} is not readable by this user")
    conn = _connect(path, busy_timeout_ms)
    try:
        _probe(conn, path, kind)
        _set_pragmas(conn, path, busy_timeout_ms)
        db = Database(conn, execute_plugins=False)
        migrate(db, path, kind)
    except BaseException:
        conn.close()
        raise
    return db


@contextlib.contextmanager
def immediate_transaction(db: Database) -> Iterator[Database]:
    """One short write transaction that takes the write lock up front.

    sqlite-utils' ``db.atomic()`` opens a deferred ``BEGIN``; in WAL mode a deferred
    transaction that reads and then writes can fail at once with SQLITE_BUSY when another
    process committed in between, without waiting for the busy timeout. ``BEGIN IMMEDIATE``
    takes the write lock first and waits, so concurrent writers queue instead of failing.
    Nested calls (and sqlite-utils' own ``atomic()`` inside) become savepoints.
    """
    conn = db.conn
    if conn.in_transaction:
        with db.atomic():
            yield db
        return
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if _is_locked_error(exc):
            raise LockBusy(
                "the memory database stayed locked by another writer beyond the busy "
                f"timeout: {exc}"
            ) from None
        raise
    try:
        yield db
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def checkpoint(db: Database) -> None:
    """Fold the WAL back into the main file and truncate it (best effort with readers present)."""
    with contextlib.suppress(sqlite3.OperationalError):
        db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()


# Registered by memkeeper.schema; listed here so _probe can name a swapped file.
KNOWN_KINDS: list[FileKind] = []
