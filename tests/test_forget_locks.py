"""A forget leaves every SQLite lock of its process as it was (issue 18, item 1).

The residue scan used to ``open()``/``mmap``/``close()`` the live ``memory.db``; ``close()``
cancels every POSIX lock the process holds on the file, SQLite's shared lock included. The
next short-lived process to close the database (a CLI ``recall``) then found itself alone,
checkpointed and deleted the ``-wal`` the long-lived process was still using, and the file
was corrupted. These tests read the kernel's lock table (``/proc/locks``), never the file.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.locks import integrity, needs_proc_locks, posix_locks

from memkeeper import MemoryStore
from memkeeper.storage.forgetting import finish_interrupted

pytestmark = needs_proc_locks


def _cli(db_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memkeeper", "--db", str(db_path), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _filled(db_path: Path) -> MemoryStore:
    store = MemoryStore(db_path)
    for i in range(5):
        store.remember("u", f"k{i}", f"value-{i}", namespace="p")
        store.remember("other", f"k{i}", f"theirs-{i}")
    store.add_note("u", "a note to forget", namespace="p")
    return store


FORGETS: dict[str, Callable[[MemoryStore], object]] = {
    "forget": lambda s: s.forget("u", "k1", namespace="p"),
    "forget_memory": lambda s: s.forget_memory(s.list_memories("u")[0].id),
    "forget_user": lambda s: s.forget_user("u"),
    "forget_namespace": lambda s: s.forget_namespace("u", "p"),
    "forget_user_rebuild": lambda s: s.forget_user("other"),  # many texts: VACUUM path
}


@pytest.mark.parametrize("name", list(FORGETS))
def test_a_forget_keeps_the_process_lock_on_the_database(db_path: Path, name: str) -> None:
    store = _filled(db_path)
    if name == "forget_user_rebuild":
        for i in range(40):
            store.remember("other", f"many{i}", f"text-{i}")
    before = posix_locks(db_path)
    assert before, "an open store holds a shared lock on its database"
    FORGETS[name](store)
    assert posix_locks(db_path) == before
    store.close()


def test_an_interrupted_erasure_rebuild_keeps_the_lock(db_path: Path) -> None:
    store = _filled(db_path)
    store.storage.hot.conn.execute("INSERT INTO pending_scrubs (at) VALUES ('2026-01-01')")
    before = posix_locks(db_path)
    assert finish_interrupted(store.storage)
    assert posix_locks(db_path) == before
    store.close()


def test_a_cli_exiting_after_a_forget_leaves_the_wal_and_the_file_intact(db_path: Path) -> None:
    store = _filled(db_path)
    store.forget("u", "k1", namespace="p")
    store.remember("u", "after", "written after the forget", namespace="p")
    wal = Path(f"{db_path}-wal")
    assert wal.exists()
    for _ in range(3):
        done = _cli(db_path, "recall", "other", "k2")
        assert done.returncode == 0, done.stderr
        # The agent still has the database open: the CLI must not think it was the last.
        assert wal.exists()
        for i in range(50):
            store.remember("u", f"more{_}-{i}", "x" * 200, namespace="p")
    assert integrity(db_path) == ["ok"]
    seen = _cli(db_path, "list", "--json")
    assert seen.returncode == 0, seen.stderr
    assert seen.stdout.count('"more2-49"') == 1  # the agent's writes are in the live file
    store.close()
    assert integrity(db_path) == ["ok"]
