"""Memory entries: the engine functions that find the current entry and plan new ones.

They work on :class:`~memkeeper.storage.base.Storage`, not on a MemoryStore, so that the
store, imports (:mod:`memkeeper.store.transfer`), curation, undo and the summarize job share
one definition of "the current value of a key", of a new entry's image and of what
remembering a value changes. None of them writes: callers apply the transitions they return
with :func:`memkeeper.storage.transitions.apply`, inside their own write transaction (so
that what was read is still true when it is written).
"""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import datetime

from memkeeper.clock import to_db
from memkeeper.storage import erased_values, memory_reads
from memkeeper.storage.base import Storage
from memkeeper.storage.changelog import image_of
from memkeeper.storage.transitions import Image, Transition, hot_image, supersede, with_changes

DEFAULT_CONFIDENCE = 0.9
"""Confidence of a remembered value when the caller does not say (≈ stated by the user)."""


def new_memory_id() -> str:
    """A fresh random memory id (16 hex digits)."""
    return os.urandom(8).hex()  # what secrets.token_hex(8) does, without importing hmac


def current_entry(
    storage: Storage, user_id: str, namespace: str, kind: str, key: str
) -> Image | None:
    """The entry that is the current value of ``key`` (active or pending review), if any."""
    row = memory_reads.current_value(storage.hot, user_id, namespace, kind, key)
    return image_of(row) if row else None


def new_entry_image(
    *,
    user_id: str,
    namespace: str,
    kind: str,
    key: str | None,
    value: str,
    source: str,
    confidence: float,
    pinned: bool,
    ttl_days: int | None,
    now: datetime,
    created_at: datetime | None = None,
) -> Image:
    """The image of a new active entry with a fresh id, created ``created_at`` (default now).

    The arguments are taken as checked: validating them is the caller's job.
    """
    stamp = to_db(now)
    created = to_db(created_at) if created_at else stamp
    return {
        "id": new_memory_id(),
        "user_id": user_id,
        "namespace": namespace,
        "kind": kind,
        "key": key,
        "value": value,
        "source": source,
        "confidence": confidence,
        "state": "active",
        "pinned": int(pinned),
        "ttl_days": ttl_days,
        "created_at": created,
        "updated_at": created,
        "last_accessed_at": None,
        "access_count": 0,
        "state_since": stamp,
        "last_used_at": created,
    }


def remember_plan(
    storage: Storage,
    user_id: str,
    namespace: str,
    kind: str,
    key: str,
    value: str,
    *,
    confidence: float,
    source: str,
    pinned: bool | None,
    ttl_days: int | None,
    now: datetime,
    check_erased: bool = False,
) -> tuple[list[Transition], str]:
    """What remembering ``key = value`` changes, and the id of the entry then current.

    The same value as the current one re-confirms it; a superseded entry with this value is
    revived (re-asserted during its grey period); otherwise a new entry is created. A
    different current value is superseded by it. ``pinned``/``ttl_days`` None keep the
    entry's own. Call it inside the write transaction that applies the result.

    ``check_erased`` (an agent's ``remember``): a key or value carrying a value the user had
    erased is refused (:class:`~memkeeper.errors.ErasedValueRefused`), unless it is this
    key's new value, which lifts the block (:mod:`memkeeper.storage.erased_values`); only a
    user with erased values pays a read for it.
    """
    stamp = to_db(now)
    # The current value and a superseded one with this value, read together: the second is
    # needed unless the value is the current one, and costs no round trip of its own.
    current_row, earlier, blocked = memory_reads.current_and_superseded(
        storage.hot, user_id, namespace, kind, key, value
    )
    if blocked and check_erased:
        conn = storage.hot.conn
        if not erased_values.lift(conn, user_id, namespace, key, value):
            erased_values.refuse_carried(conn, user_id, namespace, {"key": key, "value": value})
    current = image_of(current_row) if current_row else None

    def reconfirmed(image: Image, why: str) -> Transition:
        stronger = confidence >= image["confidence"]
        target = with_changes(
            image,
            updated_at=stamp,
            confidence=max(confidence, image["confidence"]),
            source=source if stronger else image["source"],
            pinned=int(pinned) if pinned is not None else image["pinned"],
            ttl_days=ttl_days if ttl_days is not None else image["ttl_days"],
        )
        if target["state"] != "active":
            target = hot_image(target, "active", now)
        return Transition(image["id"], image, target, "reconfirm", why, source=source)

    if current is not None and current["value"] == value:
        return [reconfirmed(current, "the same value was asserted again")], current["id"]

    transitions: list[Transition] = []
    if earlier is not None:
        revived = reconfirmed(image_of(earlier), "re-asserted during its grey period")
        new_id = earlier["id"]
    else:
        image = new_entry_image(
            user_id=user_id,
            namespace=namespace,
            kind=kind,
            key=key,
            value=value,
            source=source,
            confidence=confidence,
            pinned=bool(pinned),
            ttl_days=ttl_days,
            now=now,
        )
        why = "new value" if current is None else f"new value replacing {current['id']}"
        revived = Transition(image["id"], None, image, "create", why, source=source)
        new_id = image["id"]
    if current is not None:
        transitions.append(
            replace(
                supersede(
                    current,
                    new_id,
                    now,
                    f"conflicting value: replaced by {new_id}; kept through the grey period",
                ),
                source=source,
            )
        )
    transitions.append(revived)
    return transitions, new_id
