"""SQLite: a lock refused names a real holder, never the pid a killed holder left behind.

The ``jobs`` lock file holds the pid of its last exclusive holder (an ``undo``, a prune);
job runs hold the lock shared and write no pid. A holder killed while exclusive leaves its
pid in the file, so an ``undo`` refused by running jobs used to name that dead process.
The holders here are real second processes, as in life (tests/test_locks.py's style).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memkeeper import MemoryStore
from memkeeper.errors import LockBusy
from memkeeper.maintenance import locks
from memkeeper.maintenance.locks import job_lock, jobs_lock, lock_path

JOB_RUN = """
import sys
from pathlib import Path
from memkeeper.maintenance.locks import job_lock
lock = job_lock(Path(sys.argv[1]), "settle")
lock.acquire(0)
print("held", flush=True)
sys.stdin.readline()
lock.release()
"""


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "memory.db"
    MemoryStore(path).close()
    return path


@contextmanager
def a_job_running(db: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process running a job: ``job:settle`` exclusive and ``jobs`` shared."""
    child = subprocess.Popen(
        [sys.executable, "-c", JOB_RUN, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        yield child
    finally:
        child.kill()
        child.wait(timeout=10)


def a_dead_pid() -> int:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=30)
    return gone.pid


def test_an_undo_refused_by_a_running_job_names_it_not_a_killed_holder(db: Path) -> None:
    dead = a_dead_pid()
    lock_path(db, "jobs").write_text(f"{dead}\n")  # an undo killed while it held the lock
    with a_job_running(db) as job, pytest.raises(LockBusy) as refused:
        jobs_lock(db).acquire(0)
    message = str(refused.value)
    assert f"pid {dead}" not in message
    if locks.PROC_LOCKS.exists():  # Linux names the shared holder itself
        assert f"held by pid {job.pid}" in message
    else:
        assert "held by another process" in message


def test_without_the_kernels_list_the_refusal_says_another_process(
    db: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(locks, "PROC_LOCKS", tmp_path / "no-such-file")
    dead = a_dead_pid()
    lock_path(db, "jobs").write_text(f"{dead}\n")
    with a_job_running(db), pytest.raises(LockBusy) as refused:
        jobs_lock(db).acquire(0)
    assert "held by another process" in str(refused.value)
    assert f"pid {dead}" not in str(refused.value)


def test_a_job_taking_the_lock_shared_clears_a_killed_holders_pid(db: Path) -> None:
    lock_path(db, "jobs").write_text(f"{a_dead_pid()}\n")
    with job_lock(db, "settle").hold(0):
        assert lock_path(db, "jobs").read_text() == ""


def test_an_exclusive_holder_is_still_named_by_its_pid(db: Path) -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from memkeeper.maintenance.locks import"
            " jobs_lock; lock = jobs_lock(Path(sys.argv[1])); lock.acquire(0);"
            " print('held', flush=True); sys.stdin.readline()",
            str(db),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        with pytest.raises(LockBusy, match=f"held by pid {child.pid}"):
            job_lock(db, "merge").acquire(0)
    finally:
        child.kill()
        child.wait(timeout=10)
