"""Connections are tuned for agents beside a maintenance pass (issue 10, section 3)."""

from __future__ import annotations

from pathlib import Path

from memkeeper import MemoryStore
from memkeeper.config import Config
from memkeeper.maintenance.jobkit import LockPacer
from memkeeper.maintenance.runner import RUNNER_AUTOCHECKPOINT_PAGES, run_once
from memkeeper.storage.base import DEFAULT_AUTOCHECKPOINT


def _pragma(store: MemoryStore, name: str) -> int:
    return store.storage.hot.conn.execute(f"PRAGMA {name}").fetchone()[0]


def test_defaults_are_wal_normal_with_a_24_mib_cache(db_path: Path) -> None:
    store = MemoryStore(db_path)
    assert _pragma(store, "journal_mode") == "wal"
    assert _pragma(store, "synchronous") == 1  # NORMAL
    assert _pragma(store, "cache_size") == -24 * 1024
    assert _pragma(store, "mmap_size") == 0
    assert _pragma(store, "wal_autocheckpoint") == DEFAULT_AUTOCHECKPOINT
    assert store.config.database.batch_size == 500
    assert store.config.database.lock_hold_ms == 20
    store.close()


def test_the_config_sets_synchronous_cache_and_mmap_on_both_files(db_path: Path) -> None:
    config = Config.model_validate(
        {"database": {"synchronous": "full", "cache_mb": 8, "mmap_mb": 16}}
    )
    store = MemoryStore(db_path, config=config)
    cold = store.storage.cold(create=True)
    for conn in (store.storage.hot.conn, cold.conn):
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert conn.execute("PRAGMA cache_size").fetchone()[0] == -8 * 1024
        assert conn.execute("PRAGMA mmap_size").fetchone()[0] == 16 * 1024 * 1024
    store.close()


def test_the_runner_checkpoints_its_own_writes_then_restores_the_default(
    db_path: Path, monkeypatch
) -> None:
    store = MemoryStore(db_path)
    store.remember("u", "k", "v")
    seen = []
    from memkeeper.jobs import REGISTRY

    from memkeeper.maintenance.jobkit import Job

    def spy(ctx) -> None:
        seen.append(ctx.store.storage.hot.conn.execute("PRAGMA wal_autocheckpoint").fetchone())

    monkeypatch.setitem(REGISTRY, "settle", Job("settle", "spy", spy))
    assert run_once(store, ["settle"]).ok
    assert seen == [(RUNNER_AUTOCHECKPOINT_PAGES,)]
    assert _pragma(store, "wal_autocheckpoint") == DEFAULT_AUTOCHECKPOINT
    store.close()


def test_new_and_migrated_databases_have_no_redundant_key_index(db_path: Path) -> None:
    store = MemoryStore(db_path)
    names = {
        row[0]
        for row in store.storage.hot.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'memories'"
        )
    }
    assert "memories_by_key" not in names
    assert {"memories_current_key", "memories_by_owner", "memories_due_by_use"} <= names
    store.close()


def test_the_pacer_keeps_transactions_near_the_lock_hold_target() -> None:
    pacer = LockPacer(largest=500, target_ms=20)
    assert pacer.size == 50
    pacer.observe(50, 0.050)  # 1 ms a row: far too long
    assert pacer.size == 18  # 20 ms / 1 ms, less a margin
    for _ in range(30):  # now cheap rows: grows back, never past the largest
        pacer.observe(pacer.size, 0.001)
    assert pacer.size == 500
    pacer.observe(10, 1.0)  # a short tail batch changes nothing
    assert pacer.size == 500


def test_a_job_writes_in_paced_transactions(db_path: Path, monkeypatch) -> None:
    from datetime import timedelta

    from memkeeper.clock import fixed

    store = MemoryStore(db_path)
    for i in range(120):
        store.remember("u", f"k{i}", "v")
    sizes = []
    original = LockPacer.observe

    def record(self, rows, seconds):
        sizes.append(rows)
        original(self, rows, 1.0)  # every transaction "ran long": the pacer must shrink

    monkeypatch.setattr(LockPacer, "observe", record)
    store.clock = fixed(store.now() + timedelta(days=400))
    (result,) = run_once(store, ["expire"]).results
    assert result.counts == {"expire": 120}
    assert sizes[:2] == [50, 1]  # 50 rows "took" a second: one row per transaction next
    assert sum(sizes) == 120
    store.close()
