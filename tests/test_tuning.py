"""Connections are tuned for agents beside a maintenance pass (issue 10, section 3)."""

from __future__ import annotations

from pathlib import Path

from memkeeper import MemoryStore
from memkeeper.config import Config
from memkeeper.maintenance.runner import RUNNER_AUTOCHECKPOINT_PAGES, run_once
from memkeeper.storage.files import DEFAULT_AUTOCHECKPOINT


def _pragma(store: MemoryStore, name: str) -> int:
    return store.storage.hot.conn.execute(f"PRAGMA {name}").fetchone()[0]


def test_defaults_are_wal_normal_with_a_64_mib_cache(db_path: Path) -> None:
    store = MemoryStore(db_path)
    assert _pragma(store, "journal_mode") == "wal"
    assert _pragma(store, "synchronous") == 1  # NORMAL
    assert _pragma(store, "cache_size") == -64 * 1024
    assert _pragma(store, "mmap_size") == 0
    assert _pragma(store, "wal_autocheckpoint") == DEFAULT_AUTOCHECKPOINT
    assert store.config.database.batch_size == 200
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
