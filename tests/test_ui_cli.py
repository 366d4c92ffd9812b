"""``memkeeper ui`` as a command: it serves until SIGTERM and stops cleanly, says where it
listens, refuses to start where it must not (no tokens off the loopback, writes at a pretend
time without --yes), and signs a browser out."""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from test_ui_support import ADMIN_TOKEN, write_token_file

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.config import Config
from memkeeper.errors import EXIT_CONFIG, EXIT_USAGE
from memkeeper.ui.app import build_app
from memkeeper.ui.security import plan


def _line(process: subprocess.Popen[str], pattern: str, timeout: float = 20.0) -> str:
    """The first line of the process's standard error matching ``pattern`` (read by a
    thread: a line may wait in the pipe's buffer behind another)."""
    assert process.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    stream = process.stderr
    threading.Thread(target=lambda: [lines.put(line) for line in stream], daemon=True).start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        if re.search(pattern, line):
            return line
    raise AssertionError(f"no line matching {pattern!r} (exit {process.poll()})")


def test_it_serves_until_sigterm_and_stops_cleanly(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    assert main(["--db", str(db), "remember", "ann", "city", "Lisbon"]) == 0
    process = subprocess.Popen(
        [sys.executable, "-m", "memkeeper", "--db", str(db), "ui", "--port", "0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        url = re.search(r"http://\S+/", _line(process, r"memkeeper ui: http://"))
        assert url is not None
        with urllib.request.urlopen(url.group(0) + "users/ann", timeout=10) as answer:
            page = answer.read().decode()
        assert answer.status == 200 and "Lisbon" in page and "read-only" in page
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_it_refuses_to_start_where_it_must_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "memory.db"
    assert main(["--db", str(db), "remember", "ann", "city", "Lisbon"]) == 0
    capsys.readouterr()
    assert main(["--db", str(db), "ui", "--host", "192.0.2.1"]) == EXIT_CONFIG
    assert "token" in capsys.readouterr().err
    assert main(["--db", str(db), "ui", "--host", "192.0.2.1", "--no-auth"]) == EXIT_CONFIG
    assert "needs tokens" in capsys.readouterr().err
    pretend = ["--db", str(db), "--now", "2030-01-01T00:00:00Z", "ui", "--allow-writes"]
    assert main(pretend) == EXIT_USAGE
    assert "--yes" in capsys.readouterr().err


def test_signing_out_ends_the_session(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    assert main(["--db", str(db), "remember", "ann", "city", "Lisbon"]) == 0
    tokens = write_token_file(tmp_path / "tokens.toml")
    config = Config.model_validate({"mcp": {"token_file": str(tokens)}})
    with MemoryStore(db, config=config) as store:
        web = TestClient(
            build_app(store, plan(config, port=8766, auth=True)), base_url="http://127.0.0.1:8766"
        )
        assert web.post("/login", data={"token": ADMIN_TOKEN}).status_code == 200
        page = web.get("/users/ann").text
        assert "Sign out" in page
        csrf = re.search(
            r'action="/logout"[^>]*><input type="hidden" name="csrf" value="(\w+)"', page
        )
        assert csrf is not None
        assert web.post("/logout", data={}).status_code == 403  # no CSRF token
        out = web.post("/logout", data={"csrf": csrf.group(1)}, follow_redirects=False)
        assert out.status_code == 303 and out.headers["location"] == "/login"
        web.cookies.clear()
        assert web.get("/users/ann", follow_redirects=False).status_code == 303
