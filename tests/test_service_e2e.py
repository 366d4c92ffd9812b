"""End to end: ``memkeeper run`` as a real process, watched through a fake systemd socket.

Each test starts ``python -m memkeeper ... run`` on a temporary database with
``$NOTIFY_SOCKET`` pointing at a datagram socket the test reads (READY, WATCHDOG, STOPPING),
drives it with real signals, and checks the database afterwards with plain sqlite3. Every wait
is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memkeeper import MemoryStore
from memkeeper.clock import from_db, to_db
from memkeeper.config import load_config
from memkeeper.maintenance.runner import ABANDONED_ERROR
from memkeeper.paths import cold_path_for
from memkeeper.service.scheduler import due_jobs

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

YEARLY = "0 0 1 1 *"
START_TIMEOUT = 20.0


def memkeeper_argv(db: Path, config: Path | None, *args: str) -> list[str]:
    """``python -m memkeeper --db DB [--config CONFIG] ARGS...``."""
    options = ["--config", str(config)] if config else []
    return [sys.executable, "-m", "memkeeper", "--db", str(db), *options, *args]


class Service:
    """A running ``memkeeper run`` child and the notifications it sent."""

    def __init__(self, tmp_path: Path, db: Path, config: Path, *, watchdog_usec: int = 1_000_000):
        self.sock, address, self._cleanup = _notify_socket()
        self.messages: list[str] = []
        self.log_path = tmp_path / f"service-{secrets.token_hex(2)}.log"
        env = dict(os.environ)
        env.update(NOTIFY_SOCKET=address, WATCHDOG_USEC=str(watchdog_usec), MEMKEEPER_DEBUG="1")
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                memkeeper_argv(db, config, "run"),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=env,
            )

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_message(self, field: str, timeout: float = START_TIMEOUT, *, start: int = 0) -> str:
        """The first notification from index ``start`` with a line ``field``; waits for it."""
        deadline = time.monotonic() + timeout
        index = start
        while True:
            while index < len(self.messages):
                if field in self.messages[index].split("\n"):
                    return self.messages[index]
                index += 1
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"no {field} within {timeout} s; got {self.messages}\n{self.log()}"
                )
            self.sock.settimeout(min(remaining, 0.5))
            with contextlib.suppress(TimeoutError):
                self.messages.append(self.sock.recv(4096).decode())
            if self.proc.poll() is not None and index >= len(self.messages):
                raise AssertionError(f"service exited {self.proc.returncode}:\n{self.log()}")

    def signal(self, signum: int) -> int:
        """Send a signal; returns the message index from which its effects appear."""
        self.drain()
        self.proc.send_signal(signum)
        return len(self.messages)

    def drain(self) -> None:
        self.sock.settimeout(0.01)
        with contextlib.suppress(TimeoutError, BlockingIOError):
            while True:
                self.messages.append(self.sock.recv(4096).decode())

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM; the exit code. How fast a service stops is not asserted here (a loaded
        machine makes any bound flaky): tests assert what it finished and what it left."""
        self.signal(signal.SIGTERM)
        code = self.proc.wait(timeout=timeout)
        self.drain()
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.sock.close()
        self._cleanup()


def _notify_socket() -> tuple[socket.socket, str, Callable[[], None]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if sys.platform.startswith("linux"):
        name = f"memkeeper-e2e-{secrets.token_hex(6)}"
        sock.bind("\0" + name)
        return sock, f"@{name}", lambda: None
    directory = Path(tempfile.mkdtemp(prefix="mk-"))
    path = directory / "notify"
    sock.bind(str(path))
    return sock, str(path), lambda: (path.unlink(), directory.rmdir())


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Callable[..., Service]]:
    started: list[Service] = []

    def start(db: Path, config: Path, **kwargs: Any) -> Service:
        service = Service(tmp_path, db, config, **kwargs)
        started.append(service)
        return service

    yield start
    for service in started:
        service.close()


