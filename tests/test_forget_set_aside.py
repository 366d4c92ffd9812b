"""A forget reaches the files restore-backup set aside (issue 18, item 10).

``restore-backup`` keeps the replaced files as ``memory.db.replaced-<time>``; they hold what
the database held then. A value forgotten after the restore used to live on in them.
"""

from __future__ import annotations

from pathlib import Path

from helpers import T0, raw_rows

from memkeeper import MemoryStore
from memkeeper.maintenance.backup_restore import restore
from memkeeper.paths import cold_path_for
from memkeeper.storage.forgetting import Selection
from memkeeper.storage.sqlite import set_aside
from memkeeper.storage.sqlite.backup import take

SECRET = b"SET-ASIDE-SECRET-VALUE"


def _bytes_of(path: Path) -> bytes:
    """Every byte of a file and its -wal (no store has them open when this is called)."""
    found = b""
    for suffix in ("", "-wal"):
        candidate = Path(f"{path}{suffix}")
        if candidate.exists():
            found += candidate.read_bytes()
    return found


def _restored(db_path: Path, tmp_path: Path) -> tuple[Path, Path]:
    with MemoryStore(db_path) as store:
        store.remember("alice", "city", "Paris")
        take(store.storage, tmp_path / "b", now=T0, version="test")
        store.remember("alice", "secret", SECRET.decode())  # after the backup
        store.remember("bob", "secret", SECRET.decode() + "-bob")
    result = restore(tmp_path / "b", db_path, cold_path_for(db_path), now=T0, busy_timeout_ms=500)
    hot = Path(result["set_aside"]["hot"])
    return hot, cold_path_for(db_path).with_name(f"memory-cold.db{hot.name[len('memory.db') :]}")


def test_a_forget_after_a_restore_erases_in_the_set_aside_files(db_path: Path, tmp_path: Path):
    hot_aside, cold_aside = _restored(db_path, tmp_path)
    assert SECRET in _bytes_of(hot_aside)
    assert set_aside.pairs(db_path, cold_path_for(db_path)) == [(hot_aside, cold_aside)]
    with MemoryStore(db_path) as store:
        assert store.forget("alice", "secret") == 0  # only in the set-aside files
        assert store.forget_user("bob")["memories"] == 0
    aside_keys = {(r["user_id"], r["key"]) for r in raw_rows(hot_aside, "memories")}
    assert aside_keys == {("alice", "city")}  # alice's secret and bob erased there too
    assert SECRET not in _bytes_of(hot_aside)
    assert SECRET not in _bytes_of(cold_aside)


def test_a_set_aside_file_that_cannot_be_opened_is_named_not_fatal(
    db_path: Path, tmp_path: Path
) -> None:
    hot_aside, _cold = _restored(db_path, tmp_path)
    hot_aside.write_bytes(b"not a database any more" * 200)
    with MemoryStore(db_path) as store:
        assert store.forget("alice", "city") == 1  # the live erasure still happens
        reached = set_aside.reach(
            store.storage,
            Selection(user_id="alice", namespace="", key="city"),
            actor="test",
            now=T0,
            reason="test",
        )
    assert list(reached["unreachable"]) == [str(hot_aside)]
