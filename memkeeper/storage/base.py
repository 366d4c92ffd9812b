"""The storage interface: what a store, its jobs and its tools see of a backend.

Two implementations: :class:`memkeeper.storage.sqlite.files.SqliteStorage` (the embedded
default: a hot file and a cold file, moves between them under a crash protocol) and
:class:`memkeeper.storage.postgres.storage.PostgresStorage` (hot and cold storage are two
tables of one schema, so a move is one transaction). Storage functions take ``storage.hot``
(and ``storage.cold(...)``), a database handle with the same calls on both backends
(``execute``, ``query``, ``atomic``, ``conn``, ``dialect``), and hold ``storage.lock`` where
they share it between threads.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from memkeeper.storage.batches import chunks, placeholders
from memkeeper.storage.changelog import image_of
from memkeeper.storage.handle import Handle

DEFAULT_AUTOCHECKPOINT = 1000  # SQLite's own default, in WAL pages


class Storage:
    """A store's databases: the hot one (always open) and cold storage (opened when needed).

    Subclasses open the backend and implement the methods that raise here; the reads of
    current rows (:meth:`hot_images`, :meth:`cold_images`, :meth:`current_images`) are the
    same SQL on both.
    """

    one_database = False
    """True when cold storage is a table of the hot database (PostgreSQL): a move between
    them is one transaction, with no crash protocol across files."""

    created = False
    """Whether opening created this database (a first write on a new path or schema), for
    the commands that say so (``run-once``)."""

    hot: Handle
    lock: threading.RLock
    autocheckpoint_pages: int = DEFAULT_AUTOCHECKPOINT

    hot_path: Any
    """Where the hot database is, for messages: a path, or a URL with its password masked."""
    cold_path: Any
    """Where cold storage is, for messages."""

    def autocheckpoint(self, pages: int) -> None:
        """How many WAL pages make this process's own commits checkpoint (SQLite)."""
        raise NotImplementedError

    def cold(self, *, create: bool) -> Handle | None:
        """Cold storage; None when it does not exist yet and ``create`` is false."""
        raise NotImplementedError

    def check_cold_file(self, cold: Handle) -> None:
        """Raise :class:`~memkeeper.errors.ColdStorageChanged` when cold storage changed
        under this process (a file deleted or replaced); before every move into it."""
        raise NotImplementedError

    def hot_images(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Current hot rows of the given ids, as images."""
        found: dict[str, dict[str, Any]] = {}
        for part in chunks(list(ids)):
            sql = f"SELECT * FROM memories WHERE id IN ({placeholders(len(part))})"
            for row in self.hot.query(sql, list(part)):
                found[row["id"]] = image_of(row)
        return found

    def cold_images(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Current cold rows of the given ids, as images (empty when there is no cold file)."""
        cold = self.cold(create=False)
        found: dict[str, dict[str, Any]] = {}
        if cold is None:
            return found
        for part in chunks(list(ids)):
            sql = f"SELECT * FROM cold_memories WHERE id IN ({placeholders(len(part))})"
            for row in cold.query(sql, list(part)):
                found[row["id"]] = image_of(row)
        return found

    def current_images(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Where each id lives now. A copy left in cold by an interrupted move loses to hot."""
        found = self.hot_images(ids)
        missing = [memory_id for memory_id in ids if memory_id not in found]
        if missing:
            found.update(self.cold_images(missing))
        return found

    def current_images_and(
        self, ids: Sequence[str], reads: Sequence[tuple[str, Sequence[Any]]]
    ) -> tuple[dict[str, dict[str, Any]], list[list[dict[str, Any]]]]:
        """:meth:`current_images`, and the rows of further reads of the hot database (each
        ``(sql, parameters)``, in order): what the transition mechanism re-checks before a
        write. On PostgreSQL all of them go to the server in one round trip."""
        found = self.current_images(ids)
        return found, [list(self.hot.query(sql, list(params))) for sql, params in reads]

    def checkpoint(self) -> None:
        """Fold write-ahead logs into the databases, without waiting for or blocking anyone."""
        raise NotImplementedError

    def write_without_sync(self) -> None:
        """Commit from here on without waiting for the disk: for a throwaway memory (the
        demo's), where a power loss costs nothing and every wait on the disk is wasted."""
        raise NotImplementedError

    def close(self) -> None:
        """Close every connection; the storage is unusable afterwards."""
        raise NotImplementedError
