"""A forget reaches backups: ``backup --prune-forgotten`` and restore apply the tombstones.

Residue is checked the way the forget tests check it: the raw bytes of every file in the
backup directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import T0, raw_rows

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.clock import fixed
from memkeeper.maintenance.backup_restore import restore
from memkeeper.maintenance.runner import run_once
from memkeeper.paths import cold_path_for
from memkeeper.storage.sqlite.backup import take
from memkeeper.storage.sqlite.backup_check import verify
from memkeeper.storage.sqlite.backup_prune import prune
from memkeeper.storage.tombstones import is_tombstoned, since

SECRET = "PRUNESECRET-41c7"


def holding(directory: Path, needle: str) -> list[str]:
    """Names of the files in ``directory`` whose raw bytes contain ``needle``."""
    return sorted(
        p.name for p in directory.iterdir() if p.is_file() and needle.encode() in p.read_bytes()
    )


@pytest.fixture
def store(db_path: Path) -> MemoryStore:
    now = [T0]
    memory = MemoryStore(db_path, clock=lambda: now[0])
    memory.moment = now  # type: ignore[attr-defined]
    yield memory
    memory.close()


def test_prune_forgotten_leaves_no_residue_in_the_backup(
    store: MemoryStore, tmp_path: Path
) -> None:
    backup = tmp_path / "b"
    store.remember("alice", "city", f"Beijing {SECRET}-key", confidence=0.3)
    note = store.add_note("alice", f"note {SECRET}-note")
    store.remember("alice", "food", "dumplings")
    store.append_message("carol", "s", "user", f"message {SECRET}-user")
    store.remember("bob", "city", "Lisbon")
    store.moment[0] = T0.replace(year=2028)
    run_once(store, ["demote"])  # the low-confidence city goes to cold storage
    assert store.list_memories("alice", state="cold")
    take(store.storage, backup, now=store.now(), version="test")
    assert holding(backup, SECRET) == ["memory-cold.db", "memory.db"]

    store.forget("alice", "city")
    store.forget_memory(note.id)
    store.forget_user("carol")
    manifest = prune(store.storage, backup, now=store.now(), version="test")

    assert holding(backup, SECRET) == []
    assert manifest["pruned"]["memories"] == 2
    assert manifest["pruned"]["messages"] == 1
    assert verify(backup) == manifest  # the rewritten manifest describes the pruned files
    assert manifest["taken_at"] == "2028-01-01T09:00:00.000000+00:00"
    hot = backup / "memory.db"
    assert sorted(row["value"] for row in raw_rows(hot, "memories")) == ["Lisbon", "dumplings"]
    # The backup now knows these erasures: pruning again applies nothing.
    again = prune(store.storage, backup, now=store.now(), version="test")
    assert again["pruned"] == {"tombstones": 0, "erasures": 0}


def test_an_erasure_before_the_backup_does_not_touch_a_value_said_again(
    store: MemoryStore, tmp_path: Path
) -> None:
    backup = tmp_path / "b"
    store.remember("alice", "city", "Xi'an")
    store.forget("alice", "city")
    store.remember("alice", "city", f"Beijing {SECRET}")  # said again after the forget
    take(store.storage, backup, now=store.now(), version="test")
    prune(store.storage, backup, now=store.now(), version="test")
    assert holding(backup, SECRET) == ["memory.db"]  # kept: the forget came before it

    store.forget("alice", "city")  # forgotten a second time, after the backup
    prune(store.storage, backup, now=store.now(), version="test")
    assert holding(backup, SECRET) == []


def test_restore_applies_erasures_recorded_since_the_backup(
    store: MemoryStore, tmp_path: Path, db_path: Path
) -> None:
    backup = tmp_path / "b"
    store.remember("alice", "city", f"Beijing {SECRET}")
    store.remember("bob", "city", "Lisbon")
    take(store.storage, backup, now=store.now(), version="test")
    store.forget("alice", "city")
    store.close()
    result = restore(backup, db_path, cold_path_for(db_path), now=T0, busy_timeout_ms=5000)
    assert result["erased_since_backup"]["memories"] == 1
    # Neither the restored files nor the ones set aside (erased live before) hold it.
    assert Path(result["set_aside"]["hot"]).exists()
    assert holding(db_path.parent, SECRET) == []
    assert holding(backup, SECRET) == ["memory.db"]  # the backup itself is left as it was
    with MemoryStore(db_path, clock=fixed(T0)) as restored:
        assert [m.value for m in restored.list_memories()] == ["Lisbon"]
        # The restored database knows the erasure too, for the next backup and extraction.
        assert is_tombstoned(restored.storage.hot, "key", ("alice", "", "city"))
        assert len(since(restored.storage.hot, None)) >= 2


def test_the_command(store: MemoryStore, tmp_path: Path, db_path: Path, capsys) -> None:
    backup = tmp_path / "b"
    store.remember("alice", "city", f"Beijing {SECRET}")
    take(store.storage, backup, now=store.now(), version="test")
    store.forget("alice", "city")
    store.close()
    assert main(["--db", str(db_path), "backup", "--prune-forgotten", str(backup)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"pruned backup {backup} (taken 2026-01-01T09:00:00")
    assert "1 tombstone it had not seen" not in out
    assert "2 tombstones it had not seen, 1 memory erased" in out
    assert holding(backup, SECRET) == []


def test_a_restored_database_keeps_every_tombstone_of_the_replaced_one(
    store: MemoryStore, tmp_path: Path, db_path: Path
) -> None:
    backup = tmp_path / "b"
    take(store.storage, backup, now=store.now(), version="test")
    later = store.remember("alice", "pet", "cat")  # not in the backup at all
    store.forget("alice", "pet")
    store.close()
    result = restore(backup, db_path, cold_path_for(db_path), now=T0, busy_timeout_ms=5000)
    assert result["erased_since_backup"] == {"tombstones": 2, "erasures": 0}
    with MemoryStore(db_path, clock=fixed(T0)) as restored:
        hot = restored.storage.hot
        assert is_tombstoned(hot, "key", ("alice", "", "pet"))
        assert is_tombstoned(hot, "memory", (later.id,))
        assert [t.erased_at for t in since(hot, None)] == [T0, T0]
