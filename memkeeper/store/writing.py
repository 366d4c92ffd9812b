"""Writing memories: remembering a keyed value and adding a note.

The input is checked here, against the store's ``[limits]``; what the write changes is
planned by :mod:`memkeeper.store.entries` and applied, logged, through
:mod:`memkeeper.storage.transitions` — in one write transaction for a keyed value, so that
the value found current is still current when it is replaced.
"""

from __future__ import annotations

from memkeeper import validation
from memkeeper.errors import InvalidInput
from memkeeper.records import KEYED_KINDS, Memory
from memkeeper.storage import erased_values
from memkeeper.storage.transaction import write_transaction
from memkeeper.storage.transitions import Transition
from memkeeper.store.core import StoreCore
from memkeeper.store.entries import new_entry_image, remember_plan


def remember(
    core: StoreCore,
    user_id: str,
    key: str,
    value: str,
    *,
    namespace: str,
    kind: str,
    confidence: float,
    source: str,
    pinned: bool | None,
    ttl_days: int | None,
) -> Memory:
    """Remember ``key = value`` for a user; returns the entry that is now current."""
    user_id, namespace = core.owner(user_id, namespace)
    key = core.key(key)
    value = core.value("value", value)
    if kind not in KEYED_KINDS:
        if kind == "note":
            raise InvalidInput("notes have no key: use add_note() for kind 'note'")
        validation.kind(kind)
    confidence = validation.confidence(confidence)
    source = core.source(source)
    ttl_days = validation.ttl_days(ttl_days)
    storage = core.storage
    with write_transaction(storage, users=[user_id]):
        now = core.now()
        transitions, result_id = remember_plan(
            storage,
            user_id,
            namespace,
            kind,
            key,
            value,
            confidence=confidence,
            source=source,
            pinned=pinned,
            ttl_days=ttl_days,
            now=now,
            check_erased=True,
        )
        outcomes = core.apply(transitions, "remember")
        # The entry as written is the transition's target: read back only when another
        # writer's change kept it from being written (the entry then current is returned).
        written = next(o for o in outcomes if o.transition.memory_id == result_id)
        result = written.after if written.applied else None
        if result is None:
            result = storage.hot_images([result_id])[result_id]
    return Memory.from_image(result)


def add_note(
    core: StoreCore,
    user_id: str,
    text: str,
    *,
    namespace: str,
    source: str,
    confidence: float,
    pinned: bool,
    ttl_days: int | None,
) -> Memory:
    """Add a note (an entry without a key); returns it."""
    user_id, namespace = core.owner(user_id, namespace)
    text = core.value("note", text)
    image = new_entry_image(
        user_id=user_id,
        namespace=namespace,
        kind="note",
        key=None,
        value=text,
        source=core.source(source),
        confidence=validation.confidence(confidence),
        pinned=pinned,
        ttl_days=validation.ttl_days(ttl_days),
        now=core.now(),
    )
    with write_transaction(core.storage, users=[user_id]):
        erased_values.refuse_carried(core.storage.hot.conn, user_id, namespace, {"note": text})
        core.apply([Transition(image["id"], None, image, "create", "new note")], "add_note")
    return Memory.from_image(image)
