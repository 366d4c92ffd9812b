"""A summarize run killed mid-way leaves no half-done session, and the next run no duplicate.

The run happens in a child process that is SIGKILLed: once while it waits on the LLM (after
some sessions committed), once inside a session's commit transaction (after the note rows
were written, before the messages were marked and the transaction committed).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_llm import FakeLLM, Recorded, Reply, add_session, completion, default_summary

from memkeeper import MemoryStore
from memkeeper.config import Config
from memkeeper.maintenance.runner import run_once

pytestmark = pytest.mark.slow  # child processes killed mid-run: skipped by `pytest -m "not slow"`

SESSIONS = [f"s{n}" for n in range(6)]

CHILD = """
import json, os, signal, sys
from memkeeper import MemoryStore
from memkeeper.storage import transitions
from memkeeper.config import Config
from memkeeper.maintenance.runner import run_once

db, config, kill_at = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
commits = 0

def hook(step):
    global commits
    if step == "hot-committed":  # inside the summarize transaction: nothing is durable yet
        commits += 1
        if commits == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

if kill_at:
    transitions.step_hook = hook
store = MemoryStore(db, config=Config.model_validate(config))
run_once(store, ["summarize"])
"""


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZHIPUAI_API_KEY", "crash-test-key-0001")


def config_for(url: str) -> dict[str, object]:
    return {
        "jobs": {"summarize": {"max_concurrency": 1}},
        "llm": {"base_url": url, "retry_backoff_seconds": 0.01, "timeout_seconds": 30.0},
    }


def query(db_path: Path, sql: str) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(db_path, timeout=5)) as conn:
        return conn.execute(sql).fetchall()


def notes_per_session(db_path: Path) -> dict[str, int]:
    rows = query(db_path, "SELECT key, count(*) FROM memories GROUP BY key")
    return {str(key).removeprefix("summary:"): int(n) for key, n in rows}


def start_child(db_path: Path, url: str, kill_at: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db_path), json.dumps(config_for(url)), str(kill_at)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait_for(condition: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the child")
        time.sleep(0.05)


def check_consistent(db_path: Path) -> None:
    """Every marked message points at a summary note of its own session, and every note
    (current or superseded) has the messages it claims."""
    bad = query(
        db_path,
        "SELECT m.id FROM messages m LEFT JOIN memories n ON n.id = m.summary_id"
        " WHERE m.summarized_at IS NOT NULL AND (n.id IS NULL OR n.key != 'summary:' ||"
        " m.session_id OR n.user_id != m.user_id)",
    )
    assert bad == []
    orphans = query(
        db_path,
        "SELECT n.id FROM memories n WHERE NOT EXISTS (SELECT 1 FROM messages m"
        " WHERE m.summary_id = n.id)",
    )
    assert orphans == []


def finish_and_check(db_path: Path, fake: FakeLLM) -> None:
    """Run again in this process: every session ends with exactly one summary."""
    fake.responder = default_summary
    config = Config.model_validate(config_for(fake.url))
    with MemoryStore(db_path, config=config) as store:
        result = run_once(store, ["summarize"]).results[0]
        assert result.status == "ok", result.error
        for session in SESSIONS:
            assert len(store.history("u1", session)) == 10
    assert notes_per_session(db_path) == dict.fromkeys(SESSIONS, 1)
    check_consistent(db_path)


def seed(db_path: Path) -> None:
    with MemoryStore(db_path) as store:
        for session in SESSIONS:
            add_session(store, session, 21, start=store.now())


def test_killed_while_waiting_on_the_llm(db_path: Path) -> None:
    seed(db_path)

    def three_then_hang(request: Recorded) -> Reply:
        if len(fake.requests) <= 3:
            return default_summary(request)
        return completion("never delivered", delay=60)

    with FakeLLM(three_then_hang) as fake:
        child = start_child(db_path, fake.url, kill_at=0)
        try:
            wait_for(
                lambda: len(fake.requests) >= 4 and sum(notes_per_session(db_path).values()) == 3
            )
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
        assert child.returncode == -signal.SIGKILL
        assert notes_per_session(db_path) == {"s0": 1, "s1": 1, "s2": 1}
        check_consistent(db_path)
        unsummarized = query(
            db_path,
            "SELECT session_id, count(*) FROM messages WHERE summarized_at IS NULL GROUP BY 1",
        )
        assert dict(unsummarized) == {"s0": 10, "s1": 10, "s2": 10, "s3": 21, "s4": 21, "s5": 21}
        assert query(db_path, "SELECT status FROM job_runs") == [("running",)]
        finish_and_check(db_path, fake)


def test_killed_inside_the_commit_transaction(db_path: Path) -> None:
    seed(db_path)
    with FakeLLM() as fake:
        child = start_child(db_path, fake.url, kill_at=2)
        _, stderr = child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL, stderr.decode()
        assert os.path.exists(db_path)
        # The first session committed; the second, killed mid-transaction, left no trace.
        assert notes_per_session(db_path) == {"s0": 1}
        assert query(db_path, "SELECT count(*) FROM changes WHERE action = 'summarize'") == [(1,)]
        assert query(db_path, "SELECT count(*) FROM messages WHERE summarized_at IS NOT NULL") == [
            (11,)
        ]
        check_consistent(db_path)
        finish_and_check(db_path, fake)
