"""A killed backup's leftovers do not make the next backup refuse the directory (issue 18,
item 5).

A backup killed mid-copy left ``memory.db.partial-journal`` (and other temporary names)
behind, which the next ``backup DIR`` took for a stranger's file: exit 73. Every name the
backup itself writes is recognised, and what a killed run left is removed first.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import T0

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.storage.sqlite.backup import take
from memkeeper.storage.sqlite.backup_check import verify
from memkeeper.storage.sqlite.backup_prune import prune

EXIT_CANT_CREATE = 73

LEFTOVERS = [
    "memory.db.partial",
    "memory.db.partial-journal",
    "memory.db.partial-wal",
    "memory.db.partial-shm",
    "memory-cold.db.partial",
    "memory-cold.db.partial-journal",
    "memory.db.partial.scrub-1.lock",
    "manifest.json.partial",
    "memory.db-journal",  # a stale journal beside a final file: must never meet the new copy
]

KILLED_MID_COPY = textwrap.dedent(
    """
    import os, signal, sys
    from memkeeper import MemoryStore
    from memkeeper.storage.sqlite import backup
    from memkeeper.clock import system_now

    def die(path):
        os.kill(os.getpid(), signal.SIGKILL)  # copied, not yet switched to a journal file

    backup.to_rollback_journal = die
    with MemoryStore(sys.argv[1]) as store:
        backup.take(store.storage, sys.argv[2], now=system_now(), version="test")
    """
)


@pytest.fixture
def store(db_path: Path) -> MemoryStore:
    store = MemoryStore(db_path)
    for index in range(20):
        store.remember("alice", f"k{index}", f"value {index}")
    return store


def _litter(directory: Path) -> None:
    directory.mkdir(exist_ok=True)
    for name in LEFTOVERS:
        (directory / name).write_bytes(b"left by a killed run " * 100)


@pytest.mark.parametrize("earlier", [True, False], ids=["over-a-backup", "first-backup"])
def test_backup_accepts_and_clears_a_killed_runs_leftovers(
    store: MemoryStore, db_path: Path, tmp_path: Path, earlier: bool
) -> None:
    dest = tmp_path / "b"
    if earlier:
        take(store.storage, dest, now=T0, version="test")
    _litter(dest)
    store.close()
    assert main(["--db", str(db_path), "backup", str(dest)]) == 0
    assert sorted(p.name for p in dest.iterdir()) == [
        "manifest.json",
        "memory-cold.db",
        "memory.db",
    ]
    assert verify(dest)["files"]["hot"]["rows"]["memories"] == 20


def test_a_backup_killed_mid_copy_does_not_block_the_next(
    store: MemoryStore, db_path: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "b"
    take(store.storage, dest, now=T0, version="test")
    store.close()
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_MID_COPY, str(db_path), str(dest)], check=False
    )
    assert killed.returncode < 0  # it really was killed
    assert any(".partial" in p.name for p in dest.iterdir())
    assert main(["--db", str(db_path), "backup", str(dest)]) == 0
    assert not any(".partial" in p.name for p in dest.iterdir())
    verify(dest)


def test_prune_clears_a_killed_prunes_leftovers(
    store: MemoryStore, db_path: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "b"
    take(store.storage, dest, now=T0, version="test")
    store.forget("alice", "k1")
    _litter(dest)
    manifest = prune(store.storage, dest, now=T0, version="test")
    assert manifest["pruned"]["memories"] == 1
    assert sorted(p.name for p in dest.iterdir()) == [
        "manifest.json",
        "memory-cold.db",
        "memory.db",
    ]
    verify(dest)
    store.close()


def test_a_strangers_file_is_still_refused(store: MemoryStore, db_path: Path, tmp_path: Path):
    dest = tmp_path / "b"
    take(store.storage, dest, now=T0, version="test")
    (dest / "memory.db.partial-journal.bak").write_text("not ours")
    store.close()
    assert main(["--db", str(db_path), "backup", str(dest)]) == EXIT_CANT_CREATE
