"""undo: a run's changes reverted from their before images, as a new run; safe to repeat."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from freezegun import freeze_time
from helpers import current_images, locations, replay

from memkeeper import MemoryStore
from memkeeper.errors import NotFound
from memkeeper.maintenance.runner import run_once
from memkeeper.maintenance.undo import undo_run

pytestmark = pytest.mark.both_backends

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def aged(db_path: Path):
    """A store with 6 facts (two in conflict) and a frozen clock 200 days later."""
    with freeze_time(START) as clock:
        store = MemoryStore(db_path)
        for i in range(5):
            store.remember("u", f"k{i}", "v")
        store.remember("u", "city", "A")
        clock.move_to(START + timedelta(days=1))
        store.remember("u", "city", "B")
        clock.move_to(START + timedelta(days=200))
        yield store, clock
        store.close()


def test_undo_restores_the_exact_before_images(aged) -> None:
    store, _clock = aged
    before = current_images(store)
    result = run_once(store, ["expire"]).results[0]
    assert result.counts == {"expire": 6}
    assert current_images(store) != before
    report = undo_run(store, result.run_id)
    assert len(report.reverted) == 6 and not report.conflicts
    assert current_images(store) == before
    undo_changes = store.changes(run_id=report.run_id)
    assert {c.action for c in undo_changes} == {"undo"}
    assert all(c.details["undoes_run"] == result.run_id for c in undo_changes)
    runs = {run.run_id: run for run in store.job_runs(limit=50)}
    assert runs[report.run_id].job == "undo" and runs[report.run_id].status == "ok"
    assert replay(store) == current_images(store)


def test_undo_brings_entries_back_from_cold_storage(aged, db_path: Path) -> None:
    store, _clock = aged
    before = current_images(store)
    result = run_once(store, ["settle"]).results[0]
    assert result.counts == {"retire (superseded)": 1}
    moved = result.changes[0].memory_id
    assert locations(db_path)[moved] == ["cold"]
    undo_run(store, result.run_id)
    assert locations(db_path)[moved] == ["hot"]
    assert current_images(store) == before


def test_undoing_twice_is_harmless(aged) -> None:
    store, _clock = aged
    before = current_images(store)
    run_id = run_once(store, ["expire"]).results[0].run_id
    first = undo_run(store, run_id)
    second = undo_run(store, run_id)
    assert len(first.reverted) == 6
    assert second.reverted == [] and len(second.already_undone) == 6 and not second.conflicts
    assert current_images(store) == before


def test_entries_changed_since_the_run_are_left_alone(aged) -> None:
    store, clock = aged
    run_id = run_once(store, ["expire"]).results[0].run_id
    clock.tick(timedelta(hours=1))
    store.recall("u", "k0")  # renewed by an agent after the run
    store.remember("u", "k1", "changed")  # and another replaced
    report = undo_run(store, run_id)
    assert len(report.reverted) == 4
    assert len(report.conflicts) == 2
    assert store.recall("u", "k0").state == "active"
    assert store.recall("u", "k1").value == "changed"


def test_undo_of_an_undo_redoes_the_run(aged) -> None:
    store, _clock = aged
    run_id = run_once(store, ["expire"]).results[0].run_id
    after_run = current_images(store)
    undo = undo_run(store, run_id)
    redo = undo_run(store, undo.run_id)
    assert len(redo.reverted) == 6
    assert current_images(store) == after_run


def test_undo_of_a_prune_run_and_of_a_key_taken_since(db_path: Path) -> None:
    from memkeeper.config import Config

    config = Config.model_validate({"jobs": {"prune": {"max_facts": 2}}})
    store = MemoryStore(db_path, config=config)
    for key in ("a", "b", "c", "d"):
        store.remember("u", key, "v", confidence=0.9 if key in "cd" else 0.2)
    run_id = run_once(store, ["prune"]).results[0].run_id
    assert {m.key for m in store.list_memories("u", state="cold")} == {"a", "b"}
    store.remember("u", "a", "new value")  # "a" has a new current value now
    report = undo_run(store, run_id)
    assert len(report.reverted) == 1
    [why] = report.conflicts.values()
    assert "another current value" in why
    assert store.recall("u", "b").state == "active"
    assert store.recall("u", "a").value == "new value"
    store.close()


def test_dry_run_undo_changes_nothing(aged) -> None:
    store, _clock = aged
    run_id = run_once(store, ["expire"]).results[0].run_id
    after_run = current_images(store)
    runs = len(store.job_runs(limit=100))
    report = undo_run(store, run_id, dry_run=True)
    assert len(report.reverted) == 6
    assert current_images(store) == after_run
    assert len(store.job_runs(limit=100)) == runs


def test_undo_of_an_unknown_run_is_not_found(store: MemoryStore) -> None:
    with pytest.raises(NotFound, match="no run"):
        undo_run(store, "20990101T000000Z-expire-0000")


def test_a_forgotten_entry_stays_forgotten_when_its_run_is_undone(aged) -> None:
    store, _clock = aged
    result = run_once(store, ["expire"]).results[0]
    store.forget("u", "k0")
    report = undo_run(store, result.run_id)
    assert len(report.reverted) == 5 and report.conflicts == {}
    assert store.recall("u", "k0") is None
    assert all(m.key != "k0" for m in store.list_memories("u"))
