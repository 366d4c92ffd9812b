"""SQLite's storage: the two files behind a MemoryStore, the hot database and cold storage.

This module only opens files and reads rows; changing memory rows is the job of
:mod:`memkeeper.storage.transitions` (and erasing them, of :mod:`memkeeper.storage.forgetting`).

Lock discipline: every operation that writes the cold file holds the hot file's write lock
(``BEGIN IMMEDIATE`` on the hot file) for its whole duration. Cross-file moves are therefore
never interleaved, and no process waits for the cold lock while holding something another
process needs — there is no deadlock.
"""

from __future__ import annotations

import threading
from pathlib import Path

from memkeeper.errors import ColdStorageChanged, DatabaseMissing
from memkeeper.storage.base import DEFAULT_AUTOCHECKPOINT, Storage
from memkeeper.storage.sqlite import rawfile
from memkeeper.storage.sqlite.connection import Database
from memkeeper.storage.sqlite.opening import Tuning, checkpoint, open_database
from memkeeper.storage.sqlite.schema import COLD, HOT


class SqliteStorage(Storage):
    """The hot database file (always open) and the cold file (opened when first needed)."""

    def __init__(
        self,
        hot_path: Path,
        cold_path: Path,
        *,
        busy_timeout_ms: int,
        create: bool = True,
        tuning: Tuning | None = None,
    ) -> None:
        """Open the hot file; with ``create`` false a missing file is an error, not created."""
        self.hot_path = Path(hot_path)
        self.cold_path = Path(cold_path)
        self.busy_timeout_ms = busy_timeout_ms
        self.tuning = tuning or Tuning(busy_timeout_ms=busy_timeout_ms)
        # One connection per file, shared by this object's threads; the lock serializes them.
        self.lock = threading.RLock()
        hot = open_database(
            self.hot_path, HOT, busy_timeout_ms=busy_timeout_ms, create=create, tuning=self.tuning
        )
        if hot is None:
            raise DatabaseMissing(
                f"memory database {self.hot_path} does not exist (nothing was created); "
                "check --db, MEMKEEPER_DB or database.path"
            )
        self.hot: Database = hot
        # Raw descriptors for the residue scan, opened now and closed only after the SQLite
        # connections (see memkeeper.storage.sqlite.rawfile: closing one earlier drops our locks).
        self.hot_raw = rawfile.attach(self.hot_path)
        self.cold_raw: rawfile.RawFile | None = None
        self._cold: Database | None = None
        self._cold_identity: tuple[int, int] | None = None
        self.autocheckpoint_pages = DEFAULT_AUTOCHECKPOINT

    def autocheckpoint(self, pages: int) -> None:
        """Set how many WAL pages make this process's own commits checkpoint (PASSIVE).

        The job runner sets a small number while it runs, so that it, not an agent's
        commit, does the checkpoint work its writes cause; agents keep SQLite's default.
        """
        self.autocheckpoint_pages = pages
        for db in (self.hot, self._cold):
            if db is not None:
                db.conn.execute(f"PRAGMA wal_autocheckpoint = {int(pages)}")

    def cold(self, *, create: bool) -> Database | None:
        """The cold database; None when it does not exist yet and ``create`` is false."""
        if self._cold is None:
            self._cold = open_database(
                self.cold_path,
                COLD,
                busy_timeout_ms=self.busy_timeout_ms,
                create=create,
                tuning=self.tuning,
            )
            if self._cold is not None:
                self.cold_raw = rawfile.attach(self.cold_path)
                self._cold_identity = rawfile.identity_of(self.cold_path)
            if self._cold is not None and self.autocheckpoint_pages != DEFAULT_AUTOCHECKPOINT:
                self._cold.conn.execute(f"PRAGMA wal_autocheckpoint = {self.autocheckpoint_pages}")
        return self._cold

    def check_cold_file(self, cold: Database) -> None:
        """Raise :class:`ColdStorageChanged` unless ``cold_path`` still names the open file.

        A cold file deleted (or replaced: another file renamed over it) while this process
        runs keeps receiving this connection's writes, in an inode no one else can open:
        entries moved there would vanish. Checked before every write that moves entries
        into cold storage: the same device and inode as when it was opened, and through
        the connection, memkeeper's cold application id and table.
        """
        opened = self.cold_raw.identity if self.cold_raw is not None else self._cold_identity
        now = rawfile.identity_of(self.cold_path)
        problem = None
        if now is None:
            problem = "was deleted"
        elif opened is None or now != opened:
            problem = "was replaced by another file"
        else:
            app_id = cold.conn.execute("PRAGMA application_id").fetchone()[0]
            table = cold.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cold_memories'"
            ).fetchone()
            if app_id != COLD.application_id or table is None:
                problem = "is no longer a memkeeper cold-storage file"
        if problem is not None:
            raise ColdStorageChanged(
                f"cold storage {self.cold_path} {problem} while this process had it open; "
                "nothing was moved into it and the entries stay hot. Restore the file (or "
                "let memkeeper create a new one) and restart the service or agent"
            )

    def checkpoint(self) -> None:
        """Fold both WAL files into their databases, without waiting for or blocking anyone."""
        checkpoint(self.hot)
        cold = self.cold(create=False)
        if cold is not None:
            checkpoint(cold)

    def write_without_sync(self) -> None:
        """``PRAGMA synchronous = OFF`` on both files (the cold one created for it)."""
        for db in (self.hot, self.cold(create=True)):
            if db is not None:
                db.conn.execute("PRAGMA synchronous = OFF")

    def close(self) -> None:
        """Close both connections, then the raw descriptors (never the other way round)."""
        with self.lock:
            self.hot.conn.close()
            if self._cold is not None:
                self._cold.conn.close()
                self._cold = None
            for raw in (self.hot_raw, self.cold_raw):
                rawfile.detach(raw)
            self.hot_raw = self.cold_raw = None
