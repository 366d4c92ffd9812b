"""End to end (issues 13, 18, 19): real ``memkeeper mcp`` processes driven by the SDK 2.x
client, once speaking only 2026-07-28 and once only 2025-06-18 (``tests/mcp_clients.py``).

* stdio: ``python -m memkeeper mcp --user carol`` started by the client (as a desktop
  assistant starts it): every tool and the prompt, then the database and ``memkeeper log``;
  the protocol on standard output stays clean, since the client would fail otherwise; the
  end of input is a normal end (exit 0, nothing on standard error), also during a call;
* HTTP: ``memkeeper mcp --http 127.0.0.1:PORT`` with a token file, stopped by SIGTERM; a
  stateless request answered by a second process on the same database;
* ``memkeeper run --mcp 127.0.0.1:PORT``: the service serving MCP beside its jobs;
* the command's refusals: no token file, --no-auth off loopback, a token file others can read.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.listening import listening_port
from mcp import Client, StdioServerParameters
from mcp_clients import MODERN, MODES, over_http, over_stdio, protocol_of

from memkeeper import MemoryStore
from memkeeper.cli import main

pytestmark = [pytest.mark.e2e]

TOKEN = "e2e-token-Vb7Qw2Lx9Rt4Kp6M"
CLIENT = "e2e-agent"
START_TIMEOUT = 20.0


def _config(tmp_path: Path) -> Path:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(f'[[tokens]]\ntoken = "{TOKEN}"\nuser = "erin"\n', encoding="utf-8")
    tokens.chmod(0o600)
    config = tmp_path / "config.toml"
    config.write_text(f'[mcp]\ntoken_file = "{tokens}"\n', encoding="utf-8")
    return config


async def _every_tool(session: Client, mode: str) -> dict[str, Any]:
    """Call each tool once, and the prompt; their structured answers by tool."""
    assert protocol_of(session) == mode
    listed = [tool.name for tool in (await session.list_tools()).tools]
    assert len(listed) == 12
    answers: dict[str, Any] = {"protocol": protocol_of(session)}

    async def call(name: str, arguments: dict[str, Any]) -> Any:
        result = await session.call_tool(name, arguments)
        assert not result.is_error, result.content
        answers[name] = result.structured_content
        return result.structured_content

    city = (await call("remember", {"key": "city", "value": "Turin"}))["memory"]
    note = (await call("add_note", {"text": "Ordered the new laptop"}))["memory"]
    await call("recall", {"key": "city"})
    await call("search", {"query": "laptop"})
    await call("context", {})
    await call("append_message", {"session_id": "s1", "role": "user", "content": "hi"})
    await call("record_episode", {"task_name": "setup"})
    await call("explain", {"memory_id": city["id"]})
    await call("list_memories", {})
    await call("episodes", {})
    await call("history", {"session_id": "s1"})
    prompt = await session.get_prompt("memory_context", {"query": "laptop"})
    answers["prompt"] = prompt.messages[0].content.text  # type: ignore[union-attr]
    await call("forget", {"memory_id": note["id"]})
    refused = await session.call_tool("recall", {"key": "city", "user_id": "someone-else"})
    assert refused.is_error
    answers["refused"] = refused.content[0].text  # type: ignore[union-attr]
    return answers


def _log_json(db: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "memkeeper", "--db", str(db), "log", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize("mode", MODES)
def test_stdio_server_process_serves_every_tool_for_its_user(tmp_path: Path, mode: str) -> None:
    db = tmp_path / "memory.db"
    errlog = tmp_path / "stderr.log"
    wrapper = tmp_path / "serve.py"  # stderr to a file: the SDK's client gives the child ours
    wrapper.write_text(
        "import os, sys\n"
        f"fd = os.open({str(errlog)!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND)\n"
        "os.dup2(fd, 2)\n"
        "from memkeeper.cli import entry\n"
        "sys.argv[0] = 'memkeeper'\n"
        "entry()\n",
        encoding="utf-8",
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(wrapper), "--db", str(db), "-v", "mcp", "--user", "carol"],
        env=dict(os.environ),
    )

    async def go() -> dict[str, Any]:
        with anyio.fail_after(60):
            async with over_stdio(params, CLIENT, mode) as session:
                return await _every_tool(session, mode)

    answers = anyio.run(go)
    assert answers["protocol"] == mode
    assert answers["recall"]["memory"]["value"] == "Turin"
    assert "Turin" in answers["prompt"] and "laptop" in answers["prompt"]
    assert [m["content"] for m in answers["history"]["messages"]] == ["hi"]
    assert "acts for user 'carol' only" in answers["refused"]
    with MemoryStore(db) as store:
        assert [(m.user_id, m.key, m.value) for m in store.list_memories()] == [
            ("carol", "city", "Turin")
        ]
        assert [m.content for m in store.history("carol", "s1")] == ["hi"]
    log = _log_json(db)
    created = [row for row in log if row["action"] == "create"]
    assert [(row["actor"], row["source"]) for row in created] == [("mcp:remember", f"mcp:{CLIENT}")]
    assert "mcp:forget" in {row["actor"] for row in log}
    assert "tool call refused" in errlog.read_text()  # logs went to stderr


@contextlib.contextmanager
def _process(argv: list[str], log: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The server ``argv`` starts (listening on port 0: the system picks a free one) and the
    port it says it listens on, once it says so. A port picked beforehand and checked by
    connecting to it could be another process's: another test's server on another worker
    took it, and this one was sent SIGTERM while still starting (killed, not stopped)."""
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while (port := listening_port(log.read_text(errors="replace"))) is None:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def _over_http(port: int, token: str, mode: str = MODERN) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        url = f"http://127.0.0.1:{port}/mcp"
        with anyio.fail_after(60):
            async with over_http(url, token, CLIENT, mode) as session:
                return await _every_tool(session, mode)

    return anyio.run(go)


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=20)


