"""The write transaction the layers above open when several changes must commit together.

A summary note with its messages' marks, an undo with the messages it returns, a merge batch
re-checked and applied, a purge's uses and vectors: each is one
``with write_transaction(storage):`` block. On SQLite it is the storage's thread lock and a
``BEGIN IMMEDIATE`` transaction on the hot file
(:func:`memkeeper.storage.sqlite.immediate_transaction`: queued writers, bounded waits,
nested blocks become savepoints); the layers above name neither, so another backend can
offer the same block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator

from memkeeper.storage.files import Storage
from memkeeper.storage.handle import Handle
from memkeeper.storage.sqlite import immediate_transaction


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
