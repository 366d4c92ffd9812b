"""restore-backup is refused while another process uses the database (issue 18, item 2).

"In use" is asked of SQLite's locks, not inferred from the ``-wal`` beside the file: once a
forget had dropped an agent's locks (item 1), the old check's own close deleted the agent's
WAL and the restore went ahead, swapping the files under a server whose next writes landed in
``memory.db.replaced-*``.
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
from helpers import T0, raw_rows
from helpers.locks import integrity

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.config import Config, DatabaseSection
from memkeeper.errors import LockBusy
from memkeeper.maintenance.backup_restore import restore
from memkeeper.paths import cold_path_for
from memkeeper.storage.sqlite.backup import take

EXIT_BUSY = 75

AGENT = textwrap.dedent(
    """
    import sys
    from memkeeper import MemoryStore
    store = MemoryStore(sys.argv[1])
    store.remember("agent", "k", "before")
    store.remember("agent", "secret", "to forget")
    store.forget("agent", "secret")
    print("ready", flush=True)
    for line in sys.stdin:  # one write per line the test sends
        store.remember("agent", line.strip(), "acknowledged")
        print("written", flush=True)
    store.close()
    """
)


@pytest.fixture
def backup(db_path: Path, tmp_path: Path) -> Path:
    with MemoryStore(db_path) as store:
        store.remember("alice", "city", "Paris")
        take(store.storage, tmp_path / "b", now=T0, version="test")
    return tmp_path / "b"


def _restore(backup: Path, db_path: Path) -> dict:
    return restore(backup, db_path, cold_path_for(db_path), now=T0, busy_timeout_ms=200)


def _agent(db_path: Path) -> subprocess.Popen[str]:
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, str(db_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert agent.stdout is not None and agent.stdout.readline().strip() == "ready"
    return agent


def _write(agent: subprocess.Popen[str], key: str) -> None:
    assert agent.stdin is not None and agent.stdout is not None
    agent.stdin.write(f"{key}\n")
    agent.stdin.flush()
    assert agent.stdout.readline().strip() == "written"


def test_restore_is_refused_while_an_agent_that_forgot_keeps_the_database_open(
    backup: Path, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = _agent(db_path)
    try:
        with pytest.raises(LockBusy, match="open in another process"):
            _restore(backup, db_path)
        assert main(["--db", str(db_path), "restore-backup", str(backup), "--yes"]) == EXIT_BUSY
        assert "open in another process" in capsys.readouterr().err
        for index in range(10):
            _write(agent, f"after-{index}")
    finally:
        assert agent.stdin is not None
        agent.stdin.close()
        assert agent.wait(timeout=60) == 0
    assert [p.name for p in db_path.parent.iterdir() if ".replaced-" in p.name] == []
    keys = {row["key"] for row in raw_rows(db_path, "memories")}
    assert {f"after-{index}" for index in range(10)} <= keys  # every write is in the live file
    assert integrity(db_path) == ["ok"]


def test_restore_goes_ahead_once_the_agent_is_gone_even_if_killed(
    backup: Path, db_path: Path
) -> None:
    agent = _agent(db_path)
    _write(agent, "unflushed")
    os.kill(agent.pid, signal.SIGKILL)  # leaves its -wal and -shm behind
    agent.wait(timeout=60)
    assert Path(f"{db_path}-wal").exists()
    result = _restore(backup, db_path)
    aside = Path(result["set_aside"]["hot"])
    assert "unflushed" in {row["key"] for row in raw_rows(aside, "memories")}  # WAL folded in
    assert {row["key"] for row in raw_rows(db_path, "memories")} == {"city"}
    assert integrity(db_path) == ["ok"]


def test_opening_while_a_restore_holds_the_files_is_busy_not_broken(
    backup: Path, db_path: Path
) -> None:
    # What the restore holds while it copies: the file to itself, exclusively.
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(LockBusy, match="locked exclusively"):
            MemoryStore(db_path, config=Config(database=DatabaseSection(busy_timeout_ms=100)))
    finally:
        holder.execute("COMMIT")
        holder.close()
    with MemoryStore(db_path) as store:
        assert store.recall("alice", "city").value == "Paris"