@pytest.mark.parametrize("mode", MODES)
def test_http_server_process_authenticates_serves_and_stops_on_sigterm(
    tmp_path: Path, mode: str
) -> None:
    db = tmp_path / "memory.db"
    argv = [sys.executable, "-m", "memkeeper", "--db", str(db), "--config", str(_config(tmp_path))]
    log = tmp_path / "server.log"
    with _process([*argv, "mcp", "--http", "127.0.0.1:0"], log) as (proc, port):
        assert not db.exists()  # issue 20: only a write creates the database
        answers = _over_http(port, TOKEN, mode)
        assert _stop(proc) == 0
    assert answers["protocol"] == mode
    assert answers["recall"]["memory"]["value"] == "Turin"
    assert "Turin" in answers["prompt"]
    assert "acts for user 'erin' only" in answers["refused"]
    with MemoryStore(db) as store:
        [change] = store.changes(action="create")
        assert (change.actor, change.user_id, change.source) == (
            "mcp:remember",
            "erin",
            f"mcp:{CLIENT}",
        )
    assert TOKEN not in log.read_text()


@pytest.mark.slow
def test_the_service_serves_mcp_beside_its_jobs(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    argv = [sys.executable, "-m", "memkeeper", "--db", str(db), "--config", str(_config(tmp_path))]
    log = tmp_path / "service.log"
    with _process([*argv, "run", "--mcp", "127.0.0.1:0"], log) as (proc, port):
        answers = _over_http(port, TOKEN)
        assert _stop(proc) == 0, log.read_text()
    assert answers["remember"]["memory"]["source"] == f"mcp:{CLIENT}"
    text = log.read_text()
    assert "service started" in text and "service stopped" in text
    assert TOKEN not in text
    assert {row["actor"] for row in _log_json(db)} >= {"mcp:remember", "mcp:forget"}


def test_the_command_refuses_to_serve_http_unsafely(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "memory.db")
    assert main(["--db", db, "mcp", "--http", "127.0.0.1:0"]) == 78
    assert "needs a token file" in capsys.readouterr().err
    assert main(["--db", db, "mcp", "--http", "0.0.0.0:0", "--no-auth"]) == 78
    assert "only on a loopback address" in capsys.readouterr().err
    config = _config(tmp_path)
    (tmp_path / "tokens.toml").chmod(0o640)
    assert main(["--db", db, "--config", str(config), "mcp", "--http", "127.0.0.1:0"]) == 78
    err = capsys.readouterr().err
    assert "mode 0640" in err and TOKEN not in err
    assert main(["--db", db, "mcp", "--no-auth"]) == 2
    assert main(["--db", db, "run", "--mcp", "127.0.0.1:0"]) == 78
    assert not Path(db).exists()


def _raw_stdio(db: Path, lines: list[bytes], *, user: str = "carol") -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "memkeeper", "--db", str(db), "mcp", "--user", user],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    for line in lines:
        proc.stdin.write(line + b"\n")
    proc.stdin.flush()
    return proc


