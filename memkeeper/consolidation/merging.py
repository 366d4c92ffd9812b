"""What merging a group of duplicates changes, and applying groups whole or not at all.

The survivor takes the group's highest confidence, its latest confirmation
(``updated_at``) and its latest recall (``last_accessed_at``) — so its last use is the
group's latest — and the sum of the group's recall counts (the same meaning was used that
often under its other names). A pending-review survivor of a group with an active member
becomes active: the meaning was in use. Its change-log row (action ``merge``) names every
merged entry with its similarity, and its details keep the union of the group's sources,
the merged ids and their similarities. Each duplicate becomes ``superseded`` by the
survivor (reason "duplicate of <id> (similarity 0.95)") and goes through the grey period and
``settle`` like any superseded value.

A group is applied in one transaction with every other group of its batch, and only whole:
if an agent used or changed any member after the job read it, the group is left for the
next run (counted as skipped). Undo reverts every row through the images they hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memkeeper.consolidation.grouping import Candidate, Group, Link
from memkeeper.maintenance.jobkit import JobContext
from memkeeper.storage.transaction import write_transaction
from memkeeper.storage.transitions import Transition, hot_image, supersede, with_changes

MERGE_ACTION = "merge"


def _latest(values: Sequence[str | None]) -> str | None:
    present = [value for value in values if value]
    return max(present) if present else None


def _sources(members: Sequence[Candidate]) -> list[str]:
    return sorted({m.image["source"] for m in members if m.image["source"]})


def survivor_reason(group: Group) -> str:
    """'kept as the survivor of 3 duplicates: merged a (similarity 0.95), b (...)'."""
    merged = ", ".join(f"{d.id} ({link.describe()})" for d, link in group.duplicates)
    count = len(group.duplicates) + 1
    return f"kept as the survivor of {count} duplicates; merged into it: {merged}"


def duplicate_reason(survivor_id: str, link: Link) -> str:
    """'duplicate of <id> (similarity 0.95)'."""
    return f"duplicate of {survivor_id} ({link.describe()})"


def group_transitions(group: Group, now: datetime) -> list[Transition]:
    """The survivor's ``merge`` and each duplicate's ``supersede``, survivor first."""
    survivor = group.survivor.image
    members = [group.survivor, *(d for d, _ in group.duplicates)]
    images = [m.image for m in members]
    target = with_changes(
        survivor,
        confidence=max(image["confidence"] for image in images),
        updated_at=_latest([image["updated_at"] for image in images]),
        last_accessed_at=_latest([image["last_accessed_at"] for image in images]),
        access_count=sum(int(image["access_count"]) for image in images),
    )
    if target["state"] == "pending_review" and any(i["state"] == "active" for i in images):
        target = hot_image(target, "active", now)
    details: dict[str, Any] = {
        "merged": [d.id for d, _ in group.duplicates],
        "similarities": {d.id: round(link.similarity, 4) for d, link in group.duplicates},
        "matched_by": {d.id: link.how for d, link in group.duplicates},
        "sources": _sources(members),
        "confidence_before": survivor["confidence"],
    }
    transitions = [
        Transition(survivor["id"], survivor, target, MERGE_ACTION, survivor_reason(group), details)
    ]
    for duplicate, link in group.duplicates:
        transitions.append(
            supersede(
                duplicate.image,
                survivor["id"],
                now,
                duplicate_reason(survivor["id"], link),
                similarity=round(link.similarity, 4),
                matched_by=link.how,
                merged_into=survivor["id"],
            )
        )
    return transitions


def apply_whole(ctx: JobContext, batch: Sequence[list[Transition]]) -> tuple[int, int, int]:
    """Apply groups of transitions, each whole or not at all.

    Returns (groups applied, entries superseded in them, groups left alone). In a dry run
    nothing is written: each group is previewed (and counted) as it would be applied.
    """
    if not batch:
        return 0, 0, 0
    storage = ctx.store.storage
    if ctx.dry_run:
        whole = [t for t in batch if all(o.applied for o in ctx.apply(t))]
    else:
        with write_transaction(storage):
            ids = [t.memory_id for transitions in batch for t in transitions]
            current = storage.current_images(ids)
            whole = [
                transitions
                for transitions in batch
                if all(current.get(t.memory_id) == t.expected for t in transitions)
            ]
            outcomes = ctx.apply([t for transitions in whole for t in transitions])
            if not all(outcome.applied for outcome in outcomes):
                # Cannot happen under the write lock just taken: roll the batch back rather
                # than write half a group.
                raise RuntimeError("a merge group changed under the write lock")
    superseded = sum(1 for transitions in whole for t in transitions if t.action == "supersede")
    return len(whole), superseded, len(batch) - len(whole)
