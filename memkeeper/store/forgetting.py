"""Forgetting at a user's request: one key, one entry, one project, or everything about a user.

These only check the input and say what to erase; the erasure itself — hot and cold rows,
their change-log rows, a content-free tombstone, and the scrub that leaves no byte of the
erased text in either file — is :func:`memkeeper.storage.forgetting.erase`; files that
``restore-backup`` set aside are reached too. An erasure
cannot be undone: the change-log rows that could restore an entry are erased with it.
"""

from __future__ import annotations

from typing import Any

from memkeeper import validation
from memkeeper.errors import InvalidInput
from memkeeper.storage.base import Storage
from memkeeper.storage.forgetting import Removed, Selection
from memkeeper.storage.forgetting import erase as erase_live
from memkeeper.storage.forgetting import preview as preview_live
from memkeeper.storage.sqlite import set_aside
from memkeeper.store import bm25_index
from memkeeper.store.core import StoreCore


def erase(core_storage: Storage, selection: Selection, **how: Any) -> dict[str, int]:
    """Erase in the live files, then in the files ``restore-backup`` set aside beside them
    (:mod:`memkeeper.storage.sqlite.set_aside`), which would otherwise keep the erased values; and
    the keyword postings this process keeps in memory (:mod:`memkeeper.store.bm25_index`),
    which hold the values of recently searched users' entries. On PostgreSQL nothing is set
    aside (``restore-backup`` refuses there)."""
    counts = erase_live(core_storage, selection, **how)
    if not core_storage.one_database:
        set_aside.reach(core_storage, selection, **how)
    bm25_index.reset()
    return counts


def preview(removed: Removed) -> dict[str, Any]:
    """A dry run's answer: counts, and the ids and kinds of what would be erased, redacted
    and rebuilt. Never a value: it is shown, logged and sent as it is."""
    reach = removed.reach
    images = reach.images if reach else {}
    derived = reach.derived if reach else {}

    def entry(memory_id: str) -> dict[str, Any]:
        image = images.get(memory_id) or {}
        kind = image.get("kind") or removed.kinds.get(memory_id)
        found: dict[str, Any] = {"id": memory_id, "kind": kind}
        if memory_id in derived:
            found["why"] = derived[memory_id]
        return found

    return {
        "dry_run": True,
        "counts": dict(removed.counts),
        "erase": [entry(memory_id) for memory_id in removed.ids],
        "redact": {
            "entries": sorted([*reach.entries, *reach.cold_entries]) if reach else [],
            "messages": sorted(reach.messages) if reach else [],
            "episodes": sorted(reach.episodes) if reach else [],
            "change_rows": len(reach.changes) if reach else 0,
        },
        "rebuild": sorted(reach.unmark) if reach else [],
    }


def forget(
    core: StoreCore, user_id: str, key: str, *, namespace: str, dry_run: bool = False
) -> int | dict[str, Any]:
    """Erase every value ``key`` ever had for the user (hot, cold, log), and what memkeeper
    derived from it. Returns how many entries the key had; with ``dry_run``, the
    :func:`preview` of it, writing nothing."""
    user_id, namespace = core.owner(user_id, namespace)
    key = core.key(key)
    if dry_run:
        selection = Selection(user_id=user_id, namespace=namespace, key=key)
        return preview(preview_live(core.storage, selection, now=core.now()))
    counts = erase(
        core.storage,
        Selection(user_id=user_id, namespace=namespace, key=key),
        actor=f"{core.actor}:forget",
        now=core.now(),
        reason="erased every value of one key at the user's request",
    )
    return counts["memories"]


def forget_memory(
    core: StoreCore, memory_id: str, *, dry_run: bool = False
) -> int | dict[str, Any]:
    """Erase one entry (a note, say) by id, with its history and what was derived from it.
    Returns 1, or 0 if absent; with ``dry_run``, the :func:`preview`."""
    core.lookup(("memory_id", memory_id))
    if dry_run:
        return preview(preview_live(core.storage, Selection(memory_id=memory_id), now=core.now()))
    counts = erase(
        core.storage,
        Selection(memory_id=memory_id),
        actor=f"{core.actor}:forget",
        now=core.now(),
        reason="erased one entry at the user's request",
    )
    return counts["memories"]


def forget_namespace(
    core: StoreCore, user_id: str, namespace: str, *, dry_run: bool = False
) -> dict[str, Any]:
    """Erase one namespace of a user (a project): its memories, messages, episodes and their
    log rows. The default namespace (the user's profile) is not a project: forget_user."""
    user_id, namespace = core.owner(user_id, namespace)
    if not namespace:
        raise InvalidInput(
            "namespace: the default namespace is the user's profile, not a project; "
            "forget its keys one by one, or everything about the user with forget_user"
        )
    if dry_run:
        selection = Selection(user_id=user_id, namespace=namespace)
        return preview(preview_live(core.storage, selection, now=core.now()))
    return erase(
        core.storage,
        Selection(user_id=user_id, namespace=namespace),
        actor=f"{core.actor}:forget_namespace",
        now=core.now(),
        reason="erased one namespace (a project) at the user's request",
    )


def forget_user(core: StoreCore, user_id: str, *, dry_run: bool = False) -> dict[str, Any]:
    """Erase everything about a user: memories, messages, episodes, their log rows."""
    user_id = validation.identifier("user_id", user_id, max_chars=core.config.limits.max_key_chars)
    if dry_run:
        return preview(preview_live(core.storage, Selection(user_id=user_id), now=core.now()))
    return erase(
        core.storage,
        Selection(user_id=user_id),
        actor=f"{core.actor}:forget_user",
        now=core.now(),
        reason="erased everything about the user at their request",
    )
