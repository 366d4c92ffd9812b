"""A recall of an active entry is a use, not a change (issue 10, section 1).

It updates the entry's use columns in place and counts the use in ``uses`` (one row per
entry and UTC day) instead of appending a change-log row with two images. These tests pin
what that must keep: the growth per recall stays small, the rules and the jobs' re-check
still see every use, renewals and restores stay logged, ``explain`` tells the uses, the log
plus the uses replay to the exact state, and ``forget`` erases the uses too.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path

from helpers import T0, current_images, locations, replay
from helpers.clocks import Clock
from helpers.state import use_rows

from memkeeper import MemoryStore
from memkeeper.clock import to_db
from memkeeper.config import Config
from memkeeper.maintenance.jobkit import JobContext
from memkeeper.maintenance.runner import run_once
from memkeeper.maintenance.undo import undo_run
from memkeeper.storage.columns import MEMORY_COLUMNS
from memkeeper.storage.sqlite.schema import HOT

DAY = timedelta(days=1)


def _store(db_path: Path, clock: Clock, **options) -> MemoryStore:
    return MemoryStore(db_path, config=Config(), clock=clock, **options)


def _changes(store: MemoryStore) -> int:
    return store.storage.hot.execute("SELECT count(*) FROM changes").fetchone()[0]


def _bytes(store: MemoryStore) -> int:
    store.storage.checkpoint()
    pages = store.storage.hot.execute("PRAGMA page_count").fetchone()[0]
    return pages * store.storage.hot.execute("PRAGMA page_size").fetchone()[0]


def test_a_recall_updates_the_entry_in_place_and_counts_one_use(db_path: Path) -> None:
    clock = Clock(T0)
    with _store(db_path, clock) as store:
        memory = store.remember("alice", "city", "Beijing")
        logged = _changes(store)
        clock.tick(timedelta(hours=1))
        assert store.recall("alice", "city").access_count == 1
        clock.tick(timedelta(hours=2))
        recalled = store.recall("alice", "city")
        clock.tick(DAY)
        store.recall("alice", "city")

        assert _changes(store) == logged  # no change-log row, no images
        assert recalled.last_accessed_at == T0 + timedelta(hours=3)
        stored = store.get(memory.id)
        assert stored.access_count == 3
        assert stored.last_accessed_at == stored.last_used_at == clock()
        assert stored.updated_at == T0  # a use is not a re-confirmation
        rows = [
            (d["day"], d["count"], d["first_at"], d["last_at"]) for d in use_rows(store)[memory.id]
        ]
        assert rows == [
            ("2026-01-01", 2, to_db(T0 + timedelta(hours=1)), to_db(T0 + timedelta(hours=3))),
            ("2026-01-02", 1, to_db(clock()), to_db(clock())),
        ]


def test_growth_per_recall_stays_under_100_bytes(db_path: Path) -> None:
    """2,000 recalls of 20 entries, each recalled once a day (the worst case: one row of
    ``uses`` per recall). Before this design each recall added ~1,450 bytes."""
    clock = Clock(T0)
    with _store(db_path, clock) as store:
        for n in range(20):
            store.remember("alice", f"k{n:02d}", f"value {n}")
        start = _bytes(store)
        for i in range(2000):
            day, n = divmod(i, 20)
            clock.moment = T0 + day * DAY + n * timedelta(minutes=1)
            store.recall("alice", f"k{n:02d}")
        grown = _bytes(store) - start
    assert grown < 2000 * 100, f"{grown / 2000:.0f} bytes per recall"


def test_renew_and_restore_stay_logged_with_images(db_path: Path) -> None:
    clock = Clock(T0)
    with _store(db_path, clock) as store:
        fact = store.remember("alice", "city", "Beijing")
        tone = store.remember("alice", "tone", "brief", kind="preference")
        clock.tick(181 * DAY)
        run_once(store, ["expire"])
        assert store.get(fact.id).state == "pending_review"
        store.recall("alice", "city")
        clock.tick(20 * DAY)
        run_once(store, ["expire"])
        assert store.get(tone.id).state == "cold"
        store.recall("alice", "tone")
        for memory_id, action in ((fact.id, "renew"), (tone.id, "restore")):
            change = store.changes(memory_id=memory_id)[-1]
            assert change.action == action and change.actor == "api:recall"
            assert change.after["access_count"] == change.before["access_count"] + 1
            assert change.after["state"] == "active"
        assert use_rows(store) == {}  # logged uses are not counted twice
        assert replay(store) == current_images(store)


def test_explain_tells_the_uses_between_the_changes(db_path: Path) -> None:
    clock = Clock(T0)
    with _store(db_path, clock) as store:
        memory = store.remember("alice", "city", "Beijing")
        for day in range(1, 15):  # 14 recalls over 14 days
            clock.moment = T0 + day * DAY
            store.recall("alice", "city")
        clock.tick(timedelta(hours=1))
        store.remember("alice", "city", "Beijing", confidence=0.99)  # re-confirmed
        clock.tick(timedelta(hours=1))
        store.recall("alice", "city")
        text = store.explain(memory.id)
    history = text.splitlines()[3:]
    assert "created: new value" in history[0]
    assert history[1] == (
        "  2026-01-02 09:00 UTC  recalled 14 times between 2026-01-02 and 2026-01-15,"
        " the last at 2026-01-15 09:00 UTC"
    )
    assert "re-confirmed" in history[2]
    assert history[3] == "  2026-01-15 11:00 UTC  recalled once"
    assert len(history) == 4
    assert "used 15 times" in text.splitlines()[1]


def test_a_database_from_before_the_uses_table_keeps_its_logged_recalls(
    db_path: Path,
) -> None:
    """A 0002 database with ``recall`` rows migrates; explain and replay count both kinds."""
    clock = Clock(T0)
    with _store(db_path, clock) as store:
        memory = store.remember("alice", "city", "Beijing")
    # As the memkeeper before 0003 left it: no uses table, each recall a logged change.
    conn = sqlite3.connect(db_path)
    conn.row_factory = sqlite3.Row
    conn.execute("DROP TABLE uses")
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = '0003_uses'")
    for hours in (1, 2):
        (before,) = conn.execute("SELECT after FROM changes ORDER BY id DESC LIMIT 1").fetchone()
        stamp = to_db(T0 + timedelta(hours=hours))
        conn.execute(
            "UPDATE memories SET last_accessed_at = ?, last_used_at = ?,"
            " access_count = access_count + 1 WHERE id = ?",
            [stamp, stamp, memory.id],
        )
        row = conn.execute("SELECT * FROM memories WHERE id = ?", [memory.id]).fetchone()
        after = json.dumps({name: row[name] for name in MEMORY_COLUMNS})
        conn.execute(
            "INSERT INTO changes (at, actor, action, memory_id, user_id, namespace, reason,"
            " source, before, after) VALUES (?, 'api:recall', 'recall', ?, 'alice', '',"
            " 'recalled', '', ?, ?)",
            [stamp, memory.id, before, after],
        )
    conn.commit()
    conn.close()

    clock.moment = T0 + 2 * DAY
    with _store(db_path, clock) as store:  # migrates forward
        assert HOT.migrations.pending(store.storage.hot) == []
        assert store.recall("alice", "city").access_count == 3
        history = store.explain(memory.id).splitlines()[3:]
        assert history[1] == (
            "  2026-01-01 10:00 UTC  recalled 3 times between 2026-01-01 and 2026-01-03,"
            " the last at 2026-01-03 09:00 UTC"
        )
        assert replay(store) == current_images(store)


def test_replaying_the_log_and_the_uses_gives_the_exact_state(db_path: Path) -> None:
    """A mix of uses, renewals, restores, re-confirmations, job runs, undo and forget, with
    several recalls a day on both sides of the changes: after each step, the change log
    with the uses on top is exactly every stored entry, every field a rule reads included."""
    clock = Clock(T0)
    config = Config.model_validate({"jobs": {"prune": {"max_facts": 3}}})
    with MemoryStore(db_path, config=config, clock=clock) as store:

        def check() -> None:
            assert replay(store) == current_images(store)

        for n in range(5):
            store.remember("u", f"k{n}", "v", confidence=0.4 if n == 4 else 0.9)
        store.remember("u", "tone", "brief", kind="preference")
        for day in range(40):
            clock.moment = T0 + day * DAY + timedelta(hours=1)
            for n in (0, 1, 2) if day % 3 else (0, 1):
                store.recall("u", f"k{n}")
                clock.tick(timedelta(minutes=7))
            if day == 10:
                store.remember("u", "k0", "v", confidence=0.95)  # re-confirm mid-day
                store.recall("u", "k0")
            if day == 20:
                store.remember("u", "k2", "other")  # conflict: k2's old value superseded
            check()
        # Day 40: settle the old k2, expire the unused preference, demote the unused
        # low-confidence k4, prune the active facts down to 3 (k3 goes).
        results = run_once(store, ["settle", "expire", "demote", "prune"], now=clock()).results
        runs = {result.job: result for result in results}
        assert all(result.ok and result.counts for result in results), results
        check()

        def last_action(key: str) -> str:
            found = [m for m in store.list_memories("u") if m.key == key and m.state == "active"]
            return store.changes(memory_id=found[0].id)[-1].action

        clock.tick(timedelta(hours=1))
        store.recall("u", "tone", kind="preference")  # renews the pending-review preference
        assert last_action("tone") == "renew"
        store.recall("u", "tone", kind="preference")  # then a plain use
        store.recall("u", "k3")  # brings the pruned fact back from cold storage
        assert last_action("k3") == "restore"
        clock.tick(timedelta(minutes=5))
        store.recall("u", "k3")
        check()
        # The preference expires again, retires after its grace period, and a recall
        # brings it back; uses of the others go on.
        clock.tick(31 * DAY)
        run_once(store, ["expire"], now=clock())
        store.recall("u", "k0")
        clock.tick(15 * DAY)
        run_once(store, ["expire"], now=clock())
        assert store.list_memories("u", kind="preference", state="cold")
        store.recall("u", "tone")
        assert last_action("tone") == "restore"
        store.recall("u", "tone")
        check()
        # Undo: the prune run's entry was used since (a conflict), the demotion is undone.
        assert undo_run(store, runs["prune"].run_id).conflicts
        assert undo_run(store, runs["demote"].run_id).reverted
        check()
        store.forget("u", "k1")
        check()
        actions = {change.action for change in store.changes()}
        assert actions >= {"create", "reconfirm", "supersede", "expire", "retire", "renew"}
        assert actions >= {"restore", "undo", "forget"}
        assert "recall" not in actions
        assert sum(d["count"] for days in use_rows(store).values() for d in days) > 50
        assert set(locations(db_path)) == set(current_images(store))


def test_forget_erases_the_uses(db_path: Path) -> None:
    clock = Clock(T0)
    with _store(db_path, clock) as store:
        city = store.remember("alice", "city", "Beijing")
        tone = store.remember("alice", "tone", "brief", kind="preference")
        other = store.remember("bob", "city", "Paris")
        for _ in range(3):
            for user, key in (("alice", "city"), ("alice", "tone"), ("bob", "city")):
                store.recall(user, key)
            clock.tick(DAY)
        assert set(use_rows(store)) == {city.id, tone.id, other.id}
        store.forget("alice", "city")
        assert set(use_rows(store)) == {tone.id, other.id}
        store.forget_memory(other.id)
        assert set(use_rows(store)) == {tone.id}
        store.forget_user("alice")
        assert use_rows(store) == {}
        assert replay(store) == current_images(store) == {}


def test_a_recall_between_a_jobs_selection_and_its_move_wins(db_path: Path, monkeypatch) -> None:
    """demote selects a low-confidence entry unused for 30 days; an agent in another process
    recalls it before the batch is applied: the move is skipped and the entry stays hot."""
    clock = Clock(T0)
    store = _store(db_path, clock)
    weak = store.remember("alice", "hunch", "maybe", confidence=0.3)
    other = store.remember("alice", "guess", "perhaps", confidence=0.3)
    clock.tick(40 * DAY)
    original = JobContext.apply

    def racing_apply(self: JobContext, transitions):
        agent = MemoryStore(db_path, clock=Clock(clock()))
        agent.recall("alice", "hunch")
        agent.close()
        return original(self, transitions)

    monkeypatch.setattr(JobContext, "apply", racing_apply)
    result = run_once(store, ["demote"], now=clock()).results[0]
    monkeypatch.undo()
    assert result.skipped_entries == 1
    assert locations(db_path)[weak.id] == ["hot"]
    assert store.get(weak.id).state == "active"
    assert store.get(weak.id).access_count == 1
    assert store.get(other.id).state == "cold"
    assert [c.action for c in store.changes(memory_id=weak.id)] == ["create"]
    assert replay(store) == current_images(store)
    store.close()


def test_a_use_after_a_run_makes_its_undo_a_conflict(db_path: Path) -> None:
    clock = Clock(T0)
    with _store(db_path, clock) as store:
        memory = store.remember("u", "k", "v")
        clock.tick(181 * DAY)
        expired = run_once(store, ["expire"], now=clock()).results[0]
        undone = undo_run(store, expired.run_id)  # active again, by the undo run
        assert store.get(memory.id).state == "active"
        store.recall("u", "k")  # a plain use, in place
        report = undo_run(store, undone.run_id)
        assert report.reverted == [] and len(report.conflicts) == 1
        assert store.get(memory.id).state == "active"
        assert replay(store) == current_images(store)


def test_a_lagging_clock_counts_its_use_without_moving_the_last_use_back(
    db_path: Path,
) -> None:
    clock = Clock(T0 + DAY)
    with _store(db_path, clock) as store:
        memory = store.remember("u", "k", "v")
        store.recall("u", "k")
        with _store(db_path, Clock(T0 + DAY - timedelta(minutes=5))) as lagging:
            assert lagging.recall("u", "k").last_accessed_at == T0 + DAY
        stored = store.get(memory.id)
        assert (stored.access_count, stored.last_accessed_at) == (2, T0 + DAY)
        day = use_rows(store)[memory.id][0]
        assert (day["count"], day["first_at"]) == (2, to_db(T0 + DAY - timedelta(minutes=5)))
        assert replay(store) == current_images(store)
