"""PostgreSQL's walk over a job's due rows: found set-based, then changed owner by owner.

On SQLite a job walks its due rows in the order of the index that finds them (last use,
state time), a page of rows at a time. On PostgreSQL that order scatters every batch over
the whole memory: each due entry sits on another heap page and under other keys of every
index, and a batch's change-log rows under other keys of theirs. A change is not a HOT
update (its state is indexed), so every one writes a new entry in each index; after each
checkpoint the first write to a page puts the whole page in the WAL. At 1,000,000 memories
expire wrote 2 GB of WAL for 51,000 changes, five full pages a change, and took 35-40 s.

So here the due rows are found by the job's own predicate in one statement per chunk (a
sequential or bitmap scan, with no order of use to follow) and handed out in the order of
their owner, ``(user_id, namespace, id)``. A batch then holds the entries of a few users:
they share the pages of every index that leads with the owner (``memories_current_key``,
``memories_by_owner``, ``memories_by_kind_state``, ``cold_by_owner``, ``changes_by_user``)
and, where a user's entries were written together, heap pages too (a use no longer moves a
row, schema step ``0005_uses_in_place``). The batch also locks those few users only
(:mod:`memkeeper.storage.postgres.write_locks`), not one per entry. Timed job by job on the
bench's 1,000,000 memories, the same expire took 21-25 s, and 18.7 s once the finding
statement ran serial (below; README, "Performance").

Each batch is read again, by id and with the predicate, just before the job judges it: an
entry an agent used or changed since the chunk was found is no longer due and is not in the
batch, and the transition mechanism's re-check (the entry still as seen) stays the last
word. Keyset pagination on the owner order keeps the walk correct in a dry run, where
nothing leaves the selection.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from memkeeper.storage.batches import chunks, placeholders
from memkeeper.storage.changelog import image_of

KEYS_PER_CHUNK = 50_000
"""Due rows found per statement: their ids (about 4 MB in Python), so a backlog of millions
is found in a few scans and never held whole."""

_OWNER_ORDER = "user_id, namespace, id"

_SERIAL = "SET LOCAL max_parallel_workers_per_gather = 0"
"""The finding statement's transaction runs with no parallel workers: a parallel scan took
every core from the agents for the statement's length, and was slower besides (0.32 s
against 0.12 s for one chunk of expire's at 1,000,000 memories on 2 cores, measured: the
workers' start, the gather and sorts split across their memory)."""


def owner_ordered_batches(
    db: Any,
    table: str,
    where: str,
    params: Sequence[Any],
    *,
    size: int,
    keys_per_chunk: int = KEYS_PER_CHUNK,
) -> Iterator[list[dict[str, Any]]]:
    """Rows of ``table`` matching ``where`` (a portable predicate), as images, in batches of
    at most ``size``, in owner order (see the module docstring)."""
    after: list[Any] = []
    while True:
        keyset = f" AND ({_OWNER_ORDER}) > (?, ?, ?)" if after else ""
        with db.atomic(_SERIAL):
            keys = list(
                db.query(
                    f"SELECT {_OWNER_ORDER} FROM {table} WHERE ({where}){keyset}"
                    f" ORDER BY {_OWNER_ORDER} LIMIT ?",
                    [*params, *after, keys_per_chunk],
                )
            )
        if not keys:
            return
        for part in chunks([key["id"] for key in keys], size):
            rows = db.query(
                f"SELECT * FROM {table} WHERE id IN ({placeholders(len(part))}) AND ({where})"
                f" ORDER BY {_OWNER_ORDER}",
                [*part, *params],
            )
            batch = [image_of(row) for row in rows]
            if batch:
                yield batch
        if len(keys) < keys_per_chunk:
            return
        last = keys[-1]
        after = [last["user_id"], last["namespace"], last["id"]]
