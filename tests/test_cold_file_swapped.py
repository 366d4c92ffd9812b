"""The cold file deleted or replaced while the service runs (issue 18, item 3).

The service keeps its cold connection open; a cold file deleted under it kept receiving the
moves, in an inode no one could open again: 100 of 100 demoted entries were in neither file,
with exit 0. Now a move into cold storage first checks that the path still names the file it
opened, and otherwise refuses with a clear error, leaving the entries hot.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import T0, raw_rows
from helpers.locks import integrity

from memkeeper import MemoryStore
from memkeeper.errors import ColdStorageChanged
from memkeeper.maintenance.runner import run_once
from memkeeper.paths import cold_path_for

SIDE = ("", "-wal", "-shm")


def _service(db_path: Path) -> tuple[MemoryStore, list[object]]:
    now: list[object] = [T0]
    store = MemoryStore(db_path, clock=lambda: now[0])
    for index in range(20):
        store.remember("alice", f"k{index}", f"value {index}", confidence=0.3)
    assert store.storage.cold(create=True) is not None  # the service has cold open
    now[0] = T0.replace(year=2028)
    return store, now


def _delete(cold: Path) -> None:
    for suffix in SIDE:
        Path(f"{cold}{suffix}").unlink(missing_ok=True)


def _replace(cold: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / "memory.db"
    with MemoryStore(other) as stranger:
        stranger.storage.cold(create=True)
    tmp = cold.with_name("incoming")
    shutil.copyfile(cold_path_for(other), tmp)
    tmp.replace(cold)  # a new inode at the same path, as a restore or an operator would


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_move_into_a_vanished_cold_file_is_refused_and_entries_stay_hot(
    db_path: Path, tmp_path: Path, how: str
) -> None:
    store, _now = _service(db_path)
    cold = cold_path_for(db_path)
    if how == "deleted":
        _delete(cold)
    else:
        _replace(cold, tmp_path)
    (result,) = run_once(store, ["demote"]).results
    assert result.status == "failed"
    assert "ColdStorageChanged" in (result.error or "")
    assert how in (result.error or "") and str(cold) in (result.error or "")
    hot = {row["key"] for row in raw_rows(db_path, "memories")}
    assert hot == {f"k{index}" for index in range(20)}  # nothing left the hot file
    assert len(store.list_memories("alice")) == 20
    with pytest.raises(ColdStorageChanged):
        store.storage.check_cold_file(store.storage.cold(create=False))  # type: ignore[arg-type]
    store.close()
    assert integrity(db_path) == ["ok"]


def test_moves_go_ahead_while_the_cold_file_is_the_one_opened(db_path: Path) -> None:
    store, _now = _service(db_path)
    (result,) = run_once(store, ["demote"]).results
    assert result.status == "ok" and result.total_changes == 20
    assert len(raw_rows(cold_path_for(db_path), "cold_memories")) == 20
    store.close()
