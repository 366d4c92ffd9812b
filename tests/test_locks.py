"""One service per database, one job run at a time, and locks of killed processes taken over.

The other lock holder is always a real second process (a small Python child), as in life: the
service and a run-once, or a service and a second service.
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

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.config import Config
from memkeeper.daemon import Daemon, service_state
from memkeeper.errors import EXIT_BUSY, LockBusy
from memkeeper.locks import daemon_lock, jobs_lock, lock_path
from memkeeper.runner import run_job
from memkeeper.scheduler import ServiceJobs

HOLDER = """
import sys, time
from pathlib import Path
from memkeeper.locks import daemon_lock, jobs_lock
lock = {"daemon": daemon_lock, "jobs": jobs_lock}[sys.argv[2]](Path(sys.argv[1]))
lock.acquire(0)
print("held", flush=True)
time.sleep(float(sys.argv[3]))
lock.release()
print("released", flush=True)
time.sleep(60)
"""


@contextmanager
def lock_holder(db: Path, which: str, seconds: float = 60.0) -> Iterator[subprocess.Popen[str]]:
    """A child process holding the ``which`` lock of ``db`` for ``seconds``."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db), which, str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        yield child
    finally:
        child.kill()
        child.wait(timeout=10)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "memory.db"
    MemoryStore(path).close()
    return path


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        "[service]\nlock_wait_seconds = 0.5\n\n[jobs.summarize]\nenabled = false\n",
        encoding="utf-8",
    )
    return path


def cli(db: Path, config: Path, *args: str) -> tuple[int, float]:
    started = time.monotonic()
    code = main(["--db", str(db), "--config", str(config), *args])
    return code, time.monotonic() - started


# -- one service per database ---------------------------------------------------------------


def test_a_second_service_is_refused_at_once(
    db: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with lock_holder(db, "daemon") as first:
        code, elapsed = cli(db, config_file, "run")
    assert code == EXIT_BUSY == 75
    assert elapsed < 3
    err = capsys.readouterr().err
    assert "another memkeeper service" in err
    assert f"pid {first.pid}" in err
    assert str(db) in err


def test_second_service_refused_by_the_library_too(db: Path) -> None:
    with lock_holder(db, "daemon"), pytest.raises(LockBusy, match="already running"):
        Daemon(db=db, config=Config(), config_path=None, handle_signals=False).run()


def test_service_state_reports_the_holder(db: Path) -> None:
    assert service_state(db) == {"running": False, "pid": None}  # no lock file yet
    with lock_holder(db, "daemon") as holder:
        assert service_state(db) == {"running": True, "pid": holder.pid}
    assert service_state(db) == {"running": False, "pid": None}


# -- stale locks --------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["daemon", "jobs"])
def test_a_lock_left_by_a_killed_process_is_taken_over(db: Path, which: str) -> None:
    make = daemon_lock if which == "daemon" else jobs_lock
    with lock_holder(db, which) as holder:
        with pytest.raises(LockBusy, match=f"held by pid {holder.pid}"):
            make(db).acquire(0)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        # The file still names the dead holder; the kernel dropped its flock all the same.
        assert lock_path(db, which).read_text().strip() == str(holder.pid)
        lock = make(db)
        lock.acquire(0)
        try:
            assert lock_path(db, which).read_text().strip() != str(holder.pid)
        finally:
            lock.release()


# -- run-once and the job lock ---------------------------------------------------------------


def test_run_once_waits_for_the_lock_then_gives_up(
    db: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with lock_holder(db, "jobs") as holder:
        code, elapsed = cli(db, config_file, "run-once")
    assert code == EXIT_BUSY
    assert 0.5 <= elapsed < 5
    err = capsys.readouterr().err
    assert f"held by pid {holder.pid}" in err
    assert "after waiting 0.5 s" in err
    with MemoryStore(db) as store:
        assert store.job_runs() == []  # nothing ran, nothing recorded


def test_run_once_waits_for_a_running_job_then_runs(
    db: Path, config_file: Path, tmp_path: Path
) -> None:
    patient = tmp_path / "patient.toml"
    patient.write_text(
        config_file.read_text().replace("lock_wait_seconds = 0.5", "lock_wait_seconds = 20")
    )
    with lock_holder(db, "jobs", seconds=1.0):
        code, elapsed = cli(db, patient, "run-once", "--job", "expire")
    assert code == 0
    assert elapsed >= 0.5
    with MemoryStore(db) as store:
        assert [(run.job, run.status) for run in store.job_runs()] == [("expire", "ok")]


def test_run_once_just_runs_while_the_service_is_idle(db: Path, config_file: Path) -> None:
    """The service holds only its instance lock between jobs; the job lock is free."""
    with lock_holder(db, "daemon"):
        code, elapsed = cli(db, config_file, "run-once", "--job", "settle")
    assert code == 0
    assert elapsed < 5


def test_run_job_raises_lock_busy_and_records_nothing(db: Path) -> None:
    with MemoryStore(db) as store, lock_holder(db, "jobs"):
        started = time.monotonic()
        with pytest.raises(LockBusy):
            run_job(store, "expire", now=store.now(), lock_wait_seconds=0.3)
        assert time.monotonic() - started >= 0.3
        assert store.job_runs() == []


# -- the service and a run-once -------------------------------------------------------------


def test_service_job_waits_for_a_run_once_then_runs(db: Path) -> None:
    with MemoryStore(db) as store, lock_holder(db, "jobs", seconds=1.0):
        started = time.monotonic()
        result = ServiceJobs(store).run_scheduled("expire")
        assert result is not None
        assert result.status == "ok"
        assert time.monotonic() - started >= 0.8


def test_service_job_waiting_for_the_lock_stops_promptly(db: Path) -> None:
    with MemoryStore(db) as store, lock_holder(db, "jobs"):
        jobs = ServiceJobs(store)
        timer = threading.Timer(0.3, jobs.stop_event.set)
        timer.start()
        started = time.monotonic()
        assert jobs.run_scheduled("expire") is None
        assert time.monotonic() - started < 3
        timer.join()
        assert store.job_runs() == []
