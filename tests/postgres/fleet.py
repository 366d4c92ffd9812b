"""Helpers of the fleet tests: ``memkeeper run`` processes as simulated hosts on one server.

Each :class:`Host` is a real ``python -m memkeeper run`` with a home, a config file and a
host name (``MEMKEEPER_HOST_NAME``) of its own; the tests read what they did from the
database (``job_runs``, ``changes``, ``leadership``) with plain psycopg. Every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from memkeeper import MemoryStore
from memkeeper.clock import fixed
from memkeeper.config import JOB_ORDER

EVERY = 6  # seconds between scheduled fires of the job under test
TAKEOVER = 3  # service.takeover_seconds of every host


def fleet_config(
    path: Path, *, job: str = "expire", extra: str = "", takeover: float = TAKEOVER
) -> Path:
    """A config running only ``job``, every EVERY seconds, one entry per transaction."""
    lines = [
        "[service]",
        f"takeover_seconds = {takeover}",
        "[database]",
        "batch_size = 1",
        "[logging]",
        'format = "json"',
    ]
    for name in JOB_ORDER:
        lines.append(f"[jobs.{name}]")
        if name == job:
            lines.append(f'schedule = "@every {EVERY}s"')
        else:
            lines.append("enabled = false")
    path.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return path


class Host:
    """One simulated host running ``memkeeper run`` on the shared memory."""

    def __init__(
        self,
        root: Path,
        name: str,
        url: str,
        *args: str,
        extra: str = "",
        takeover: float = TAKEOVER,
    ) -> None:
        self.name = name
        home = root / name
        home.mkdir(parents=True, exist_ok=True)
        config = fleet_config(home / "config.toml", extra=extra, takeover=takeover)
        self.log_path = home / "service.log"
        env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
        env.update(HOME=str(home), MEMKEEPER_HOST_NAME=name, XDG_CONFIG_HOME=str(home / ".config"))
        argv = [sys.executable, "-m", "memkeeper", "--db", url, "--config", str(config)]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [*argv, "run", *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=env,
            )

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def stop(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def seed_expired(url: str, count: int, users: int = 20) -> None:
    """``count`` facts last used a year ago: every one is due for the expire job."""
    year_ago = datetime.now(UTC) - timedelta(days=400)
    with MemoryStore(url, clock=fixed(year_ago)) as store:
        for i in range(count):
            store.remember(f"user{i % users}", f"key{i}", f"value {i}")


def query(url: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET search_path TO memkeeper")
        return conn.execute(sql, params).fetchall()


def wait_for(what: str, check: Callable[[], Any], timeout: float, hosts: list[Host]) -> Any:
    """Poll ``check`` until it answers something truthy; fail with every host's log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = check()
        if answer:
            return answer
        time.sleep(0.05)
    logs = "\n".join(f"--- {h.name} (exit {h.proc.poll()}):\n{h.log()[-4000:]}" for h in hosts)
    raise AssertionError(f"{what}: not within {timeout} s\n{logs}")


def leader(url: str) -> tuple[str, int] | None:
    """(host, pid) of the leader as recorded by the latest election."""
    rows = query(url, "SELECT host, pid FROM leadership WHERE name = 'daemon'")
    return (rows[0][0], rows[0][1]) if rows and rows[0][0] else None


def runs(url: str) -> list[dict[str, Any]]:
    rows = query(
        url,
        "SELECT run_id, host, status, scheduled_for, started_at, error FROM job_runs"
        " ORDER BY started_at, run_id",
    )
    keys = ("run_id", "host", "status", "scheduled_for", "started_at", "error")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def changes_of(url: str, run_id: str) -> int:
    return query(url, "SELECT count(*) FROM changes WHERE run_id = %s", (run_id,))[0][0]
