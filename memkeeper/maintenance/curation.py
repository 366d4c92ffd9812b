"""What an operator does by hand: review pending entries, restore retired ones.

``keep`` makes a pending-review entry active again and re-confirmed; ``drop`` retires it to
cold storage now (reason ``dropped``); ``restore`` brings cold entries back to active and
re-confirmed, so the next expiry run does not send them straight back. A restored fact whose
key has since got another current value becomes current again, and the other value is
superseded (the operator's choice is the latest word). Every change goes through the shared
transition mechanism and is logged with the ``cli:`` actor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memkeeper.clock import to_db
from memkeeper.storage.transitions import (
    Transition,
    apply,
    cold_image,
    hot_image,
    supersede,
    with_changes,
)
from memkeeper.store import MemoryStore
from memkeeper.store.entries import current_entry


@dataclass
class CurationReport:
    """Per-id outcome of an operator action.

    ``refused`` says why each id was left alone; ``missing`` lists the ids that name no memory
    at all (they are in ``refused`` too); ``replaced`` maps a restored id to the id of the
    value it superseded (the value that was current until then).
    """

    done: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    replaced: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "done": self.done,
            "refused": self.refused,
            "missing": self.missing,
            "replaced": self.replaced,
        }

    def add_missing(self, memory_id: str) -> None:
        self.refused[memory_id] = "no such memory"
        self.missing.append(memory_id)


def _pending(store: MemoryStore, ids: Sequence[str], report: CurationReport) -> list[dict]:
    current = store.storage.current_images(list(ids))
    found = []
    for memory_id in ids:
        image = current.get(memory_id)
        if image is None:
            report.add_missing(memory_id)
        elif image["state"] != "pending_review":
            report.refused[memory_id] = f"not pending review (it is {image['state']})"
        else:
            found.append(image)
    return found


def keep(
    store: MemoryStore, ids: Sequence[str], *, actor: str = "cli:review-keep"
) -> CurationReport:
    """Pending-review entries become active again, re-confirmed now."""
    report = CurationReport()
    now = store.now()
    transitions = [
        Transition(
            image["id"],
            image,
            hot_image(with_changes(image, updated_at=to_db(now)), "active", now),
            "keep",
            "kept in review: still valid",
        )
        for image in _pending(store, ids, report)
    ]
    _apply(store, transitions, actor, report)
    return report


def drop(
    store: MemoryStore, ids: Sequence[str], *, actor: str = "cli:review-drop"
) -> CurationReport:
    """Pending-review entries are retired to cold storage now (reason ``dropped``)."""
    report = CurationReport()
    now = store.now()
    transitions = [
        Transition(
            image["id"], image, cold_image(image, "dropped", now), "retire", "dropped in review"
        )
        for image in _pending(store, ids, report)
    ]
    _apply(store, transitions, actor, report)
    return report


def restore(
    store: MemoryStore, ids: Sequence[str], *, actor: str = "cli:restore"
) -> CurationReport:
    """Cold entries come back to the hot file, active and re-confirmed now."""
    report = CurationReport()
    now = store.now()
    stamp = to_db(now)
    current = store.storage.current_images(list(ids))
    for memory_id in ids:
        image = current.get(memory_id)
        if image is None:
            report.add_missing(memory_id)
            continue
        if image["state"] != "cold":
            report.refused[memory_id] = f"not in cold storage (it is {image['state']})"
            continue
        target = hot_image(with_changes(image, updated_at=stamp), "active", now)
        transitions = [Transition(memory_id, image, target, "restore", "restored by an operator")]
        if image["key"] is not None:
            holder = current_entry(
                store.storage, image["user_id"], image["namespace"], image["kind"], image["key"]
            )
            if holder is not None and holder["id"] == memory_id:
                # An agent brought it back (a recall or search of a cold entry) after it was
                # read above: it is current already, nothing to restore.
                report.refused[memory_id] = "not in cold storage (it came back meanwhile)"
                continue
            if holder is not None:
                transitions.insert(
                    0,
                    supersede(
                        holder,
                        memory_id,
                        now,
                        f"restored {memory_id} is current again; kept through the grey period",
                    ),
                )
        _apply(store, transitions, actor, report, primary=memory_id)
    return report


def _apply(
    store: MemoryStore,
    transitions: list[Transition],
    actor: str,
    report: CurationReport,
    primary: str | None = None,
) -> None:
    if not transitions:
        return
    outcomes = apply(store.storage, transitions, actor=actor, now=store.now())
    for outcome in outcomes:
        memory_id = outcome.transition.memory_id
        if primary is not None and memory_id != primary:
            continue
        if outcome.applied:
            report.done.append(memory_id)
        else:
            report.refused[memory_id] = "changed meanwhile; left alone"
    if primary is not None and primary in report.done:
        for outcome in outcomes:
            if outcome.applied and outcome.transition.memory_id != primary:
                report.replaced[primary] = outcome.transition.memory_id
