"""Races between writers on the two files: no entry lost, no broken change-log chain.

Issue 8 item 1: the cold cleanup after a move must run under the hot write lock and decide by
what the hot file holds; deleting the cold copy by id lost an entry that another writer had
retired again between the hot commit and the cleanup.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from freezegun import freeze_time
from helpers import current_images, locations, replay

from memkeeper import MemoryStore
from memkeeper.clock import fixed
from memkeeper.maintenance import curation
from memkeeper.maintenance.runner import run_once
from memkeeper.storage import transitions
from memkeeper.storage.transitions import Transition, apply, cold_image

pytestmark = pytest.mark.both_backends

START = datetime(2026, 1, 1, 9, tzinfo=UTC)
LATER = START + timedelta(days=400)


def _one_cold_entry(db_path: Path) -> str:
    with freeze_time(START) as clock:
        store = MemoryStore(db_path)
        store.remember("u", "k", "old")
        clock.move_to(START + timedelta(hours=1))
        store.remember("u", "k", "new")
        (old,) = store.list_memories("u", state="superseded")
        store.close()
    store = MemoryStore(db_path, clock=fixed(LATER))
    run_once(store, ["settle"])
    assert store.get(old.id).state == "cold"
    store.close()
    return old.id


def test_an_entry_retired_again_right_after_its_restore_is_not_lost(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_id = _one_cold_entry(db_path)
    restorer = MemoryStore(db_path, clock=fixed(LATER))
    other = MemoryStore(db_path, clock=fixed(LATER + timedelta(minutes=1)))
    fired = []

    def retire_again(step: str) -> None:
        if step != "hot-committed" or fired:
            return
        fired.append(step)
        current = other.storage.current_images([memory_id])[memory_id]
        assert current["state"] != "cold"  # the restore's hot commit happened
        outcome = apply(
            other.storage,
            [
                Transition(
                    memory_id,
                    current,
                    cold_image(current, "superseded", other.now()),
                    "retire",
                    "retired again by another process",
                )
            ],
            actor="test:retire",
            now=other.now(),
        )
        assert outcome[0].applied

    monkeypatch.setattr(transitions, "step_hook", retire_again)
    report = curation.restore(restorer, [memory_id])
    assert fired and report.done == [memory_id]

    assert locations(db_path)[memory_id] == ["cold"]
    memory = restorer.get(memory_id)
    assert memory is not None and memory.state == "cold"
    assert [c.action for c in restorer.changes(memory_id=memory_id)][-2:] == [
        "restore",
        "retire",
    ]
    assert replay(restorer) == current_images(restorer)
    restorer.close()
    other.close()


def test_restoring_an_entry_an_agent_brought_back_meanwhile_is_refused_not_raised(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator's restore read the entry as cold; before it wrote, an agent's search
    brought it back (it is then its key's current holder too). Refused, never a ValueError."""
    with freeze_time(START):
        store = MemoryStore(db_path)
        memory = store.remember("u", "format", "reports in PDF")
        store.close()
    store = MemoryStore(db_path, clock=fixed(LATER + timedelta(days=15)))
    run_once(store, ["expire"], now=LATER)  # pending review
    run_once(store, ["expire"])  # retired to cold after the grace period
    assert store.get(memory.id).state == "cold"
    stale = store.storage.current_images([memory.id])
    (hit,) = store.search("u", "PDF", include_cold=True)  # the agent's use brings it back
    assert hit.memory.id == memory.id and store.get(memory.id).state == "active"
    monkeypatch.setattr(store.storage, "current_images", lambda ids: stale)
    report = curation.restore(store, [memory.id])
    assert report.refused == {memory.id: "not in cold storage (it came back meanwhile)"}
    monkeypatch.undo()
    assert store.get(memory.id).state == "active"
    store.close()
