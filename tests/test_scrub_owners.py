"""Another process's forget is not an interrupted one (issue 18, item 4).

A forget commits its erasure with a ``pending_scrubs`` row and then scrubs. Job runs and other
forgets took every such row for an interrupted erasure and rebuilt both files under the live
owner (``LockBusy`` after committing, slow forgets). Only a row whose owner is gone — its
flock released by the kernel — is interrupted. And a SQLite failure during the scrub's
``VACUUM`` is memkeeper's own error, never a raw ``sqlite3.DatabaseError``.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import files_containing, raw_rows

from memkeeper import MemoryStore
from memkeeper.errors import DatabaseError, MemkeeperError
from memkeeper.maintenance.runner import run_once
from memkeeper.storage.forgetting import finish_interrupted
from memkeeper.storage.sqlite import scrub_owners

OWNER = textwrap.dedent(
    """
    import sys
    from memkeeper import MemoryStore
    from memkeeper.storage import transitions

    def pause(step):
        if step == "forget-hot-committed":  # committed, not scrubbed yet
            print("paused", flush=True)
            sys.stdin.readline()

    store = MemoryStore(sys.argv[1])
    transitions.step_hook = pause
    store.forget("owner", "secret")
    print("done", flush=True)
    store.close()
    """
)


def _paused_owner(db_path: Path) -> subprocess.Popen[str]:
    with MemoryStore(db_path) as store:
        store.remember("owner", "secret", "OWNED-SECRET-VALUE")
        store.remember("bystander", "k", "v")
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(db_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None and owner.stdout.readline().strip() == "paused"
    return owner


def _pending(db_path: Path) -> list[int]:
    return [row["id"] for row in raw_rows(db_path, "pending_scrubs")]


def test_a_live_owners_scrub_is_left_to_it(db_path: Path) -> None:
    owner = _paused_owner(db_path)
    try:
        (marker,) = _pending(db_path)
        assert scrub_owners.lock_path(db_path, marker).exists()
        with MemoryStore(db_path) as other:
            assert finish_interrupted(other.storage) is False  # not interrupted: running
            other.forget("bystander", "k")  # another forget leaves the owner's row alone
            (result,) = run_once(other, ["expire"]).results
            assert result.status == "ok"
        assert marker in _pending(db_path)
    finally:
        assert owner.stdin is not None and owner.stdout is not None
        owner.stdin.write("\n")
        owner.stdin.flush()
        assert owner.stdout.readline().strip() == "done"
        assert owner.wait(timeout=60) == 0
    assert _pending(db_path) == []
    assert not scrub_owners.lock_path(db_path, marker).exists()
    assert files_containing(db_path, b"OWNED-SECRET-VALUE") == []


def test_an_owner_killed_mid_scrub_leaves_an_interrupted_erasure_others_finish(
    db_path: Path,
) -> None:
    owner = _paused_owner(db_path)
    (marker,) = _pending(db_path)
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait(timeout=60)
    with MemoryStore(db_path) as other:
        assert finish_interrupted(other.storage) is True
        assert _pending(db_path) == []
        assert finish_interrupted(other.storage) is False
    assert not scrub_owners.lock_path(db_path, marker).exists()
    assert files_containing(db_path, b"OWNED-SECRET-VALUE") == []


def test_a_forget_meeting_a_dead_owners_row_rebuilds_and_clears_it(db_path: Path) -> None:
    owner = _paused_owner(db_path)
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait(timeout=60)
    with MemoryStore(db_path) as other:
        other.forget("bystander", "k")
    assert _pending(db_path) == []
    assert files_containing(db_path, b"OWNED-SECRET-VALUE") == []


def _corrupt_messages(db_path: Path) -> None:
    """Garble the b-tree pages of ``messages`` (a table a memory forget does not read)."""
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = [
        row[0]
        for row in conn.execute("SELECT pageno FROM dbstat WHERE name = 'messages' AND pageno > 1")
    ]
    conn.close()
    with db_path.open("r+b") as raw:  # no store has the file open here
        for page in pages:
            raw.seek((page - 1) * page_size)
            raw.write(b"\x55" * 64)


def test_a_vacuum_on_a_corrupt_file_raises_memkeepers_own_error(db_path: Path) -> None:
    with MemoryStore(db_path) as store:
        for index in range(70):  # more texts than the scan takes: the forget rebuilds
            store.remember("u", f"key{index:03d}", f"v{index:03d}x")
        for index in range(300):
            store.append_message("chat", "s", "user", f"message {index} " + "x" * 200)
    _corrupt_messages(db_path)
    store = MemoryStore(db_path)
    try:
        with pytest.raises(MemkeeperError) as raised:
            store.forget_user("u")
        assert isinstance(raised.value, DatabaseError)
        assert not isinstance(raised.value, sqlite3.Error)
        assert "the erasure is committed" in str(raised.value)
        assert "integrity_check" in str(raised.value)
    finally:
        store.close()
