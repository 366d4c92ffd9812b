"""A backup taken while agents write and passes move entries is consistent (issue 14).

Restored, every backup must keep the invariants of tests/test_multiprocess_invariants.py:
every id in exactly one file (not both, not neither: the change log, replayed, must give
exactly the stored images), at most one current entry per key, and the manifest's counts.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from helpers import T0, current_images, locations, replay

from memkeeper import MemoryStore
from memkeeper.maintenance import curation
from memkeeper.maintenance.backup_restore import restore
from memkeeper.maintenance.runner import run_once
from memkeeper.paths import cold_path_for
from memkeeper.storage import transitions
from memkeeper.storage.sqlite.backup import take
from memkeeper.storage.sqlite.backup_check import verify

BACKUPS = 5
WRITERS = 3


def check_restored(backup: Path, target: Path) -> dict[str, int]:
    """Restore ``backup`` to ``target`` and assert every invariant; returns counts by file."""
    manifest = verify(backup)
    restore(backup, target, cold_path_for(target), now=T0, busy_timeout_ms=5000)
    where = locations(target)
    assert {i: files for i, files in where.items() if len(files) != 1} == {}
    conn = sqlite3.connect(target)
    try:
        doubled = conn.execute(
            "SELECT user_id, namespace, kind, key FROM memories"
            " WHERE state IN ('active', 'pending_review') AND key IS NOT NULL"
            " GROUP BY user_id, namespace, kind, key HAVING count(*) > 1"
        ).fetchall()
    finally:
        conn.close()
    assert doubled == []
    counts = {
        "hot": sum(1 for files in where.values() if files == ["hot"]),
        "cold": sum(1 for files in where.values() if files == ["cold"]),
    }
    assert counts["hot"] == manifest["files"]["hot"]["rows"]["memories"]
    assert counts["cold"] == manifest["files"]["cold"]["rows"]["cold_memories"]
    with MemoryStore(target) as store:
        assert replay(store) == current_images(store)  # no id lost between the files
    return counts


def test_backups_during_writes_and_passes_restore_consistently(
    db_path: Path, tmp_path: Path
) -> None:
    now = [T0]
    MemoryStore(db_path, clock=lambda: now[0]).close()
    stop = threading.Event()
    errors: list[str] = []
    passes = [0]

    def writer(ident: int) -> None:
        rnd = random.Random(ident)
        with MemoryStore(db_path, clock=lambda: now[0], actor=f"agent{ident}") as store:
            while not stop.is_set():
                user, key = rnd.choice(["u0", "u1"]), f"k{rnd.randrange(12)}"
                try:
                    roll = rnd.random()
                    if roll < 0.55:
                        store.remember(user, key, rnd.choice(["red", "blue"]), confidence=0.3)
                    elif roll < 0.8:
                        store.recall(user, key)
                    elif roll < 0.95:
                        store.add_note(user, f"note {rnd.random()}", confidence=0.3)
                    else:
                        store.forget(user, key)
                except Exception as exc:  # any error reaching an agent fails the test
                    errors.append(f"agent{ident}: {type(exc).__name__}: {exc}")

    def runner() -> None:
        with MemoryStore(db_path, clock=lambda: now[0], actor="runner") as store:
            while not stop.is_set():
                now[0] += timedelta(days=40)
                try:
                    report = run_once(store, ["settle", "expire", "demote", "prune"])
                    errors.extend(f"{r.job}: {r.error}" for r in report.results if not r.ok)
                    cold = [m.id for m in store.list_memories(state="cold")]
                    for memory_id in cold[: len(cold) // 2]:
                        curation.restore(store, [memory_id])
                except Exception as exc:
                    errors.append(f"runner: {type(exc).__name__}: {exc}")
                    return
                passes[0] += 1

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    threads.append(threading.Thread(target=runner))
    for thread in threads:
        thread.start()
    backups = []
    try:
        with MemoryStore(db_path, clock=lambda: now[0], actor="backup") as store:
            for index in range(BACKUPS):
                seen, deadline = passes[0], time.monotonic() + 30
                while passes[0] <= seen and not errors and time.monotonic() < deadline:
                    time.sleep(0.01)
                backups.append(tmp_path / f"backup{index}")
                take(store.storage, backups[-1], now=T0, version="test")
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert errors == []
    counts = [
        check_restored(backup, tmp_path / f"restored{n}" / "memory.db")
        for n, backup in enumerate(backups)
    ]
    # The backups really caught both files busy: entries in cold storage, and a moving state.
    assert any(c["cold"] > 0 for c in counts), counts
    assert len({(c["hot"], c["cold"]) for c in counts}) > 1, counts


@pytest.mark.parametrize("direction", ["to_cold", "to_hot"])
def test_a_backup_in_the_middle_of_a_move_has_the_entry_once(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, direction: str
) -> None:
    now = [T0]
    store = MemoryStore(db_path, clock=lambda: now[0])
    entry = store.remember("alice", "city", "Beijing", confidence=0.3)
    store.remember("alice", "food", "dumplings")
    now[0] = T0.replace(year=2028)
    if direction == "to_hot":
        run_once(store, ["demote"])
        assert store.get(entry.id).state == "cold"
    other = MemoryStore(db_path, clock=lambda: now[0], actor="backup")
    backup = tmp_path / "b"

    def back_up_midway(step: str) -> None:
        # After the hot commit, before the cold side is cleaned up: the entry's old copy is
        # still in the other file, marked in flight.
        if step == "hot-committed":
            take(other.storage, backup, now=T0, version="test")

    monkeypatch.setattr(transitions, "step_hook", back_up_midway)
    if direction == "to_hot":
        curation.restore(store, [entry.id])
    else:
        run_once(store, ["demote"])
    monkeypatch.setattr(transitions, "step_hook", lambda step: None)
    assert backup.exists()
    other.close()
    store.close()
    counts = check_restored(backup, tmp_path / "restored" / "memory.db")
    assert counts == ({"hot": 1, "cold": 1} if direction == "to_cold" else {"hot": 2, "cold": 0})
