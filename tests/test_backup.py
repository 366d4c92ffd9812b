"""memkeeper backup / restore-backup (issue 14): the copy, its checks, and putting it back."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest
from helpers import T0, dump_databases, raw_rows

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.clock import fixed
from memkeeper.errors import (
    EXIT_BUSY,
    EXIT_CANT_CREATE,
    EXIT_DATABASE,
    EXIT_NO_INPUT,
    DatabaseError,
    InputFileMissing,
    LockBusy,
    StorageUnwritable,
)
from memkeeper.maintenance.backup_restore import restore
from memkeeper.maintenance.locks import daemon_lock, jobs_lock
from memkeeper.maintenance.runner import run_once
from memkeeper.paths import cold_path_for
from memkeeper.storage.sqlite.backup import take
from memkeeper.storage.sqlite.backup_check import MANIFEST, describe, sha256_of, verify
from memkeeper.storage.sqlite.schema import COLD, HOT


def filled_store(db_path: Path) -> MemoryStore:
    """A store with entries in both files, messages and an episode."""
    now = [T0]
    store = MemoryStore(db_path, clock=lambda: now[0])
    for index in range(30):
        store.remember("alice", f"k{index}", f"value {index}", confidence=0.3 + (index % 2) * 0.6)
    store.add_note("bob", "a note")
    store.append_message("alice", "s1", "user", "hello")
    store.record_episode("alice", "a task")
    now[0] = T0.replace(year=2028)
    run_once(store, ["demote"])  # the low-confidence, unused half goes to cold storage
    return store


def memory_rows(hot_path: Path) -> dict[str, list[dict]]:
    """Memories of both files, by id, as stored."""
    return {
        "hot": raw_rows(hot_path, "memories"),
        "cold": raw_rows(cold_path_for(hot_path), "cold_memories"),
    }


def restore_to(backup: Path, hot_path: Path) -> dict:
    return restore(backup, hot_path, cold_path_for(hot_path), now=T0, busy_timeout_ms=5000)


def rewrite_manifest(directory: Path) -> None:
    """Make the manifest describe the files as they are now, so a deeper check must catch them."""
    manifest = json.loads((directory / MANIFEST).read_text())
    for role, name, kind in (("hot", "memory.db", HOT), ("cold", "memory-cold.db", COLD)):
        path = directory / name
        entry = manifest["files"][role]
        entry.update(bytes=path.stat().st_size, sha256=sha256_of(path))
        try:
            conn = sqlite3.connect(path)
            entry.update(describe(conn, kind))
            conn.close()
        except sqlite3.DatabaseError:
            pass
    (directory / MANIFEST).write_text(json.dumps(manifest))


@pytest.fixture
def backed_up(tmp_path: Path, db_path: Path) -> tuple[MemoryStore, Path]:
    store = filled_store(db_path)
    take(store.storage, tmp_path / "backup", now=T0, version="test")
    yield store, tmp_path / "backup"
    store.close()


def test_a_backup_holds_both_files_verified_and_private(backed_up, db_path: Path) -> None:
    _store, backup = backed_up
    manifest = verify(backup)
    assert sorted(os.listdir(backup)) == ["manifest.json", "memory-cold.db", "memory.db"]
    assert stat.S_IMODE(backup.stat().st_mode) == 0o700
    for name in os.listdir(backup):
        assert stat.S_IMODE((backup / name).stat().st_mode) == 0o600
    files = manifest["files"]
    assert files["hot"]["rows"]["memories"] == len(raw_rows(db_path, "memories")) == 16
    assert files["cold"]["rows"]["cold_memories"] == 15
    assert files["hot"]["application_id"] == HOT.application_id
    assert files["hot"]["schema"] == list(HOT.steps)
    assert manifest["taken_at"] == "2026-01-01T09:00:00.000000+00:00"
    assert manifest["memkeeper_version"] == "test"
    # Plain files: rollback journal, nothing beside them, same rows as the live files.
    for name in ("memory.db", "memory-cold.db"):
        conn = sqlite3.connect(backup / name)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        conn.close()
    assert memory_rows(backup / "memory.db") == memory_rows(db_path)


def test_a_database_without_cold_file_gets_an_empty_one(tmp_path: Path, db_path: Path) -> None:
    with MemoryStore(db_path) as store:
        store.remember("alice", "city", "Beijing")
        assert not cold_path_for(db_path).exists()
        manifest = take(store.storage, tmp_path / "b", now=T0, version="test")
    assert manifest["files"]["cold"]["rows"]["cold_memories"] == 0
    assert not cold_path_for(db_path).exists()  # the live side is not created by a backup
    verify(tmp_path / "b")


def test_a_non_empty_directory_that_is_not_a_backup_is_refused(backed_up, tmp_path) -> None:
    store, _ = backed_up
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(StorageUnwritable, match="not empty and is not a memkeeper backup"):
        take(store.storage, other, now=T0, version="test")
    assert os.listdir(other) == ["notes.txt"]
    with pytest.raises(StorageUnwritable, match="live database"):
        take(store.storage, store.path.parent, now=T0, version="test")


def test_a_backup_into_an_earlier_backup_replaces_it(backed_up) -> None:
    store, backup = backed_up
    store.remember("carol", "city", "Oslo")
    manifest = take(store.storage, backup, now=T0, version="test")
    assert verify(backup) == {k: v for k, v in manifest.items() if k != "writers_blocked_ms"}
    assert manifest["files"]["hot"]["rows"]["memories"] == 17


def test_a_backup_of_a_backup(backed_up, tmp_path: Path) -> None:
    _store, first = backed_up
    copied = tmp_path / "copied"
    shutil.copytree(first, copied)  # a backup copied elsewhere is still a backup
    verify(copied)
    restored = tmp_path / "restored" / "memory.db"
    restore_to(copied, restored)
    with MemoryStore(restored, clock=fixed(T0)) as again:
        take(again.storage, tmp_path / "second", now=T0, version="test")
    verify(tmp_path / "second")
    assert memory_rows(tmp_path / "second" / "memory.db") == memory_rows(first / "memory.db")


def test_restore_puts_the_backup_back_and_keeps_the_replaced_files(backed_up, db_path) -> None:
    store, backup = backed_up
    before = memory_rows(db_path)
    store.remember("carol", "city", "Oslo")
    store.close()
    after_change = dump_databases(db_path)
    result = restore_to(backup, db_path)
    assert memory_rows(db_path) == before
    aside = Path(result["set_aside"]["hot"])
    assert aside.name.startswith("memory.db.replaced-2026")
    cold_aside = Path(result["set_aside"]["cold"])
    assert cold_aside.name.startswith("memory-cold.db.replaced-2026")
    assert [p.name for p in db_path.parent.iterdir() if "restoring" in p.name] == []
    # The replaced files are intact beside the new ones.
    kept = raw_rows(aside, "memories")
    assert len(kept) == len(before["hot"]) + 1
    assert "carol" in {row["user_id"] for row in kept}
    assert any("Oslo" in line for line in after_change["memory.db"])
    with MemoryStore(db_path) as reopened:
        assert reopened.list_memories("carol") == []
        assert len(reopened.list_memories("alice")) == 30


@pytest.mark.parametrize("holder", [daemon_lock, jobs_lock])
def test_restore_is_refused_while_the_service_holds_its_lock(backed_up, db_path, holder) -> None:
    store, backup = backed_up
    store.close()
    before = dump_databases(db_path)
    with holder(db_path).hold(), pytest.raises(LockBusy, match="stop it first"):
        restore_to(backup, db_path)
    assert dump_databases(db_path) == before


def test_restore_is_refused_while_an_agent_has_the_database_open(backed_up, db_path) -> None:
    store, backup = backed_up  # still open
    store.remember("carol", "city", "Oslo")
    with pytest.raises(LockBusy, match="open in another process"):
        restore_to(backup, db_path)
    assert store.list_memories("carol")[0].value == "Oslo"


def test_a_truncated_backup_is_refused(backed_up, db_path) -> None:
    store, backup = backed_up
    store.close()
    before = dump_databases(db_path)
    path = backup / "memory.db"
    os.truncate(path, path.stat().st_size // 2)
    with pytest.raises(DatabaseError, match="truncated or changed"):
        verify(backup)
    rewrite_manifest(backup)  # sizes agree now: the integrity check must catch it
    with pytest.raises(DatabaseError, match=r"not a usable database|integrity"):
        restore_to(backup, db_path)
    assert dump_databases(db_path) == before


def test_a_backup_with_a_wrong_application_id_is_refused(backed_up) -> None:
    _store, backup = backed_up
    conn = sqlite3.connect(backup / "memory.db")
    conn.execute(f"PRAGMA application_id = {COLD.application_id}")
    conn.close()
    rewrite_manifest(backup)
    with pytest.raises(DatabaseError, match=r"is a memkeeper cold-storage .* not a hot"):
        verify(backup)


def test_a_backup_from_a_newer_memkeeper_is_refused(backed_up) -> None:
    _store, backup = backed_up
    conn = sqlite3.connect(backup / "memory.db")
    conn.execute(
        "INSERT INTO _sqlite_migrations (migration_set, name, applied_at)"
        " VALUES ('memkeeper', '0099_future', '2030-01-01')"
    )
    conn.commit()
    conn.close()
    rewrite_manifest(backup)
    with pytest.raises(DatabaseError, match=r"newer memkeeper .*0099_future"):
        verify(backup)


def test_rows_that_disagree_with_the_manifest_are_refused(backed_up) -> None:
    _store, backup = backed_up
    manifest = json.loads((backup / MANIFEST).read_text())
    manifest["files"]["cold"]["rows"]["cold_memories"] += 1
    (backup / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DatabaseError, match="rows differs"):
        verify(backup)


def test_a_directory_without_manifest_is_not_a_backup(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputFileMissing, match=r"no manifest\.json"):
        verify(tmp_path / "empty")
    with pytest.raises(InputFileMissing, match="does not exist"):
        verify(tmp_path / "absent")


def test_the_commands(tmp_path: Path, db_path: Path, capsys) -> None:
    filled_store(db_path).close()
    db = ["--db", str(db_path)]
    backup = tmp_path / "b"
    assert main([*db, "backup", str(backup)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"backup written to {backup}: ")
    assert "16 memories" in out and "verified" in out
    assert main([*db, "backup", str(backup), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["files"]["hot"]["rows"]["memories"] == 16
    assert data["writers_blocked_ms"] >= 0  # measured, not bounded: see the test below
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x").write_text("x")
    assert main([*db, "backup", str(tmp_path / "other")]) == EXIT_CANT_CREATE
    assert "not a memkeeper backup" in capsys.readouterr().err
    assert main([*db, "restore-backup", str(tmp_path / "absent")]) == EXIT_NO_INPUT
    capsys.readouterr()
    with daemon_lock(db_path).hold():
        assert main([*db, "restore-backup", str(backup)]) == EXIT_BUSY
    assert "service" in capsys.readouterr().err
    assert main([*db, "restore-backup", str(backup)]) == 0
    out = capsys.readouterr().out
    assert "the replaced files are kept as" in out and "memory.db.replaced-" in out
    os.truncate(backup / "memory.db", 4096)
    assert main([*db, "restore-backup", str(backup)]) == EXIT_DATABASE
    assert "truncated or changed" in capsys.readouterr().err


def test_writers_commit_while_the_copy_runs_and_the_copy_is_the_snapshot(
    backed_up, tmp_path, monkeypatch
) -> None:
    """Writers wait only for the snapshots to open, never for the copy (an order, not a
    time: the bound once asserted here is measured by the bench, writers_blocked_ms)."""
    import memkeeper.storage.sqlite.backup as backup_module

    store, _ = backed_up
    copy = backup_module._copy
    committed = []

    def write_during_copy(source, target):
        other = sqlite3.connect(store.path, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # fails at once if the backup held the lock
            other.execute("UPDATE memories SET source = 'during-copy' WHERE user_id = 'bob'")
            other.execute("COMMIT")
            committed.append(target.name)
        finally:
            other.close()
        copy(source, target)

    monkeypatch.setattr(backup_module, "_copy", write_during_copy)
    take(store.storage, tmp_path / "during", now=T0, version="test")
    assert committed == ["memory.db.partial", "memory-cold.db.partial"]
    sources = {row["source"] for row in raw_rows(tmp_path / "during" / "memory.db", "memories")}
    assert "during-copy" not in sources  # the copy is of the snapshot taken before the write


def _copies_onto_a_full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backup's copy target behaves as a file on a full disk: SQLite answers
    SQLITE_FULL ("database or disk is full") once it holds two pages."""
    connect = sqlite3.connect

    def full_target(database, *args, **kwargs):
        conn = connect(database, *args, **kwargs)
        if str(database).endswith(".partial"):
            conn.execute("PRAGMA max_page_count = 2")
        return conn

    monkeypatch.setattr(sqlite3, "connect", full_target)


def test_a_backup_onto_a_full_disk_exits_73_and_keeps_nothing(
    tmp_path: Path, db_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    filled_store(db_path).close()
    backup = tmp_path / "b"
    _copies_onto_a_full_disk(monkeypatch)
    assert main(["--db", str(db_path), "backup", str(backup)]) == EXIT_CANT_CREATE
    err = capsys.readouterr().err
    assert "full" in err and "nothing was kept" in err
    assert not [p for p in backup.iterdir() if not p.name.startswith(".")]


def test_a_backup_whose_file_cannot_be_created_for_lack_of_space_exits_73(
    tmp_path: Path, db_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from memkeeper.storage.sqlite import backup as backup_module

    filled_store(db_path).close()

    def no_space(path: Path) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(backup_module, "new_private_file", no_space)
    assert main(["--db", str(db_path), "backup", str(tmp_path / "b")]) == EXIT_CANT_CREATE
    assert "full" in capsys.readouterr().err