def test_stdio_end_of_input_is_a_normal_end_and_creates_nothing(tmp_path: Path) -> None:
    """Issue 18 item 11 (exit 1, ValueError at the final flush) and issue 20 item 8."""
    db = tmp_path / "memory.db"
    done = subprocess.run(
        [sys.executable, "-m", "memkeeper", "--db", str(db), "mcp", "--user", "carol"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert not db.exists()

    # A client that reads (2026-07-28 requests) and leaves: still nothing created.
    envelope = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    recall = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "recall", "arguments": {"key": "city"}, "_meta": envelope},
    }
    proc = _raw_stdio(db, [json.dumps(recall).encode()])
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    # Input ended before the answer: it is dropped, with (at most) that one info line.
    assert all('"level": "info"' in line for line in err.decode().splitlines())
    assert not db.exists()


def test_stdin_closing_during_a_call_finishes_it_and_exits_0(tmp_path: Path) -> None:
    """Issue 18 item 12: the write commits, the answer is dropped, exit 0, one info line."""
    import sqlite3

    db = tmp_path / "memory.db"
    with MemoryStore(db) as store:
        store.remember("carol", "seed", "x")
    envelope = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    remember = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": {"key": "city", "value": "Turin"}},
    }
    remember["params"]["_meta"] = envelope  # type: ignore[index]
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the call waits for the write lock...
    try:
        proc = _raw_stdio(db, [json.dumps(remember).encode()])
        time.sleep(1.0)  # ...while the server reads it (ordering, not a measured bound)
        assert proc.stdin is not None
        proc.stdin.close()  # the client leaves during the call
        time.sleep(0.3)
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert proc.wait(timeout=60) == 0
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read().decode()
    assert out == b""  # the answer was dropped
    lines = err.splitlines()
    assert len(lines) == 1 and "its answer is dropped" in lines[0] and '"info"' in lines[0]
    with MemoryStore(db) as store:
        assert store.recall("carol", "city").value == "Turin"  # type: ignore[union-attr]


def test_a_stateless_request_is_answered_by_any_process_on_the_database(tmp_path: Path) -> None:
    """Two servers on one database: a 2026-07-28 client's requests need no session, so
    requests sent to either one act on the same memory."""
    db = tmp_path / "memory.db"
    config = str(_config(tmp_path))
    argv = [sys.executable, "-m", "memkeeper", "--db", str(db), "--config", config, "mcp"]

    async def go(first: int, second: int) -> Any:
        async with over_http(f"http://127.0.0.1:{first}/mcp", TOKEN, CLIENT, MODERN) as one:
            await one.call_tool("remember", {"key": "city", "value": "Bari"})
        async with over_http(f"http://127.0.0.1:{second}/mcp", TOKEN, CLIENT, MODERN) as two:
            found = await two.call_tool("recall", {"key": "city"})
        return found.structured_content

    with (
        _process([*argv, "--http", "127.0.0.1:0"], tmp_path / "a.log") as (a, first),
        _process([*argv, "--http", "127.0.0.1:0"], tmp_path / "b.log") as (b, second),
    ):
        assert first != second
        found = anyio.run(go, first, second)
        assert _stop(a) == 0 and _stop(b) == 0
    assert found["memory"]["value"] == "Bari"
