"""One service per database, one job run at a time, and locks of killed processes taken over.

The other lock holder is always a real second process (a small Python child), as in life: the
service and a run-once, or a service and a second service.

No test here measures wall-clock time: on a loaded machine any "took at least / at most N
seconds" flakes. Each asserts the order of events instead — the waiter found the lock taken,
then the holder released it, then the job ran — with the holder releasing only when told.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers.databases import is_postgres

import memkeeper.maintenance.locks
import memkeeper.service.scheduler
from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.config import Config
from memkeeper.errors import EXIT_BUSY, LockBusy
from memkeeper.maintenance.locks import (
    ProcessLock,
    daemon_lock,
    jobs_lock,
    lock_path,
    service_state,
)
from memkeeper.maintenance.runner import run_job
from memkeeper.service.daemon import Daemon
from memkeeper.service.scheduler import ServiceJobs
from memkeeper.storage.postgres import job_locks
from memkeeper.storage.postgres.storage import PostgresStorage

pytestmark = pytest.mark.both_backends

LOCK_MODULES = (memkeeper.maintenance.locks, job_locks)
"""Where a lock's waits poll: the file locks' module and PostgreSQL's advisory locks'."""

HOLDER = """
import sys, time
from pathlib import Path
from memkeeper.maintenance.locks import daemon_lock, jobs_lock
if sys.argv[1].startswith("postgresql://"):  # the lock of a PostgreSQL memory: its storage's
    from memkeeper.storage.postgres.storage import PostgresStorage
    where = PostgresStorage(sys.argv[1])
else:
    where = Path(sys.argv[1])
lock = {"daemon": daemon_lock, "jobs": jobs_lock}[sys.argv[2]](where)
lock.acquire(0)
print("held", flush=True)
sys.stdin.readline()  # hold until the test says so (or the test ends and kills us)
lock.release()
print("released", flush=True)
time.sleep(60)
"""

WAIT = 30.0
"""Upper bound on waiting for an event that must happen; only reached when a test fails."""


class Holder:
    """A child process holding the ``which`` lock of a database until :meth:`release`."""

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
        """Tell the child to release the lock; returns once it has."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("release\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "released"
        self.released = True

    def still_holding(self) -> bool:
        return not self.released and self.process.poll() is None

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)


@contextmanager
def lock_holder(db: Path | str, which: str) -> Iterator[Holder]:
    """A child process holding the ``which`` lock of ``db`` until released or killed."""
    holder = Holder(db, which)
    try:
        yield holder
    finally:
        holder.kill()


class Events:
    """What happened, in order, across the test's threads."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self._lock = threading.Lock()
        self.refused = threading.Event()

    def add(self, event: str) -> None:
        with self._lock:
            self.log.append(event)
        if event == "refused":
            self.refused.set()

    def collapsed(self) -> list[str]:
        """The log with repeats of an event folded into one (polls repeat "refused")."""
        return [e for i, e in enumerate(self.log) if i == 0 or self.log[i - 1] != e]


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> Events:
    """Record each time a process-lock wait finds the lock taken and polls again.

    ``FileLock.acquire`` sleeps between attempts only when the lock is taken; its ``time``
    module is swapped for one whose ``sleep`` first records "refused".
    """
    recorded = Events()

    def sleep(seconds: float) -> None:
        recorded.add("refused")
        time.sleep(seconds)

    clock = types.SimpleNamespace(monotonic=time.monotonic, sleep=sleep)
    for module in LOCK_MODULES:
        monkeypatch.setattr(module, "time", clock)
    return recorded


class VirtualClock:
    """The process-lock module's clock, advanced only by its own sleeps.

    A wait of N seconds then polls for exactly N seconds of this clock, however slowly the
    machine runs: what the test checks is how long memkeeper *meant* to wait.
    """

    def __init__(self, events: Events) -> None:
        self.events = events
        self.now = 1000.0
        self.slept = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.events.add("refused")
        self.now += seconds
        self.slept += seconds
        time.sleep(0)


@pytest.fixture
def lock_clock(monkeypatch: pytest.MonkeyPatch, events: Events) -> VirtualClock:
    clock = VirtualClock(events)
    for module in LOCK_MODULES:
        monkeypatch.setattr(module, "time", clock)
    return clock


class RecordingStop(threading.Event):
    """A service's stop event whose waits (between lock polls) are recorded as "refused"."""

    def __init__(self, events: Events) -> None:
        super().__init__()
        self.events = events

    def wait(self, timeout: float | None = None) -> bool:
        if not self.is_set():
            self.events.add("refused")
        return super().wait(timeout)


