"""Looking memories up without using them: one by id, or every one matching some filters.

Unlike :mod:`memkeeper.store.recall`, these reads change nothing (an operator listing a
user's memory does not keep it alive). They see both files: an id is looked up hot first,
then cold (:meth:`~memkeeper.storage.base.Storage.current_images`).
"""

from __future__ import annotations

from memkeeper import validation
from memkeeper.records import Memory
from memkeeper.storage import memory_reads
from memkeeper.storage.changelog import image_of
from memkeeper.store.core import StoreCore


def get(core: StoreCore, memory_id: str) -> Memory | None:
    """One memory by id, wherever it lives (hot or cold), with its state; None if absent."""
    core.lookup(("memory_id", memory_id))
    with core.storage.lock:
        image = core.storage.current_images([memory_id]).get(memory_id)
    return Memory.from_image(image) if image else None


def list_memories(
    core: StoreCore,
    user_id: str | None,
    *,
    namespace: str | None,
    state: str | None,
    kind: str | None,
) -> list[Memory]:
    """Memories matching the filters (None = any), hot first then cold, oldest first."""
    if state is not None:
        validation.choice("state", state, ("active", "pending_review", "superseded", "cold"))
    if kind is not None:
        validation.kind(kind)
    core.lookup(("user_id", user_id), ("namespace", namespace))
    owner = [
        (column, value)
        for column, value in (("user_id", user_id), ("namespace", namespace), ("kind", kind))
        if value is not None
    ]
    results: list[Memory] = []
    storage = core.storage
    with storage.lock:
        if state != "cold":
            hot = memory_reads.listed(
                storage.hot, "memories", [*owner, *(("state", state),) * bool(state)]
            )
            results.extend(Memory.from_image(image_of(row)) for row in hot)
        cold = storage.cold(create=False)
        if cold is not None and state in (None, "cold"):
            seen = {memory.id for memory in results}
            results.extend(
                Memory.from_image(image_of(row))
                for row in memory_reads.listed(cold, "cold_memories", owner)
                if row["id"] not in seen
            )
    return results
