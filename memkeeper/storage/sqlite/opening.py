"""Opening memkeeper's SQLite files safely: WAL, a real busy timeout, migrations, checkpoints.

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
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memkeeper.errors import (
    DatabaseError,
    LockBusy,
    StorageUnwritable,
)
from memkeeper.storage.sqlite.connection import Database, utils_database
from memkeeper.storage.sqlite.errors import is_locked_error
from memkeeper.storage.sqlite.permissions import ExplainedConnection, read_only_error
from memkeeper.storage.sqlite.steps import applied_names
from memkeeper.storage.sqlite.writing import sqlite_write_transaction


@dataclass(frozen=True)
class FileKind:
    """What a memkeeper SQLite file is: its role, magic application id and migrations.

    ``steps`` names every migration step this version knows, in order (a file with a step
    applied that is not among them was written by a newer memkeeper); ``others`` maps the
    application ids of memkeeper's other files to their roles, so a swapped file is named.
    """

    role: str
    application_id: int
    migrations: Any
    """The steps (:class:`~memkeeper.storage.sqlite.steps.Steps`, or sqlite-utils'
    ``Migrations``)."""
    steps: tuple[str, ...] = ()
    others: tuple[tuple[int, str], ...] = ()


# Held while a new file is created and its descriptor closed: a close() after another thread
# opened the file through SQLite would cancel its POSIX locks (see storage/rawfile.py).
_CREATING = threading.Lock()


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
            factory=ExplainedConnection,
        )
    except sqlite3.Error as exc:
        raise StorageUnwritable(f"cannot open database file {path}: {exc}") from None
    conn.memkeeper_path = path
    conn.memkeeper_busy_ms = busy_timeout_ms
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
        # A WAL file in a directory this user cannot write cannot even be read: SQLite
        # must create the -wal and -shm files first. A permission problem, not a bad file.
        unwritable = read_only_error(exc, path, "the database cannot be opened")
        if unwritable is not None:
            raise unwritable from None
        if isinstance(exc, sqlite3.OperationalError) and is_locked_error(exc):
            # Held exclusively (a restore-backup swapping the files): busy, not broken.
            raise LockBusy(
                f"{path} is locked exclusively by another process (a restore-backup?) beyond "
                "the busy timeout; try again"
            ) from None
        raise DatabaseError(
            f"{path} is not a usable SQLite database ({exc}); the file was left untouched"
        ) from None
    if app_id == kind.application_id:
        return False
    if app_id == 0 and not tables:
        return True
    other = dict(kind.others).get(app_id)
    if other is not None:
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
            if not is_locked_error(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(0.01)


_SYNCHRONOUS = {"NORMAL": "NORMAL", "FULL": "FULL"}


@dataclass(frozen=True)
class Tuning:
    """How each connection is tuned (``[database]`` in the config).

    ``synchronous`` NORMAL is SQLite's recommended setting for WAL: a commit is atomic and
    consistent, and a power loss (not a crash of the process) may lose the last commits
    since the most recent checkpoint — never corrupt the file. FULL also syncs the WAL on
    every commit, which costs each agent write an fsync. Erasure does not rely on either: a
    forget ends with a checkpoint, which syncs the database file, so a forget that returned
    is on disk. ``cache_mb`` is each connection's page cache; ``mmap_mb`` lets SQLite read
    the file through memory mapping (0: off).
    """

    busy_timeout_ms: int = 5000
    synchronous: str = "NORMAL"
    cache_mb: int = 24
    mmap_mb: int = 0


def _set_pragmas(conn: sqlite3.Connection, path: Path, tuning: Tuning) -> None:
    busy_timeout_ms = tuning.busy_timeout_ms
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        mode = _enable_wal(conn, busy_timeout_ms)
        conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[tuning.synchronous.upper()]}")
        conn.execute(f"PRAGMA cache_size = {-1024 * int(tuning.cache_mb)}")
        conn.execute(f"PRAGMA mmap_size = {1024 * 1024 * int(tuning.mmap_mb)}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA secure_delete = ON")
    except sqlite3.OperationalError as exc:
        unwritable = read_only_error(exc, path, "it cannot be switched to WAL mode")
        if unwritable is not None:
            raise unwritable from None
        if is_locked_error(exc):
            raise LockBusy(f"database file {path} stayed locked: {exc}") from None
        raise DatabaseError(f"cannot configure database file {path}: {exc}") from None
    if str(mode).lower() != "wal":
        raise DatabaseError(f"database file {path} cannot use WAL mode (got {mode!r})")


def _check_not_newer(db: Any, path: Path, kind: FileKind) -> list[str]:
    """The steps applied to the file; DatabaseError if one is unknown to this version."""
    applied = applied_names(db.conn, kind.migrations.name)
    unknown = [name for name in applied if name not in kind.steps]
    if unknown:
        raise DatabaseError(
            f"{path} was written by a newer memkeeper (schema steps {', '.join(unknown)} are "
            "unknown to this version); upgrade memkeeper to use it"
        )
    return applied


def migrate(db: Database, path: Path, kind: FileKind) -> None:
    """Bring the file's schema up to date; a file already current is not written at all.

    Steps run in write transactions, each recorded with its work. A step registered with
    ``transactional=False`` (one that needs a ``VACUUM``) must be idempotent and atomic by
    itself: it runs first on its own, then again in the transaction that records it, where
    it finds its work done. A crash at any instant leaves the file either before the step or
    with its work done but unrecorded, which the next open finishes as a no-op.
    """
    if set(kind.steps) <= set(_check_not_newer(db, path, kind)):
        return  # up to date: one query, and sqlite-utils stays unimported
    db = utils_database(db)  # its Migrations apply the steps
    try:
        while pending := kind.migrations.pending(db):
            step = pending[0]
            if not step.transactional:
                step.fn(db)  # outside any transaction (see above)
            with sqlite_write_transaction(db):
                # Re-check under the write lock: another process may have migrated meanwhile.
                _check_not_newer(db, path, kind)
                pending = kind.migrations.pending(db)
                if pending and pending[0].name == step.name:
                    later = [m.name for m in pending[1:] if not m.transactional]
                    kind.migrations.apply(db, stop_before=later[:1] or None)
                    db.conn.execute(f"PRAGMA application_id = {kind.application_id}")
    except sqlite3.OperationalError as exc:
        unwritable = read_only_error(exc, path, "the schema upgrade it needs cannot be written")
        if unwritable is not None:
            raise unwritable from None
        if is_locked_error(exc):
            raise LockBusy(f"{path} stayed locked during its schema upgrade: {exc}") from None
        raise


def open_database(
    path: Path,
    kind: FileKind,
    *,
    busy_timeout_ms: int,
    create: bool = True,
    tuning: Tuning | None = None,
) -> Database | None:
    """Open (and if asked, create) one memkeeper file, migrated and ready.

    Returns None when the file does not exist and ``create`` is false, so read-only callers
    never create files they do not need.
    """
    path = Path(path)
    if path.is_dir():
        raise DatabaseError(f"{path} is a directory, not a database file")
    with _CREATING:
        if not path.exists():
            if not create:
                return None
            _create_file(path)
    if not os.access(path, os.R_OK):
        raise StorageUnwritable(f"database file {path} is not readable by this user")
    conn = _connect(path, busy_timeout_ms)
    try:
        if _probe(conn, path, kind):
            # Before the first page is written (switching to WAL writes it): afterwards the
            # mode of a file with tables only changes through a VACUUM. Best effort: on a
            # file that cannot be written the next pragma fails with the explained error,
            # and a file left without it is converted by its migration step.
            with contextlib.suppress(sqlite3.OperationalError):
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        _set_pragmas(conn, path, tuning or Tuning(busy_timeout_ms=busy_timeout_ms))
        db = Database(conn)
        migrate(db, path, kind)
    except BaseException:
        conn.close()
        raise
    return db


def checkpoint(db: Database, *, mode: str = "PASSIVE") -> None:
    """Fold the WAL back into the main file, best effort.

    PASSIVE (the default, used after job runs) copies what it can without waiting for, or
    blocking, anyone: agents never stall on it. TRUNCATE (used by erasure, through
    :mod:`memkeeper.storage.sqlite.scrub`) waits for readers and writers and empties the WAL.
    """
    if getattr(db, "dialect", "sqlite") != "sqlite":
        return
    with contextlib.suppress(sqlite3.OperationalError):
        db.conn.execute(f"PRAGMA wal_checkpoint({_CHECKPOINT_MODES[mode]})").fetchone()


_CHECKPOINT_MODES = {"PASSIVE": "PASSIVE", "TRUNCATE": "TRUNCATE"}
