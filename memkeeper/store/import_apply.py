"""Applying a checked import: each entry created, recognised as present, or left alone.

The entries come from :mod:`memkeeper.store.import_check`, already validated. They are
written in batches of ``[database] batch_size``, each in one write transaction, through the
shared transition mechanism (actor ``cli:import``), so every imported entry is logged like
any other change. What is already there is recognised and skipped, not re-confirmed, so
importing a file twice changes nothing; an id stored with other content is left alone and
reported as a conflict. What the user asked to forget stays forgotten: an entry whose id was
erased, or whose key or user was erased after the entry was written (the tombstones of
:mod:`memkeeper.storage.tombstones`), is skipped and counted as ``forgotten`` — an old export
or agent file brings nothing erased back. Unless the caller says the file's entries are
new statements (``as_new``, agent_memory.json only): then an entry the user erased is
imported as stated now, its old time dropped, and counted as ``restated``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from memkeeper.clock import from_db, to_db
from memkeeper.storage import erased_values, memory_reads
from memkeeper.storage.batches import batched
from memkeeper.storage.tombstones import erased_at
from memkeeper.storage.transaction import write_transaction
from memkeeper.storage.transitions import Image, Transition, apply, hot_image, supersede
from memkeeper.store import MemoryStore
from memkeeper.store.entries import (
    DEFAULT_CONFIDENCE,
    current_entry,
    new_entry_image,
    remember_plan,
)
from memkeeper.store.import_check import AgentEntry

Progress = Callable[[str, int, int], None]
"""``progress("import", done, total)``: called before each batch and once at the end."""


@dataclass
class ImportReport:
    """What an import did: entries created, already present, and conflicts left alone."""

    format: str
    created: int = 0
    unchanged: int = 0
    superseded: int = 0
    conflicts: list[str] = field(default_factory=list)
    filtered_out: int = 0
    forgotten: int = 0
    restated: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The report as the CLI prints it (``conflicting`` counts the conflicts)."""
        return {
            "format": self.format,
            "created": self.created,
            "unchanged": self.unchanged,
            "superseded": self.superseded,
            "conflicting": len(self.conflicts),
            "conflicts": self.conflicts,
            "filtered_out": self.filtered_out,
            "forgotten": self.forgotten,
            "restated": self.restated,
        }

    @property
    def only_forgotten(self) -> bool:
        """True when nothing was imported, or found present, because every entry predates
        a forget: the file brought nothing, and an operator should know why."""
        return self.forgotten > 0 and not (
            self.created or self.unchanged or self.superseded or self.conflicts
        )


class _Blocked:
    """The values each owner had erased (:mod:`memkeeper.storage.erased_values`), read once
    per owner in a batch's transaction rather than once per line."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.matchers: dict[tuple[str, str], erased_values.Matcher | None] = {}

    def carries(self, user_id: str, namespace: str, *texts: str | None) -> bool:
        owner = (user_id, namespace)
        if owner not in self.matchers:
            conn = self.store.storage.hot.conn
            self.matchers[owner] = erased_values.matcher_for(conn, user_id, namespace)
        found = self.matchers[owner]
        return found is not None and any(found.carries(text) for text in texts)


def _forgotten(
    store: MemoryStore,
    user_id: str,
    namespace: str,
    key: str | None,
    memory_id: str | None,
    written_at: datetime | None,
) -> bool:
    """Whether the user erased this entry (its id), or its key or themselves after it was
    written (``written_at`` None: unknown, so before)."""
    hot = store.storage.hot
    if memory_id is not None and erased_at(hot, "memory", (memory_id,)) is not None:
        return True
    scopes: list[tuple[str, tuple[str, ...]]] = [("user", (user_id,))]
    if key is not None:
        scopes.append(("key", (user_id, namespace, key)))
    for scope, parts in scopes:
        when = erased_at(hot, scope, parts)
        if when is not None and (written_at is None or written_at <= when):
            return True
    return False


def _note_exists(store: MemoryStore, user_id: str, namespace: str, entry: AgentEntry) -> bool:
    created = to_db(entry.created_at) if entry.created_at is not None else None
    found = memory_reads.note_exists
    if found(store.storage.hot, "memories", user_id, namespace, entry.value, created):
        return True
    cold = store.storage.cold(create=False)
    return cold is not None and found(
        cold, "cold_memories", user_id, namespace, entry.value, created
    )


def _present(
    store: MemoryStore, user_id: str, namespace: str, entry: AgentEntry, current: Any
) -> bool:
    """Whether ``entry`` is stored already: the fact's ``current`` value, or the same note."""
    if entry.kind == "note":
        return _note_exists(store, user_id, namespace, entry)
    return current is not None and current["value"] == entry.value


