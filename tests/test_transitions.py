"""The transition mechanism: agents win races, dry runs write nothing, crashes lose nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from freezegun import freeze_time
from helpers import current_images, dump_databases, locations, replay
from helpers.databases import is_postgres

from memkeeper import MemoryStore
from memkeeper.clock import fixed
from memkeeper.maintenance import curation
from memkeeper.maintenance.jobkit import JobContext
from memkeeper.maintenance.runner import run_once

pytestmark = pytest.mark.both_backends

START = datetime(2026, 1, 1, 9, tzinfo=UTC)
LATER = START + timedelta(days=400)


def test_an_agents_recall_between_selection_and_transition_wins(db_path: Path, monkeypatch) -> None:
    with freeze_time(START) as clock:
        store = MemoryStore(db_path)
        ids = {key: store.remember("alice", key, "v").id for key in ("a", "b", "c", "d")}
        clock.move_to(START + timedelta(days=200))
        original = JobContext.apply

        def racing_apply(self: JobContext, transitions):
            # Another process (its own connection) recalls "c" after the job selected it.
            agent = MemoryStore(db_path)
            agent.recall("alice", "c")
            agent.close()
            return original(self, transitions)

        monkeypatch.setattr(JobContext, "apply", racing_apply)
        result = run_once(store, ["expire"]).results[0]
        assert result.counts == {"expire": 3}
        assert result.skipped_entries == 1
        assert store.get(ids["c"]).state == "active"
        assert {store.get(ids[k]).state for k in "abd"} == {"pending_review"}
        # The recall is a use recorded in place, not a logged change.
        assert [c.action for c in store.changes(memory_id=ids["c"])] == ["create"]
        assert store.get(ids["c"]).access_count == 1
        store.close()


def test_a_write_between_selection_and_move_to_cold_wins(db_path: Path, monkeypatch) -> None:
    with freeze_time(START) as clock:
        store = MemoryStore(db_path)
        store.remember("u", "city", "A")
        clock.move_to(START + timedelta(days=1))
        old = store.remember("u", "city", "B")  # A superseded
        old_id = store.list_memories("u", state="superseded")[0].id
        clock.move_to(START + timedelta(days=30))
        original = JobContext.apply

        def racing_apply(self: JobContext, transitions):
            agent = MemoryStore(db_path)
            agent.remember("u", "city", "A")  # re-asserted during the race
            agent.close()
            return original(self, transitions)

        monkeypatch.setattr(JobContext, "apply", racing_apply)
        result = run_once(store, ["settle"]).results[0]
        assert result.counts == {} and result.skipped_entries == 1
        assert store.get(old_id).state == "active"
        assert store.get(old.id).state == "superseded"
        assert locations(db_path)[old_id] == ["hot"]
        store.close()


def _populate(store: MemoryStore, clock) -> None:
    for i in range(6):
        store.remember("u", f"fact{i}", "v", confidence=0.4 if i % 2 else 0.9)
    store.remember("u", "city", "A")
    clock.move_to(START + timedelta(days=1))
    store.remember("u", "city", "B")
    store.add_note("u", "note one")
    clock.move_to(START + timedelta(days=200))
    run_once(store)  # some pending review, some cold: both files in use
    clock.move_to(START + timedelta(days=201))
    store.remember("u", "fresh", "new")


def test_dry_run_writes_nothing_to_either_file(db_path: Path) -> None:
    with freeze_time(START) as clock:
        store = MemoryStore(db_path)
        _populate(store, clock)
        before = dump_databases(db_path)
        runs_before = len(store.job_runs(limit=1000))
        report = run_once(store, now=LATER, dry_run=True)
        assert sum(r.total_changes for r in report.results) > 0
        assert all(r.dry_run for r in report.results)
        assert dump_databases(db_path) == before
        assert len(store.job_runs(limit=1000)) == runs_before
        store.close()


@pytest.mark.sqlite_only  # the cold file; on PostgreSQL cold storage is a table
def test_dry_run_does_not_create_the_cold_file(db_path: Path) -> None:
    with freeze_time(START):
        store = MemoryStore(db_path)
        store.remember("u", "k", "v", confidence=0.1)
    report = run_once(store, now=LATER, dry_run=True)
    assert report.results[0].dry_run
    assert not (db_path.parent / "memory-cold.db").exists()
    store.close()


# -- crashes ---------------------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import os, sys
    from datetime import datetime
    from memkeeper import MemoryStore
    from memkeeper.maintenance import curation
    from memkeeper.storage import transitions
    from memkeeper.clock import fixed
    from memkeeper.maintenance.runner import run_once

    db, step, action, now = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]

    def crash(name):
        if name == step:
            os._exit(17)

    transitions.step_hook = crash
    store = MemoryStore(db, clock=fixed(datetime.fromisoformat(now)))
    if action == "settle":
        run_once(store, ["settle"])
    else:
        ids = [m.id for m in store.list_memories(state="cold")]
        curation.restore(store, ids)
    os._exit(0)
    """
)