def release_after_first_refusal(holder: Holder, events: Events) -> threading.Thread:
    """A thread that, once the waiter found the lock taken, makes the holder release it."""

    def run() -> None:
        if events.refused.wait(WAIT):
            holder.release()
            events.add("released")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def db(db_path: Path | str) -> Path | str:
    """The memory whose locks the tests take: a file, or the PostgreSQL test database."""
    MemoryStore(db_path).close()
    return db_path


@pytest.fixture
def where(db: Path | str) -> Iterator[Path | PostgresStorage]:
    """What the lock functions take for ``db``: the file's path, or the PostgreSQL storage."""
    if not is_postgres(db):
        yield Path(db)
        return
    storage = PostgresStorage(str(db))
    yield storage
    storage.close()


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        "[service]\nlock_wait_seconds = 0.5\n\n[jobs.summarize]\nenabled = false\n",
        encoding="utf-8",
    )
    return path


def cli(db: Path | str, config: Path, *args: str) -> int:
    return main(["--db", str(db), "--config", str(config), *args])


# -- one service per database ---------------------------------------------------------------


@pytest.mark.sqlite_only  # on PostgreSQL a second service stands by (tests/postgres/test_fleet*)
def test_a_second_service_is_refused_at_once(
    db: Path | str, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with lock_holder(db, "daemon") as first:
        code = cli(db, config_file, "run")
        # Refused while the first service still runs: it did not wait for it to go away
        # (the holder never releases; waiting for it would never end).
        assert first.still_holding()
    assert code == EXIT_BUSY == 75
    err = capsys.readouterr().err
    assert "another memkeeper service" in err
    assert f"pid {first.pid}" in err
    assert str(db) in err
    assert "a fleet of services on several hosts needs a PostgreSQL memory" in err


@pytest.mark.sqlite_only  # on PostgreSQL a second service stands by (tests/postgres/test_fleet*)
def test_second_service_refused_by_the_library_too(db: Path | str) -> None:
    with lock_holder(db, "daemon"), pytest.raises(LockBusy, match="already running"):
        Daemon(db=db, config=Config(), config_path=None, handle_signals=False).run()


def test_service_state_reports_the_holder(db: Path | str, where: Path | PostgresStorage) -> None:
    def state() -> dict[str, object]:  # PostgreSQL adds the fleet (leader, members, runs)
        found = service_state(where)
        return {"running": found["running"], "pid": found["pid"]}

    assert state() == {"running": False, "pid": None}  # no lock file yet
    with lock_holder(db, "daemon") as holder:
        assert state() == {"running": True, "pid": holder.pid}
    assert state() == {"running": False, "pid": None}


# -- stale locks --------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["daemon", "jobs"])
def test_a_lock_left_by_a_killed_process_is_taken_over(
    db: Path | str, where: Path | PostgresStorage, which: str
) -> None:
    make = daemon_lock if which == "daemon" else jobs_lock
    on_file = not is_postgres(db)
    with lock_holder(db, which) as holder:
        with pytest.raises(LockBusy, match=f"held by pid {holder.pid}"):
            make(where).acquire(0)
        holder.process.send_signal(signal.SIGKILL)
        holder.process.wait(timeout=10)
        # The file still names the dead holder; the kernel dropped its flock all the same.
        # (PostgreSQL drops a session's advisory locks when its connection goes.)
        if on_file:
            assert lock_path(db, which).read_text().strip() == str(holder.pid)
        lock = make(where)
        if on_file:
            lock.acquire(0)
        else:
            _acquire_once_the_server_noticed(lock)
        try:
            if on_file:
                assert lock_path(db, which).read_text().strip() != str(holder.pid)
            assert lock.held
        finally:
            lock.release()


def _acquire_once_the_server_noticed(lock: ProcessLock) -> None:
    """Take a lock whose holder was just killed. The kernel drops a flock at once; the
    server ends a killed client's session when it reads the closed socket, a moment later,
    so this retries (bounded; a lock that stays taken fails the test)."""
    deadline = time.monotonic() + WAIT
    while True:
        try:
            lock.acquire(0)
            return
        except LockBusy:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


# -- run-once and the job lock ---------------------------------------------------------------


def test_run_once_waits_for_the_lock_then_gives_up(
    db: Path | str, config_file: Path, capsys: pytest.CaptureFixture[str], lock_clock: VirtualClock
) -> None:
    with lock_holder(db, "jobs") as holder:
        code = cli(db, config_file, "run-once")
        assert holder.still_holding()  # it gave up while the lock was still taken
    assert code == EXIT_BUSY
    # It polled the taken lock for its whole lock_wait_seconds (0.5 s), then gave up.
    assert set(lock_clock.events.log) == {"refused"}
    assert lock_clock.slept == pytest.approx(0.5, abs=0.11)
    err = capsys.readouterr().err
    assert f"held by pid {holder.pid}" in err
    assert "after waiting 0.5 s" in err
    with MemoryStore(db) as store:
        assert store.job_runs() == []  # nothing ran, nothing recorded


def test_run_once_waits_for_a_running_job_then_runs(
    db: Path | str, config_file: Path, tmp_path: Path, events: Events
) -> None:
    patient = tmp_path / "patient.toml"
    patient.write_text(
        config_file.read_text().replace("lock_wait_seconds = 0.5", "lock_wait_seconds = 60")
    )
    with lock_holder(db, "jobs") as holder:
        releaser = release_after_first_refusal(holder, events)
        code = cli(db, patient, "run-once", "--job", "expire")
        events.add("ran")
        releaser.join(WAIT)
    assert code == 0
    # It found the lock taken and kept waiting; only after the holder released did it run.
    assert events.collapsed() == ["refused", "released", "ran"]
    with MemoryStore(db) as store:
        assert [(run.job, run.status) for run in store.job_runs()] == [("expire", "ok")]


def test_run_once_just_runs_while_the_service_is_idle(
    db: Path | str, config_file: Path, events: Events
) -> None:
    """The service holds only its instance lock between jobs; the job lock is free."""
    with lock_holder(db, "daemon") as service:
        code = cli(db, config_file, "run-once", "--job", "settle")
        assert service.still_holding()
    assert code == 0
    assert events.log == []  # the job lock was taken at the first try: no wait at all


def test_run_job_raises_lock_busy_and_records_nothing(
    db: Path | str, lock_clock: VirtualClock
) -> None:
    with MemoryStore(db) as store, lock_holder(db, "jobs") as holder:
        with pytest.raises(LockBusy, match=r"after waiting 0\.3 s"):
            run_job(store, "expire", now=store.now(), lock_wait_seconds=0.3)
        assert holder.still_holding()
        assert lock_clock.slept == pytest.approx(0.3, abs=0.11)
        assert store.job_runs() == []


# -- the service and a run-once -------------------------------------------------------------


@pytest.fixture
def quick_service_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The service re-checks the job lock every 1 s; 50 ms keeps these tests short."""
    monkeypatch.setattr(memkeeper.service.scheduler, "LOCK_POLL_SECONDS", 0.05)


@pytest.mark.usefixtures("quick_service_polls")
def test_service_job_waits_for_a_run_once_then_runs(db: Path | str) -> None:
    events = Events()
    with MemoryStore(db) as store, lock_holder(db, "jobs") as holder:
        jobs = ServiceJobs(store, RecordingStop(events))
        releaser = release_after_first_refusal(holder, events)
        result = jobs.run_scheduled("expire")
        events.add("ran")
        releaser.join(WAIT)
        assert result is not None
        assert result.status == "ok"
        assert events.collapsed() == ["refused", "released", "ran"]
        assert [(run.job, run.status) for run in store.job_runs()] == [("expire", "ok")]


@pytest.mark.usefixtures("quick_service_polls")
def test_service_job_waiting_for_the_lock_stops_promptly(db: Path | str) -> None:
    events = Events()
    with MemoryStore(db) as store, lock_holder(db, "jobs") as holder:
        stop = RecordingStop(events)
        jobs = ServiceJobs(store, stop)
        stopper = threading.Thread(
            target=lambda: events.refused.wait(WAIT) and stop.set(), daemon=True
        )
        stopper.start()
        assert jobs.run_scheduled("expire") is None
        events.add("returned")
        stopper.join(WAIT)
        # Stopped while still waiting: it returned with the lock still held by the other
        # process, ran nothing and recorded nothing.
        assert holder.still_holding()
        assert events.collapsed() == ["refused", "returned"]
        assert store.job_runs() == []
