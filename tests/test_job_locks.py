"""Per-job locks: a run of one job never waits for a run of another; the same job waits or is
refused; undo waits for every running job; a killed holder's lock is taken over.

The other holder is always a real second process (a small Python child holding the lock a
job run of that name holds), as a run on another host would be. No test measures time: each
asserts the order of events (the waiter found the lock taken, then the holder released it,
then it ran), with the holder releasing only when told.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers.databases import is_postgres

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.errors import EXIT_BUSY, LockBusy
from memkeeper.maintenance.locks import EXCLUSIVE_JOBS, job_lock, jobs_lock
from memkeeper.maintenance.runner import run_job
from memkeeper.maintenance.undo import undo_run
from memkeeper.storage import job_runs

pytestmark = pytest.mark.both_backends

HOLDER = """
import sys, time
from pathlib import Path
from memkeeper.maintenance.locks import job_lock, jobs_lock
if sys.argv[1].startswith("postgresql://"):
    from memkeeper.storage.postgres.storage import PostgresStorage
    where = PostgresStorage(sys.argv[1])
else:
    where = Path(sys.argv[1])
lock = jobs_lock(where) if sys.argv[2] == "jobs" else job_lock(where, sys.argv[2])
lock.acquire(0)
print("held", flush=True)
sys.stdin.readline()
lock.release()
print("released", flush=True)
time.sleep(60)
"""

WAIT = 30.0
"""Upper bound on waiting for an event that must happen; only reached when a test fails."""


class Holder:
    """A child process holding the lock of job ``which`` (``jobs``: undo's) until released."""

    def __init__(self, db: Path | str, which: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(db), which],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "held"
        self.released = False

    @property
    def pid(self) -> int:
        return self.process.pid

    def release(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("release\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "released"
        self.released = True

    def still_holding(self) -> bool:
        return not self.released and self.process.poll() is None


@contextmanager
def holding(db: Path | str, which: str) -> Iterator[Holder]:
    holder = Holder(db, which)
    try:
        yield holder
    finally:
        holder.process.kill()
        holder.process.wait(timeout=10)


@pytest.fixture
def db(db_path: Path | str) -> Path | str:
    MemoryStore(db_path).close()
    return db_path


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text("[service]\nlock_wait_seconds = 0.2\n", encoding="utf-8")
    return path


def cli(db: Path | str, config: Path, *args: str) -> int:
    return main(["--db", str(db), "--config", str(config), *args])


def release_when(holder: Holder, waiting: threading.Event, events: list[str]) -> threading.Thread:
    """A thread that makes ``holder`` release once the other side found the lock taken.

    ``released`` is listed just before the release: the waiter takes the lock the moment it
    is free, and listed after, it could come after the waiter's own event (a failure seen
    once in a full run)."""

    def run() -> None:
        if waiting.wait(WAIT):
            events.append("released")
            holder.release()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_two_different_jobs_run_at_once(db: Path | str, config_file: Path) -> None:
    """A summarize running elsewhere does not hold up a run-once of expire, nor of merge."""
    with holding(db, "summarize") as summarize:
        assert cli(db, config_file, "run-once", "--job", "expire", "--wait", "0") == 0
        with MemoryStore(db) as store:
            result = run_job(store, "merge", now=store.now(), lock_wait_seconds=0)
            assert result.status in ("ok", "skipped")
        assert summarize.still_holding()
    with MemoryStore(db) as store:
        assert {run.job for run in store.job_runs()} == {"expire", "merge"}


def test_the_same_job_is_refused_naming_its_holder(
    db: Path | str, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with holding(db, "expire") as expire:
        code = cli(db, config_file, "run-once", "--job", "expire", "--wait", "0")
        assert expire.still_holding()
        # Another job is not held up by it.
        assert cli(db, config_file, "run-once", "--job", "settle", "--wait", "0") == 0
    assert code == EXIT_BUSY
    err = capsys.readouterr().err
    assert "the expire job lock" in err
    host = " on " if is_postgres(db) else ""
    assert f"held by pid {expire.pid}{host}" in err
    with MemoryStore(db) as store:
        assert [run.job for run in store.job_runs()] == ["settle"]


def test_the_same_job_waits_then_runs(db: Path | str) -> None:
    events: list[str] = []
    refused = threading.Event()
    with MemoryStore(db) as store, holding(db, "expire") as expire:
        releaser = release_when(expire, refused, events)
        try:
            run_job(store, "expire", now=store.now(), lock_wait_seconds=0)
        except LockBusy:
            events.append("refused")
            refused.set()
        result = run_job(store, "expire", now=store.now(), lock_wait_seconds=WAIT)
        events.append("ran")
        releaser.join(WAIT)
        assert result.status == "ok"
    assert events == ["refused", "released", "ran"]


def test_undo_waits_for_a_running_job(db: Path | str) -> None:
    """undo holds the jobs lock exclusively: a job of any name running elsewhere holds it
    up, and once that job ends the undo runs."""
    with MemoryStore(db) as store:
        store.remember("ann", "city", "Oslo")
        done = run_job(store, "expire", now=store.now())
        events: list[str] = []
        refused = threading.Event()
        with holding(db, "summarize") as summarize:
            with pytest.raises(LockBusy, match="job run lock"):
                undo_run(store, done.run_id, lock_wait_seconds=0)
            events.append("refused")
            refused.set()
            releaser = release_when(summarize, refused, events)
            report = undo_run(store, done.run_id, lock_wait_seconds=WAIT)
            events.append("undone")
            releaser.join(WAIT)
        assert events == ["refused", "released", "undone"]
        assert report.run_id in {run.run_id for run in store.job_runs()}


def test_no_job_starts_while_an_undo_runs(db: Path | str) -> None:
    with MemoryStore(db) as store, holding(db, "jobs") as undo:
        with pytest.raises(LockBusy, match=f"held by pid {undo.pid}"):
            run_job(store, "summarize", now=store.now(), lock_wait_seconds=0)
        assert store.job_runs() == []


@pytest.mark.parametrize("name", sorted(EXCLUSIVE_JOBS))
def test_prune_runs_alone(db: Path | str, name: str) -> None:
    """Prune counts active facts that expire, demote and merge lower: it waits for them (for
    every job), and they wait for it."""
    with MemoryStore(db) as store:
        with holding(db, "expire"), pytest.raises(LockBusy):
            run_job(store, name, now=store.now(), lock_wait_seconds=0)
        with holding(db, name), pytest.raises(LockBusy):
            run_job(store, "merge", now=store.now(), lock_wait_seconds=0)
        assert store.job_runs() == []


def test_a_run_closes_only_its_own_jobs_abandoned_rows(db: Path | str) -> None:
    """A summarize running on another host has a ``running`` row: an expire run here leaves
    it alone (it once marked every running row interrupted, under the one lock), while a
    killed expire's row is closed."""
    with MemoryStore(db) as store, holding(db, "summarize"):
        now = store.now()
        job_runs.record_start(store.storage, "live-summarize", "summarize", "manual", None, now)
        job_runs.record_start(store.storage, "dead-expire", "expire", "manual", None, now)
        run_job(store, "expire", now=now, lock_wait_seconds=0)
        status = {run.run_id: run.status for run in store.job_runs()}
    assert status["live-summarize"] == "running"
    assert status["dead-expire"] == "interrupted"


def test_a_killed_holders_job_lock_is_taken_over(db: Path | str) -> None:
    with MemoryStore(db) as store, holding(db, "expire") as holder:
        lock = job_lock(store.storage, "expire")
        with pytest.raises(LockBusy):
            lock.acquire(0)
        holder.process.send_signal(signal.SIGKILL)
        holder.process.wait(timeout=10)
        # The kernel drops a flock at once; the server ends a killed client's session when
        # it reads the closed socket, a moment later: retry, bounded.
        deadline = time.monotonic() + WAIT
        while True:
            try:
                lock.acquire(0)
                break
            except LockBusy:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)
        try:
            assert lock.held
            with MemoryStore(db) as other, pytest.raises(LockBusy):
                jobs_lock(other.storage).acquire(0)  # while it holds, an undo is kept out
        finally:
            lock.release()


def test_a_new_leader_marks_the_dead_runs_of_jobs_not_running_elsewhere(db: Path | str) -> None:
    """A summarize runs on another host while a new leader starts: the dead leader's expire
    run is marked interrupted (its lock is free), the live summarize's row is left alone
    (with one lock for every job, nothing could be marked while any job ran)."""
    from memkeeper.service.scheduler import mark_abandoned_runs

    with MemoryStore(db) as store, holding(db, "summarize"):
        now = store.now()
        job_runs.record_start(store.storage, "live-summarize", "summarize", "manual", None, now)
        job_runs.record_start(store.storage, "dead-expire", "expire", "schedule", None, now)
        assert mark_abandoned_runs(store) == 1
        status = {run.run_id: run.status for run in store.job_runs()}
    assert status == {"live-summarize": "running", "dead-expire": "interrupted"}
