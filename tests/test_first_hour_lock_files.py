"""A database nobody is working on has no lock file beside it.

A fresh ``run-once`` used to leave nine ``*.lock`` files next to the database (``jobs``, one
per job, and the service's). A SQLite lock file now exists only while someone holds it: its
last holder removes it. Removing a flock's file is safe only if a process that waited on the
removed file notices and locks the one now at the path; the tests below check that, with
processes hammering the same locks, exclusive and shared, and counting who is inside.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memkeeper import LockBusy, MemoryStore
from memkeeper.cli import main
from memkeeper.maintenance.locks import daemon_lock, job_lock, jobs_lock, lock_path


def _beside(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.iterdir())


def _locks(db: Path) -> list[str]:
    return [name for name in _beside(db) if name.endswith(".lock")]


def test_a_fresh_run_once_leaves_only_the_database(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    assert main(["--db", str(db), "run-once"]) == 0
    assert _beside(db) == ["memory.db"]
    assert main(["--db", str(db), "run-once", "--job", "prune"]) == 0  # jobs, exclusively
    assert _beside(db) == ["memory.db"]


def test_a_lock_file_is_there_while_held_and_gone_after(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    MemoryStore(db).close()
    with MemoryStore(db) as store:
        with daemon_lock(store.storage).hold():
            assert lock_path(db, "daemon").read_text().strip() == str(os.getpid())
        with job_lock(store.storage, "merge").hold():
            assert _locks(db) == ["memory.db.job-merge.lock", "memory.db.jobs.lock"]
        assert _locks(db) == []


def test_two_shared_holders_the_last_one_removes_it(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    MemoryStore(db).close()
    first, second = job_lock(db, "settle"), job_lock(db, "expire")  # both hold jobs shared
    first.acquire(0)
    second.acquire(0)
    first.release()
    assert lock_path(db, "jobs").exists()  # the second still holds it
    with pytest.raises(LockBusy, match="held by"):
        jobs_lock(db).acquire(0)  # an undo still waits for the second
    second.release()
    assert _beside(db) == ["memory.db"]
    with jobs_lock(db).hold(0):  # free now
        pass


WORKER = """
import os, sys, time
from pathlib import Path
from memkeeper.maintenance import locks

locks.POLL_SECONDS = 0.001
db, log, role, rounds = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
out = os.open(log, os.O_WRONLY | os.O_APPEND)
for _ in range(rounds):
    lock = locks.jobs_lock(db) if role == "X" else locks.job_lock(db, sys.argv[5])
    lock.acquire(60)
    os.write(out, f"{role}+ {os.getpid()}\\n".encode())
    time.sleep(0.0005)
    os.write(out, f"{role}- {os.getpid()}\\n".encode())
    lock.release()
"""


def test_removing_the_files_keeps_every_exclusion(tmp_path: Path) -> None:
    """Undo-like exclusive holders of ``jobs`` and job runs (``job:<name>`` exclusive,
    ``jobs`` shared) race on the same files, which their holders keep removing: an
    exclusive holder is never inside with anyone, two runs of one job never together."""
    db = tmp_path / "memory.db"
    MemoryStore(db).close()
    log = tmp_path / "inside.log"
    log.write_text("")
    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")
    roles = [("X", ""), ("X", ""), ("S", "merge"), ("S", "merge"), ("S", "settle")]
    workers = [
        subprocess.Popen([sys.executable, str(script), str(db), str(log), role, "40", job])
        for role, job in roles
    ]
    for worker in workers:
        assert worker.wait(timeout=240) == 0
    exclusive: set[str] = set()
    shared: dict[str, str] = {}  # pid -> its job
    job_of = {str(w.pid): job for w, (_role, job) in zip(workers, roles, strict=True)}
    events = log.read_text().splitlines()
    assert len(events) == 2 * 40 * len(roles)
    for event in events:
        kind, pid = event.split()
        if kind == "X+":
            assert not exclusive and not shared, event
            exclusive.add(pid)
        elif kind == "X-":
            exclusive.discard(pid)
        elif kind == "S+":
            assert not exclusive, event
            assert job_of[pid] not in shared.values(), event  # one run of a job at a time
            shared[pid] = job_of[pid]
        else:
            shared.pop(pid)
    assert _beside(db) == ["inside.log", "memory.db", "worker.py"]
