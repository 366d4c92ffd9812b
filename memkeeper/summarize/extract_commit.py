"""Extraction's third sieve, conflict with what is stored: inside the summary's transaction.

Each extracted value goes through ``remember``'s own rules
(:func:`memkeeper.store.entries.remember_plan`): a new value wins and the old one is
superseded into its grey period; the same value again re-confirms it — and, said again by
the user, raises its confidence to :data:`~memkeeper.summarize.extract.CONFIRMED_CONFIDENCE`;
a value superseded within its grey period is revived. The entry's source is
``session:<id>``; its change-log rows carry the session, the message ids it came from and
what the model said of it (``details.extracted``), so ``explain`` can quote the sentence.

Left alone, and counted (``skipped_<reason>``):

* ``forgotten``: the user erased this key (a tombstone, :mod:`memkeeper.storage.tombstones`)
  after the messages stating it were written — old messages never undo a forget; the user
  saying it again afterwards, or the agent's own ``remember``, is not blocked; or the value
  or key carries a value the user erased (:mod:`memkeeper.storage.erased_values`), under
  whatever key the model chose;
* ``pinned``: the current value is pinned and differs (a pin is the operator's word);
* ``stale``: the current value was written after the messages stating the new one (what the
  agent remembered since is newer than an old conversation being summarized late).

A value the user gave as a fact while the key is stored as a preference (or the other way
round) joins the stored kind, so one key has one current value.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import datetime
from typing import Any

from memkeeper.clock import from_db
from memkeeper.maintenance.jobkit import JobContext
from memkeeper.storage.base import Storage
from memkeeper.storage.erased_values import Matcher, matcher_for
from memkeeper.storage.tombstones import erased_at
from memkeeper.storage.transitions import Image, Transition
from memkeeper.store.entries import current_entry, remember_plan
from memkeeper.summarize.extract import CONFIRMED_CONFIDENCE, Extracted

SOURCE_PREFIX = "session:"


def extracted_source(session_id: str) -> str:
    """The source of an extracted entry: ``session:<id>``."""
    return f"{SOURCE_PREFIX}{session_id}"


def forgotten_at(storage: Storage, user_id: str, namespace: str, key: str) -> datetime | None:
    """When the user last erased this key (None: never), from its tombstones."""
    return erased_at(storage.hot, "key", (user_id, namespace, key))


def _slot(
    storage: Storage, user_id: str, namespace: str, item: Extracted
) -> tuple[str, Image | None]:
    """The kind the value is stored under, and the current entry of that key."""
    current = current_entry(storage, user_id, namespace, item.kind, item.key)
    if current is None:
        other = "fact" if item.kind == "preference" else "preference"
        found = current_entry(storage, user_id, namespace, other, item.key)
        if found is not None:
            return other, found
    return item.kind, current


def _skip_reason(
    storage: Storage,
    user_id: str,
    namespace: str,
    item: Extracted,
    current: Image | None,
    erased_values_: Matcher | None,
) -> str | None:
    stated = from_db(item.stated_at)
    assert stated is not None
    erased = forgotten_at(storage, user_id, namespace, item.key)
    if erased is not None and stated <= erased:
        return "forgotten"
    if erased_values_ is not None and (
        erased_values_.carries(item.value) or erased_values_.carries(item.key)
    ):
        return "forgotten"
    if current is None or current["value"] == item.value:
        return None
    if current["pinned"]:
        return "pinned"
    updated = from_db(current["updated_at"])
    if updated is not None and updated > stated:
        return "stale"
    return None


def remember_extracted(
    ctx: JobContext,
    user_id: str,
    namespace: str,
    session_id: str,
    items: list[Extracted],
) -> Counter[str]:
    """Sieve 3 for every item; call it inside the summary's write transaction."""
    storage = ctx.store.storage
    done: Counter[str] = Counter()
    source = extracted_source(session_id)
    blocked = matcher_for(storage.hot.conn, user_id, namespace)
    for item in items:
        kind, current = _slot(storage, user_id, namespace, item)
        why = _skip_reason(storage, user_id, namespace, item, current, blocked)
        if why is not None:
            done[f"skipped_{why}"] += 1
            continue
        confidence = item.confidence
        if current is not None and current["value"] == item.value:
            confidence = max(confidence, CONFIRMED_CONFIDENCE)  # said again: confirmed
        transitions, _ = remember_plan(
            storage,
            user_id,
            namespace,
            kind,
            item.key,
            item.value,
            confidence=confidence,
            source=source,
            pinned=None,
            ttl_days=None,
            now=ctx.now,
        )
        details: dict[str, Any] = {
            "session_id": session_id,
            "message_ids": list(item.message_ids),
            "extracted": {
                "kind": item.asked_kind,
                "confirmed_in_session": item.confirmed,
                "confidence": item.confidence,
            },
        }
        quoted = ", ".join(f"#{i}" for i in item.message_ids)
        tagged = [
            replace(
                t,
                reason=f"{t.reason}; extracted from session {session_id!r} (messages {quoted})",
                details={**t.details, **details},
            )
            for t in transitions
        ]
        for outcome in ctx.apply(tagged):
            if outcome.applied:
                done[_counted(outcome.transition)] += 1
    return done


def _counted(transition: Transition) -> str:
    return {
        "create": "memories_extracted",
        "reconfirm": "memories_reconfirmed",
        "supersede": "memories_superseded",
    }.get(transition.action, f"memories_{transition.action}")