# On PostgreSQL a move between hot and cold is one transaction (cold storage is a table of the
# same database): no cold file is written first nor cleared after, so only these steps exist.
ONE_DATABASE_STEPS = {
    "settle": ("cold-written", "hot-written", "hot-committed"),
    "restore": ("hot-written", "hot-committed"),
}


def _crashed(db_path: Path | str, step: str, action: str, now: datetime) -> bool:
    """Run ``action`` in a child that dies at ``step``; False when the step does not exist on
    this backend (the child then ran to the end)."""
    code = _crash_child(db_path, step, action, now)
    if is_postgres(db_path) and step not in ONE_DATABASE_STEPS[action]:
        assert code == 0
        return False
    assert code == 17
    return True


def _crash_child(db_path: Path | str, step: str, action: str, now: datetime) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(db_path), step, action, now.isoformat()],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode


def _superseded_store(db_path: Path, count: int = 12) -> list[str]:
    with freeze_time(START) as clock:
        store = MemoryStore(db_path)
        for i in range(count):
            store.remember("u", f"k{i}", "old")
        clock.move_to(START + timedelta(hours=1))
        for i in range(count):
            store.remember("u", f"k{i}", "new")
        ids = [m.id for m in store.list_memories("u", state="superseded")]
        store.close()
    return ids


@pytest.mark.slow
@pytest.mark.parametrize("step", ["cold-written", "hot-written", "hot-committed", "cold-cleared"])
def test_a_crash_at_any_step_of_a_move_to_cold_loses_and_duplicates_nothing(
    db_path: Path, step: str
) -> None:
    ids = _superseded_store(db_path)
    _crashed(db_path, step, "settle", LATER)
    store = MemoryStore(db_path, clock=fixed(LATER))
    run_once(store, ["settle"])
    where = locations(db_path)
    assert len(where) == 24
    assert all(len(places) == 1 for places in where.values()), where
    assert {where[i][0] for i in ids} == {"cold"}
    for memory_id in ids:
        memory = store.get(memory_id)
        assert (memory.state, memory.cold_reason) == ("cold", "superseded")
        retires = [c for c in store.changes(memory_id=memory_id) if c.action == "retire"]
        assert len(retires) == 1
    assert replay(store) == current_images(store)
    store.close()


@pytest.mark.slow
@pytest.mark.parametrize("step", ["cold-written", "hot-written", "hot-committed", "cold-cleared"])
def test_a_crash_at_any_step_of_a_restore_loses_and_duplicates_nothing(
    db_path: Path, step: str
) -> None:
    ids = _superseded_store(db_path)
    store = MemoryStore(db_path, clock=fixed(LATER))
    run_once(store, ["settle"])
    store.close()
    crashed = _crashed(db_path, step, "restore", LATER)
    store = MemoryStore(db_path, clock=fixed(LATER))
    run_once(store, ["prune"])  # any run settles interrupted moves first
    where = locations(db_path)
    assert all(len(places) == 1 for places in where.values()), where
    restored = {i for i in ids if where[i] == ["hot"]}
    # restore() moves one entry per transaction: the first one's move is either wholly done
    # (its hot commit happened) or wholly undone, and no other has started.
    if not crashed:  # PostgreSQL, a step it has not: the restore ran to its end
        assert restored == set(ids)
    else:
        assert len(restored) == (1 if step in ("hot-committed", "cold-cleared") else 0)
    for memory_id in ids:
        expected = "cold" if memory_id not in restored else "active"
        assert store.get(memory_id).state in (expected, "superseded")
    assert replay(store) == current_images(store)
    report = curation.restore(store, [i for i in ids if i not in restored])
    assert sorted(report.done) == sorted(set(ids) - restored)
    assert all(locations(db_path)[i] == ["hot"] for i in ids)
    store.close()
