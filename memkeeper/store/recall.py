"""Recall: the current value of a key, marked as used.

Recalling an active entry records a use, not a change: the entry's ``last_accessed_at`` and
``access_count`` are updated in place and the use is counted in the ``uses`` table
(:mod:`memkeeper.storage.uses`) — one short write (``BEGIN IMMEDIATE``, one ``UPDATE``, one
upsert, commit), no change-log row: a recall that returned has recorded its use, so a crash
loses none; on PostgreSQL the read, the use's writes and the commit are one round trip
(:func:`memkeeper.storage.uses.mark_in_one_trip`). A store that buffers its uses (the MCP
server's, :mod:`memkeeper.storage.use_buffer`) reads an active entry without the write lock and adds
the use to the buffer instead, written a few milliseconds later with others in one
transaction (a crash loses those few milliseconds of uses). State changes are logged
transitions as before: a pending-review entry is renewed to active (``renew``) and an entry
found only in cold storage is brought back (``restore``). On a database that cannot be
written the value is still returned, read without marking, and a warning says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from memkeeper import logs, validation
from memkeeper.errors import StorageUnwritable
from memkeeper.records import KEYED_KINDS, Memory
from memkeeper.storage import memory_reads
from memkeeper.storage.changelog import image_of
from memkeeper.storage.transaction import write_transaction
from memkeeper.storage.transitions import Image, Transition, hot_image, used_image
from memkeeper.storage.use_buffer_probe import buffering, may_write
from memkeeper.storage.uses import mark_in_one_trip, mark_used, record_uses
from memkeeper.store.core import StoreCore

log = logs.get_logger("memkeeper.store")


def recall(
    core: StoreCore, user_id: str, key: str, *, namespace: str, kind: str | None
) -> Memory | None:
    """The current value of ``key`` (None when absent), marked as used."""
    user_id, namespace = core.owner(user_id, namespace)
    key = core.key(key)
    kinds = KEYED_KINDS if kind is None else (validation.kind(kind),)
    try:
        return _recall_and_mark(core, user_id, namespace, key, kinds)
    except StorageUnwritable as exc:
        # A read-only (or full) database still answers; only the use goes unrecorded.
        memory = _peek(core, user_id, namespace, key, kinds)
        if memory is not None:
            log.warning(
                "recalled, but its use could not be recorded",
                memory_id=memory.id,
                cause=str(exc),
            )
        return memory


def _peek(
    core: StoreCore, user_id: str, namespace: str, key: str, kinds: Sequence[str]
) -> Memory | None:
    """The value ``recall`` would return, read without marking anything."""
    storage = core.storage
    with storage.lock:
        row = memory_reads.live_by_key(storage.hot, user_id, namespace, key, kinds)
        cold = storage.cold(create=False)
        if row is None and cold is not None:
            row = memory_reads.cold_by_key(cold, user_id, namespace, key, kinds)
    return Memory.from_image(image_of(row)) if row else None


def _recall_and_mark(
    core: StoreCore, user_id: str, namespace: str, key: str, kinds: Sequence[str]
) -> Memory | None:
    storage = core.storage
    if buffering(storage) is not None:
        with storage.lock:
            found = memory_reads.live_by_key(storage.hot, user_id, namespace, key, kinds)
            if found is None and _peek(core, user_id, namespace, key, kinds) is None:
                # In neither file (the hot one read again, then the cold one): nothing to
                # mark or restore, so no write transaction, which on the MCP server's event
                # loop would wait for the write lock.
                return None
        if found is not None and found["state"] == "active":
            return _buffer_use(core, image_of(found), "recall")
        may_write()  # pending review (a renewal to log) or in cold storage: the write path
    else:
        # The read, the use's writes and the commit in one round trip (PostgreSQL): an
        # active entry is marked as the write path would; a pending-review one takes it.
        selection, params = memory_reads.live_by_key_selection(user_id, namespace, key, kinds)
        with storage.lock:
            marked = mark_in_one_trip(storage.hot, [user_id], selection, params, core.now())
            if marked == []:  # not in the hot file: in cold storage, or nowhere
                return _recall_from_cold(core, user_id, namespace, key, kinds)
        if marked and marked[0][2] is not None:
            return Memory.from_image(marked[0][2])
    with storage.lock:
        with write_transaction(storage, users=[user_id]):
            now = core.now()
            found = memory_reads.live_by_key(storage.hot, user_id, namespace, key, kinds)
            if found is not None:
                return mark_found(core, image_of(found), now)
        return _recall_from_cold(core, user_id, namespace, key, kinds)


def _buffer_use(core: StoreCore, image: Image, by: str) -> Memory:
    """Buffer a use of the active entry ``image`` (read without the write lock); the entry
    as the use leaves it, counting the uses still buffered."""
    buffer = buffering(core.storage)
    assert buffer is not None
    now = core.now()
    earlier = buffer.pending(image["id"])
    buffer.add(image["id"], now, core.actor, by)
    counted = {**image, "access_count": int(image["access_count"]) + earlier}
    return Memory.from_image(used_image(counted, now))


def mark_hits(
    core: StoreCore, memories: Sequence[Memory], *, by: str = "search"
) -> dict[str, Memory]:
    """Mark the live hot entries among ``memories`` (as just read) used, as
    :func:`mark_found` does; an entry no longer live (changed or erased meanwhile) is left
    out. When the store buffers its uses, an active entry's use is buffered as read (the
    flush re-checks the entry), with no second read."""
    marked: dict[str, Memory] = {}
    ids = [memory.id for memory in memories]
    buffer = buffering(core.storage)
    if buffer is not None:
        for memory in memories:
            if memory.state == "active":
                marked[memory.id] = _buffer_memory(core, memory, by)
        ids = [memory.id for memory in memories if memory.state != "active"]
        if ids:
            may_write()
    if not ids:
        return marked
    marked.update(mark_live(core, ids, {memory.user_id for memory in memories}, by=by))
    return marked


def mark_live(
    core: StoreCore, ids: Sequence[str], users: set[str], *, by: str = "search"
) -> dict[str, Memory]:
    """Mark the live hot entries among ``ids`` (of ``users``) used in one write transaction,
    as :func:`mark_found` does, without buffering; each one's Memory as marked, from the
    row read under the write lock (search builds its hits from them: no read before)."""
    if not ids:
        return {}
    storage = core.storage
    # The read, the active ones' uses and the commit in one round trip (PostgreSQL); the
    # pending ones found are renewed in a write transaction of their own.
    owners = sorted(users)
    selection, params = memory_reads.live_by_ids_selection(ids, owners)
    with storage.lock:
        found = mark_in_one_trip(storage.hot, owners, selection, params, core.now())
    if found is None:
        return _mark_live_in_transaction(core, ids, users, by=by)
    marked = {memory_id: Memory.from_image(image) for memory_id, _, image in found if image}
    renew = [memory_id for memory_id, _, image in found if image is None]
    if renew:
        marked.update(_mark_live_in_transaction(core, renew, users, by=by))
    return marked


def _mark_live_in_transaction(
    core: StoreCore, ids: Sequence[str], users: set[str], *, by: str
) -> dict[str, Memory]:
    """:func:`mark_live` in one write transaction: the rows read under the write lock."""
    marked: dict[str, Memory] = {}
    storage = core.storage
    with write_transaction(storage, users=users):
        now = core.now()
        images = [image_of(row) for row in memory_reads.live_by_ids(storage.hot, ids)]
        # The active ones' uses in one batch (what mark_used does to each, in two statements
        # for all: one round trip each on PostgreSQL); pending ones are renewed one by one.
        active = [image for image in images if image["state"] == "active"]
        record_uses(storage.hot, [(image, [now]) for image in active])
        for image in images:
            if image["state"] == "active":
                marked[image["id"]] = Memory.from_image(used_image(image, now))
            else:
                marked[image["id"]] = mark_found(core, image, now, by=by)
    return marked


def _buffer_memory(core: StoreCore, memory: Memory, by: str) -> Memory:
    """:func:`_buffer_use` for an entry already read as a Memory (no image to rebuild)."""
    buffer = buffering(core.storage)
    assert buffer is not None
    now = core.now()
    earlier = buffer.pending(memory.id)
    buffer.add(memory.id, now, core.actor, by)
    accessed = memory.last_accessed_at
    return replace(
        memory,
        access_count=memory.access_count + earlier + 1,
        last_accessed_at=accessed if accessed is not None and accessed > now else now,
    )


_REASONS = {
    "recall": ("recalled while pending review", "recalled from cold storage"),
    "search": ("found by search while pending review", "found by search in cold storage"),
}


def mark_found(core: StoreCore, image: Image, now: datetime, *, by: str = "recall") -> Memory:
    """Mark a hot entry that ``recall`` or ``search`` (``by``) returns as used.

    An active entry records a use in place; a pending-review entry is renewed to active (a
    logged ``renew``). Call it holding the storage lock, inside a write transaction on the
    hot file, with ``image`` read in that transaction.
    """
    if image["state"] != "pending_review":
        return Memory.from_image(mark_used(core.storage.hot, image, now))
    transition = Transition(
        image["id"],
        image,
        hot_image(used_image(image, now), "active", now),
        "renew",
        _REASONS[by][0],
    )
    core.apply([transition], by)
    return Memory.from_image(transition.target)  # type: ignore[arg-type]


def restore_found(core: StoreCore, image: Image, *, by: str = "recall") -> Memory | None:
    """Bring a cold entry that ``recall`` or ``search`` returns back to active (a logged
    ``restore``, marked used); None when someone else moved or changed it meanwhile."""
    may_write()
    now = core.now()
    target = used_image(hot_image(image, "active", now), now)
    outcome = core.apply([Transition(image["id"], image, target, "restore", _REASONS[by][1])], by)[
        0
    ]
    return Memory.from_image(target) if outcome.applied else None


def _recall_from_cold(
    core: StoreCore, user_id: str, namespace: str, key: str, kinds: Sequence[str]
) -> Memory | None:
    cold = core.storage.cold(create=False)
    if cold is None:
        return None
    found = memory_reads.cold_by_key(cold, user_id, namespace, key, kinds)
    if found is None:
        return None
    restored = restore_found(core, image_of(found))
    if restored is None:
        # Someone else moved it meanwhile, or made a newer value current (the newer write
        # wins): look again.
        return _recall_and_mark(core, user_id, namespace, key, kinds)
    return restored
