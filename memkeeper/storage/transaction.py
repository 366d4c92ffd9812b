"""The write transaction the layers above open when several changes must commit together.

A summary note with its messages' marks, an undo with the messages it returns, a merge batch
re-checked and applied, a purge's uses and vectors: each is one
``with write_transaction(storage):`` block. On SQLite it is the storage's thread lock and a
``BEGIN IMMEDIATE`` transaction on the hot file
(:func:`memkeeper.storage.sqlite.writing.sqlite_write_transaction`: queued writers, bounded
waits, nested blocks become savepoints); on PostgreSQL a transaction holding memkeeper's
write locks of the users written (:mod:`memkeeper.storage.postgres.write_locks`). The layers
above name neither: :func:`immediate_transaction` picks the handle's own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING

from memkeeper.storage.handle import Handle
from memkeeper.storage.sqlite.writing import sqlite_write_transaction

if TYPE_CHECKING:
    from memkeeper.storage.base import Storage


@contextlib.contextmanager
def immediate_transaction(
    db: Handle, *, users: Collection[str] | None = None, try_users: bool = False
) -> Iterator[Handle]:
    """One short write transaction on ``db`` that takes its write lock up front.

    ``users`` and ``try_users`` scope the write on PostgreSQL (one writer per user, a job
    skipping users an agent is writing: :mod:`memkeeper.storage.postgres.write_locks`);
    SQLite has one writer at a time whatever is written. Nested calls become savepoints.
    """
    if getattr(db, "dialect", "sqlite") == "postgres":
        with db.write_transaction(users, try_users=try_users):  # type: ignore[attr-defined]
            yield db
        return
    with sqlite_write_transaction(db) as written:
        yield written


@contextlib.contextmanager
def write_transaction(storage: Storage, users: Collection[str] | None = None) -> Iterator[Handle]:
    """Hold the storage's lock and one write transaction on the hot database; yields it.

    Commits when the block ends, rolls back when it raises (memkeeper's own errors for
    SQLite's expected failures). Everything written in the block commits together.
    ``users``: the users whose memories the block writes, when it writes no one else's
    (on PostgreSQL, writers of other users then do not wait for it).
    """
    with storage.lock, immediate_transaction(storage.hot, users=users) as hot:
        yield hot