def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def query(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read with a separate connection, as another process would (WAL: never blocked)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def write_config(path: Path, text: str = "", **schedules: str) -> Path:
    # summarize needs an LLM; retain (weekly), index and merge are not what these tests
    # are about.
    lines = [
        "[jobs.summarize]",
        "enabled = false",
        "",
        "[jobs.retain]",
        "enabled = false",
        "",
        "[jobs.index]",
        "enabled = false",
        "",
        "[jobs.merge]",
        "enabled = false",
        "",
    ]
    for job, schedule in schedules.items():
        lines += [f"[jobs.{job}]", f'schedule = "{schedule}"', ""]
    path.write_text("\n".join(lines) + text, encoding="utf-8")
    return path


def seed_runs(db: Path, runs: dict[str, datetime]) -> None:
    """Successful past runs, as if the service had run them."""
    with MemoryStore(db) as store:
        for job, started in runs.items():
            store.storage.hot.conn.execute(
                "INSERT INTO job_runs (run_id, job, trigger, started_at, finished_at, status,"
                " dry_run) VALUES (?, ?, 'schedule', ?, ?, 'ok', 0)",
                [f"seed-{job}", job, to_db(started), to_db(started + timedelta(seconds=1))],
            )


def seed_demotable_notes(db: Path, count: int) -> None:
    """``count`` low-confidence notes nobody used for 40 days: all due for demotion."""
    MemoryStore(db).close()
    old = to_db(datetime.now(UTC) - timedelta(days=40))
    conn = sqlite3.connect(db)
    with conn:
        conn.executemany(
            "INSERT INTO memories (id, user_id, namespace, kind, key, value, source, confidence,"
            " state, pinned, ttl_days, created_at, updated_at, last_accessed_at, access_count,"
            " state_since, last_used_at) VALUES (?, ?, '', 'note', NULL, ?, 'e2e', 0.3,"
            " 'active', 0, NULL, ?, ?, NULL, 0, ?, ?)",
            ((f"{i:016x}", f"user{i % 50}", f"note {i}", old, old, old, old) for i in range(count)),
        )
    conn.close()


def demote_runs(db: Path) -> list[tuple[str, str, str, str | None, str | None]]:
    return query(
        db,
        "SELECT run_id, trigger, status, counts, error FROM job_runs"
        " WHERE job = 'demote' AND run_id NOT LIKE 'seed-%' ORDER BY started_at",
    )


def changes_of(db: Path, run_id: str) -> int:
    return query(db, "SELECT count(*) FROM changes WHERE run_id = ?", (run_id,))[0][0]


def assert_every_entry_in_exactly_one_place(db: Path, count: int) -> tuple[int, int]:
    """Hot and cold hold disjoint sets of ids, together every seeded entry; no half-moves."""
    cold = cold_path_for(db)
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    assert query(cold, "PRAGMA integrity_check") == [("ok",)]
    hot_ids = {row[0] for row in query(db, "SELECT id FROM memories")}
    cold_ids = {row[0] for row in query(cold, "SELECT id FROM cold_memories")}
    assert not hot_ids & cold_ids
    assert len(hot_ids) + len(cold_ids) == count
    assert hot_ids | cold_ids == {f"{i:016x}" for i in range(count)}
    return len(hot_ids), len(cold_ids)


# -- the tests ------------------------------------------------------------------------------


def test_service_catches_up_reloads_and_stops(
    tmp_path: Path, services: Callable[..., Service]
) -> None:
    db = tmp_path / "memory.db"
    config = write_config(tmp_path / "config.toml", settle=YEARLY, prune=YEARLY)
    now = datetime.now(UTC)
    seed_runs(db, {"settle": now, "prune": now, "expire": now - timedelta(days=30)})
    expected = {"expire", "demote"}  # expire ran a month ago; demote never ran

    service = services(db, config)
    ready = service.wait_message("READY=1")
    assert "STATUS=4 jobs scheduled (UTC); catching up 2" in ready.split("\n")

    def catch_up_rows() -> list[tuple[Any, ...]]:
        rows = query(
            db,
            "SELECT job, trigger, status, scheduled_for FROM job_runs"
            " WHERE run_id NOT LIKE 'seed-%' ORDER BY started_at",
        )
        return rows if len(rows) >= 2 and all(row[2] != "running" for row in rows) else []

    rows = wait_until(catch_up_rows, 15, "the catch-up runs")
    assert [(job, trigger, status) for job, trigger, status, _ in rows] == [
        ("expire", "catch-up", "ok"),
        ("demote", "catch-up", "ok"),
    ]
    assert {row[0] for row in rows} == expected
    with MemoryStore(db, config=load_config(config)) as store:
        assert due_jobs(store) == []
        scheduled = {row[0]: from_db(row[3]) for row in rows}
        assert all(
            moment is not None and moment <= datetime.now(UTC) for moment in scheduled.values()
        )
    service.wait_message("WATCHDOG=1", 5)

    # A second service on the same database is refused at once, with exit 75.
    second = subprocess.run(
        memkeeper_argv(db, config, "run"),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert second.returncode == 75
    assert "another memkeeper service" in second.stderr
    assert f"pid {service.proc.pid}" in second.stderr

    # SIGHUP with a broken config: rejected, the service keeps running on the old one.
    config.write_text("[service\ntimezone = ", encoding="utf-8")
    mark = service.signal(signal.SIGHUP)
    service.wait_message("RELOADING=1", 10, start=mark)
    rejected = service.wait_message("READY=1", 10, start=mark)
    assert "previous configuration kept" in rejected
    wait_until(lambda: "configuration reload rejected" in service.log(), 5, "the error log")
    assert "invalid TOML" in service.log()
    assert service.proc.poll() is None
    service.wait_message("WATCHDOG=1", 5, start=len(service.messages))

    # A valid config is taken.
    write_config(config, '[service]\ntimezone = "Europe/Berlin"\n', settle=YEARLY, prune=YEARLY)
    mark = service.signal(signal.SIGHUP)
    reloaded = service.wait_message("READY=1", 10, start=mark)
    assert "(Europe/Berlin)" in reloaded

    code = service.stop()
    assert code == 0, service.log()
    assert any("STOPPING=1" in message.split("\n") for message in service.messages)
    assert "service stopped" in service.log()


def test_sigterm_mid_job_interrupts_cleanly(
    tmp_path: Path, services: Callable[..., Service]
) -> None:
    db = tmp_path / "memory.db"
    count = 80_000
    seed_demotable_notes(db, count)
    now = datetime.now(UTC)
    seed_runs(db, {"settle": now, "expire": now, "prune": now, "demote": now - timedelta(days=40)})
    config = write_config(
        tmp_path / "config.toml",
        "[database]\nbatch_size = 20\n",
        settle=YEARLY,
        expire=YEARLY,
        prune=YEARLY,
    )

    service = services(db, config)
    service.wait_message("READY=1")

    def demote_underway() -> str | None:
        runs = demote_runs(db)
        if runs and runs[-1][2] == "running" and changes_of(db, runs[-1][0]) > 0:
            return runs[-1][0]
        return None

    run_id = wait_until(demote_underway, 20, "the demote catch-up to be under way")
    code = service.stop()
    assert code == 0, service.log()
    # Stopped mid-job, not after it: the run is interrupted with part of the work done (below).
    assert any("STOPPING=1" in message.split("\n") for message in service.messages)

    [(final_id, trigger, status, counts, _)] = demote_runs(db)
    assert (final_id, trigger, status) == (run_id, "catch-up", "interrupted")
    hot, cold = assert_every_entry_in_exactly_one_place(db, count)
    assert 0 < cold < count, "the run should have stopped part-way"
    assert query(cold_path_for(db), "SELECT count(*) FROM moves_in_flight") == [(0,)]
    moved = query(
        cold_path_for(db), "SELECT count(*) FROM cold_memories WHERE cold_reason = 'low_confidence'"
    )[0][0]
    assert changes_of(db, run_id) == moved == cold
    assert json.loads(counts)["changes"] == {"retire (low_confidence)": cold}
    assert hot == count - cold


def test_killed_service_run_is_marked_and_caught_up(
    tmp_path: Path, services: Callable[..., Service]
) -> None:
    db = tmp_path / "memory.db"
    count = 12_000
    seed_demotable_notes(db, count)
    now = datetime.now(UTC)
    seed_runs(db, {"settle": now, "expire": now, "prune": now, "demote": now - timedelta(days=40)})
    config = write_config(
        tmp_path / "config.toml",
        "[database]\nbatch_size = 20\n",
        settle=YEARLY,
        expire=YEARLY,
        prune=YEARLY,
    )
    first = services(db, config)
    first.wait_message("READY=1")

    def demote_running() -> bool:
        runs = demote_runs(db)
        return bool(runs) and runs[-1][2] == "running" and changes_of(db, runs[-1][0]) > 0

    # Wait on the very condition asserted below, then freeze the process before looking
    # again: what the kill leaves is what was checked (the run cannot finish in between).
    wait_until(demote_running, 60, "the demote catch-up to be under way")
    first.proc.send_signal(signal.SIGSTOP)
    assert demote_running(), "the demote run finished before it could be killed"
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)
    [(killed_id, _, status, _, _)] = demote_runs(db)
    assert status == "running"

    second = services(db, config)  # the killed service's locks are taken over
    second.wait_message("READY=1")
    # A bound on a liveness wait, not a figure: on two loaded cores shared with the other
    # tests (pytest-xdist), the catch-up of 12,000 notes once needed more than 30 s.
    runs = wait_until(
        lambda: [r for r in demote_runs(db) if r[2] == "ok"] and demote_runs(db), 120, "catch-up"
    )
    assert [(r[0], r[2], r[4]) for r in runs] == [
        (killed_id, "interrupted", ABANDONED_ERROR),
        (runs[1][0], "ok", None),
    ]
    code = second.stop()
    assert code == 0
    hot, cold = assert_every_entry_in_exactly_one_place(db, count)
    assert (hot, cold) == (0, count)
    assert changes_of(db, killed_id) + changes_of(db, runs[1][0]) == count


@pytest.mark.parametrize(
    ("config_text", "message"),
    [
        ("[service\n", "invalid TOML"),
        ('[jobs.expire]\nschedule = "0 3 * * 8"\n', "jobs.expire.schedule"),
        ('[service]\ntimezone = "Mars/Olympus"\n', "unknown timezone"),
    ],
)
def test_bad_config_at_start_exits_78(tmp_path: Path, config_text: str, message: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(config_text, encoding="utf-8")
    result = subprocess.run(
        memkeeper_argv(tmp_path / "m.db", config, "run"),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 78
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "m.db").exists()


def test_run_refuses_a_pretend_clock(tmp_path: Path) -> None:
    env = dict(os.environ, MEMKEEPER_NOW="2030-01-01")
    result = subprocess.run(
        memkeeper_argv(tmp_path / "m.db", None, "run"),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=env,
    )
    assert result.returncode == 78
    assert "real clock" in result.stderr
