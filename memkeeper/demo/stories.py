"""The end of the demo: one run undone, and a few entries' lives told by ``explain``.

The stories are found in the change log rather than assumed, so whatever the seed and the
number of months, each one shown is what really happened to that entry; a story whose event
did not happen in a short simulation is left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memkeeper.maintenance.undo import undo_run
from memkeeper.store import MemoryStore

UNDO_PREFERENCE = ("demote", "prune", "expire", "settle")
"""Which job's latest run with changes the demo undoes, first choice first (then any)."""

UNDO_TRIES = 20
"""Candidate runs previewed before settling for the first choice."""

NOTE_LINES = 4
"""Lines of a summary note shown under its story."""


@dataclass(frozen=True)
class Story:
    """One entry's life: a title, its id, what ``explain`` says, and extra lines."""

    title: str
    memory_id: str
    explain: str
    extra: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "memory_id": self.memory_id,
            "explain": self.explain,
            "extra": self.extra,
        }


def _run_changes(counts: dict[str, Any]) -> int:
    changes = counts.get("changes", {}) if isinstance(counts, dict) else {}
    return sum(int(n) for n in changes.values()) if isinstance(changes, dict) else 0


def _undoes_cleanly(store: MemoryStore, run_id: str, now: datetime) -> bool:
    """Whether undoing the run would revert something and leave nothing alone (a dry run)."""
    preview = undo_run(store, run_id, now=now, dry_run=True)
    return bool(preview.reverted) and not preview.conflicts


def undo_one_run(store: MemoryStore, *, now: datetime) -> dict[str, Any] | None:
    """Undo the latest run with changes of the first job in :data:`UNDO_PREFERENCE` that
    has one (else of any job), preferring one whose changes all still stand (previewed with
    a dry run); what the undo did, or None when no run changed anything."""
    runs = [
        run
        for run in store.job_runs(limit=100_000)
        if run.job != "undo" and run.status == "ok" and _run_changes(run.counts) > 0
    ]
    if not runs:
        return None
    ranked = sorted(
        runs,
        key=lambda run: (
            UNDO_PREFERENCE.index(run.job) if run.job in UNDO_PREFERENCE else len(UNDO_PREFERENCE),
            -run.started_at.timestamp(),
        ),
    )
    target = next(
        (run for run in ranked[:UNDO_TRIES] if _undoes_cleanly(store, run.run_id, now)), None
    )
    target = target or ranked[0]
    report = undo_run(store, target.run_id, now=now)
    data = report.to_dict()
    data["undone_changes"] = _run_changes(target.counts)
    data["undone_at"] = target.started_at.isoformat()
    return data


def _story(store: MemoryStore, title: str, memory_id: str, extra: list[str] | None = None) -> Story:
    return Story(title, memory_id, store.explain(memory_id), extra or [])


def _expired_entry(store: MemoryStore) -> tuple[str, str] | None:
    """An entry that expired, best one a recall brought back; (title, id)."""
    expired = {c.memory_id for c in store.changes(action="expire") if c.memory_id}
    for action, title in (
        ("restore", "Unused until it expired and went cold; a recall brought it back"),
        ("renew", "Unused until it expired; a recall during review renewed it"),
    ):
        for change in store.changes(action=action):
            if change.memory_id in expired and change.actor.startswith("agent:"):
                return title, change.memory_id
    for change in store.changes(action="retire"):
        if change.memory_id in expired and (change.after or {}).get("cold_reason") == "expired":
            return "Unused: expired, pending review, then retired to cold storage", str(
                change.memory_id
            )
    first = sorted(expired)
    return ("Unused past its TTL: pending review", first[0]) if first else None


def _restored_entry(store: MemoryStore) -> tuple[str, str] | None:
    """An entry a job retired to cold storage and an agent's recall brought back."""
    for change in store.changes(action="restore"):
        if change.memory_id and change.actor.startswith("agent:"):
            reason = (change.before or {}).get("cold_reason") or "cold"
            return f"Retired to cold storage ({reason}), brought back by a recall", change.memory_id
    return None


def _summary_story(store: MemoryStore) -> Story | None:
    """The newest summary note, with the first lines of its text."""
    latest = store.changes(action="summarize", newest_first=True, limit=1)
    if not latest or latest[0].memory_id is None:
        return None
    memory = store.get(latest[0].memory_id)
    extra = []
    if memory is not None:
        lines = memory.value.split("\n")
        extra = ["Its text:", *(f"  {line}" for line in lines[:NOTE_LINES])]
        if len(lines) > NOTE_LINES:
            more = len(lines) - NOTE_LINES
            extra.append(f"  ... ({more} more line{'s' if more > 1 else ''})")
    return _story(store, "A long conversation, summarized into a note", latest[0].memory_id, extra)


def tell_stories(
    store: MemoryStore, marks: dict[str, str], undo: dict[str, Any] | None
) -> list[Story]:
    """The stories of the simulation, in a fixed order, each only if it happened."""
    stories = []
    if "changed back" in marks:
        stories.append(
            _story(
                store,
                "A preference changed, and changed back inside its grey period",
                marks["changed back"],
            )
        )
    for found in (_expired_entry(store), _restored_entry(store)):
        if found is not None and all(story.memory_id != found[1] for story in stories):
            stories.append(_story(store, *found))
    summary = _summary_story(store)
    if summary is not None:
        stories.append(summary)
    if undo is not None and undo["reverted"]:
        changes = store.changes(run_id=undo["run_id"])
        reverted = [change.memory_id for change in changes if change.memory_id]
        if reverted:
            title = f"Changed by a {undo['undone_job']} run, then undone"
            stories.append(_story(store, title, reverted[0]))
    if "forgotten" in marks:
        stories.append(
            _story(store, "Forgotten at the user's request: no residue", marks["forgotten"])
        )
    return stories