def import_agent_json(
    store: MemoryStore,
    entries: list[AgentEntry],
    user_id: str,
    namespace: str,
    source: str,
    *,
    as_new: bool = False,
    progress: Progress | None = None,
) -> ImportReport:
    """Import an agent_memory.json's facts and notes for one user.

    A fact is remembered as :meth:`~memkeeper.store.MemoryStore.remember` would, except that
    a value already current is left as it is (not re-confirmed); a note already stored with
    the same text and time is skipped. An entry erased by a forget is skipped, unless
    ``as_new``: then it is stored as a statement made now.
    """
    report = ImportReport("agent-json")
    done = 0
    for batch in batched(entries, store.config.database.batch_size):
        if progress is not None:
            progress("import", done, len(entries))
        done += len(batch)
        with write_transaction(store.storage):
            now = store.now()
            blocked = _Blocked(store)
            for line in batch:
                entry = line
                current = None  # the fact's current entry, looked up once
                if entry.kind != "note":
                    assert entry.key is not None
                    current = current_entry(store.storage, user_id, namespace, "fact", entry.key)
                # What is stored already (stated again after a forget, say) is just present.
                if _present(store, user_id, namespace, entry, current):
                    report.unchanged += 1
                    continue
                if blocked.carries(user_id, namespace, entry.value, entry.key):
                    report.forgotten += 1  # carries a value the user erased
                    continue
                if _forgotten(store, user_id, namespace, entry.key, None, entry.created_at):
                    restated = replace(entry, created_at=None)
                    if entry.kind == "note" and _note_exists(store, user_id, namespace, restated):
                        report.unchanged += 1  # imported --as-new before: stored at that time
                        continue
                    if not as_new:
                        report.forgotten += 1
                        continue
                    entry = restated  # stated now, not back then
                    report.restated += 1
                if entry.kind == "note":
                    image = new_entry_image(
                        user_id=user_id,
                        namespace=namespace,
                        kind="note",
                        key=None,
                        value=entry.value,
                        source=source,
                        confidence=DEFAULT_CONFIDENCE,
                        pinned=False,
                        ttl_days=None,
                        now=now,
                        created_at=entry.created_at,
                    )
                    apply(
                        store.storage,
                        [
                            Transition(
                                image["id"], None, image, "create", f"imported ({entry.where})"
                            )
                        ],
                        actor="cli:import",
                        now=now,
                    )
                    report.created += 1
                    continue
                assert entry.key is not None
                transitions, _ = remember_plan(
                    store.storage,
                    user_id,
                    namespace,
                    "fact",
                    entry.key,
                    entry.value,
                    confidence=DEFAULT_CONFIDENCE,
                    source=source,
                    pinned=None,
                    ttl_days=None,
                    now=now,
                )
                apply(store.storage, transitions, actor="cli:import", now=now)
                report.created += 1
                report.superseded += int(current is not None)
    if progress is not None:
        progress("import", done, len(entries))
    return report


def import_jsonl(
    store: MemoryStore,
    records: list[tuple[int, Image]],
    path: Path,
    *,
    progress: Progress | None = None,
) -> ImportReport:
    """Import the lines of a JSON Lines export, each entry with its own id and every field.

    A line whose id is stored is counted as unchanged (same content) or a conflict. A line
    that would be current for a key that already has a current value is skipped if the value
    is the same, else stored superseded if it is the older of the two, else supersedes it.
    """
    report = ImportReport("jsonl")
    hot_lines = [(n, image) for n, image in records if image["state"] != "cold"]
    cold_lines = [(n, image) for n, image in records if image["state"] == "cold"]
    done = 0

    def advance(count: int) -> None:
        nonlocal done
        if progress is not None:
            progress("import", done, len(records))
        done += count

    for batch in batched(hot_lines, store.config.database.batch_size):
        advance(len(batch))
        with write_transaction(store.storage):
            now = store.now()
            blocked = _Blocked(store)
            existing = store.storage.current_images([image["id"] for _, image in batch])
            for number, image in batch:
                reason = f"imported from {path.name} line {number}"
                if _erased_line(store, image, blocked):
                    report.forgotten += 1
                    continue
                if image["id"] in existing:
                    _count_existing(report, existing[image["id"]], image, number)
                    continue
                transitions = [Transition(image["id"], None, image, "create", reason)]
                current = None
                if image["key"] is not None and image["state"] in ("active", "pending_review"):
                    current = current_entry(
                        store.storage,
                        image["user_id"],
                        image["namespace"],
                        image["kind"],
                        image["key"],
                    )
                if current is not None:
                    if current["value"] == image["value"]:
                        report.unchanged += 1
                        continue
                    report.superseded += 1
                    if current["updated_at"] >= image["updated_at"]:
                        transitions = [
                            Transition(
                                image["id"],
                                None,
                                hot_image(image, "superseded", now),
                                "create",
                                reason + " (older than current)",
                            )
                        ]
                    else:
                        transitions.insert(
                            0,
                            supersede(
                                current, image["id"], now, f"replaced by imported {image['id']}"
                            ),
                        )
                apply(store.storage, transitions, actor="cli:import", now=now)
                report.created += 1
    for batch in batched(cold_lines, store.config.database.batch_size):
        advance(len(batch))
        existing = store.storage.current_images([image["id"] for _, image in batch])
        blocked = _Blocked(store)
        transitions = []
        for number, image in batch:
            if _erased_line(store, image, blocked):
                report.forgotten += 1
                continue
            if image["id"] in existing:
                _count_existing(report, existing[image["id"]], image, number)
                continue
            transitions.append(
                Transition(
                    image["id"], None, image, "create", f"imported from {path.name} line {number}"
                )
            )
        outcomes = apply(store.storage, transitions, actor="cli:import", now=store.now())
        report.created += sum(outcome.applied for outcome in outcomes)
        for outcome in outcomes:
            if not outcome.applied:  # stored meanwhile by another process
                report.conflicts.append(
                    f"id {outcome.transition.memory_id} was stored meanwhile; left as it is"
                )
    advance(0)
    return report


def _erased_line(store: MemoryStore, image: Image, blocked: _Blocked) -> bool:
    owner = (image["user_id"], image["namespace"])
    return blocked.carries(*owner, image["value"], image["key"]) or _forgotten(
        store, *owner, image["key"], image["id"], from_db(image["updated_at"])
    )


def _count_existing(report: ImportReport, stored: Image, image: Image, number: int) -> None:
    if stored == image:
        report.unchanged += 1
    else:
        report.conflicts.append(
            f"line {number}: id {image['id']} exists with different content; left as it is"
        )
