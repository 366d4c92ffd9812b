"""End to end (issue 13): real ``memkeeper mcp`` processes driven by the SDK's own clients.

* stdio: ``python -m memkeeper mcp --user carol`` started by ``mcp.client.stdio.stdio_client``
  (as a desktop assistant starts it): every tool, then the database and ``memkeeper log``;
  the protocol on standard output stays clean, since the client would fail otherwise;
* HTTP: ``memkeeper mcp --http 127.0.0.1:PORT`` with a token file, stopped by SIGTERM;
* ``memkeeper run --mcp 127.0.0.1:PORT``: the service serving MCP beside its jobs;
* the command's refusals: no token file, --no-auth off loopback, a token file others can read.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

from memkeeper import MemoryStore
from memkeeper.cli import main

pytestmark = [pytest.mark.e2e]

TOKEN = "e2e-token-Vb7Qw2Lx9Rt4Kp6M"
CLIENT = "e2e-agent"
START_TIMEOUT = 20.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(tmp_path: Path) -> Path:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(f'[[tokens]]\ntoken = "{TOKEN}"\nuser = "erin"\n', encoding="utf-8")
    tokens.chmod(0o600)
    config = tmp_path / "config.toml"
    config.write_text(f'[mcp]\ntoken_file = "{tokens}"\n', encoding="utf-8")
    return config


async def _every_tool(session: ClientSession) -> dict[str, Any]:
    """Call each tool once; their structured answers by tool."""
    await session.initialize()
    listed = [tool.name for tool in (await session.list_tools()).tools]
    assert len(listed) == 9
    answers: dict[str, Any] = {}

    async def call(name: str, arguments: dict[str, Any]) -> Any:
        result = await session.call_tool(name, arguments)
        assert not result.isError, result.content
        answers[name] = result.structuredContent
        return result.structuredContent

    city = (await call("remember", {"key": "city", "value": "Turin"}))["memory"]
    note = (await call("add_note", {"text": "Ordered the new laptop"}))["memory"]
    await call("recall", {"key": "city"})
    await call("search", {"query": "laptop"})
    await call("context", {})
    await call("append_message", {"session_id": "s1", "role": "user", "content": "hi"})
    await call("record_episode", {"task_name": "setup"})
    await call("explain", {"memory_id": city["id"]})
    await call("forget", {"memory_id": note["id"]})
    refused = await session.call_tool("recall", {"key": "city", "user_id": "someone-else"})
    assert refused.isError
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


def test_stdio_server_process_serves_every_tool_for_its_user(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    errlog = tmp_path / "stderr.log"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memkeeper", "--db", str(db), "-v", "mcp", "--user", "carol"],
        env=dict(os.environ),
    )

    async def go() -> dict[str, Any]:
        info = types.Implementation(name=CLIENT, version="1")
        with errlog.open("w") as err, anyio.fail_after(60):
            async with (
                stdio_client(params, errlog=err) as (read, write),
                ClientSession(read, write, client_info=info) as session,
            ):
                return await _every_tool(session)

    answers = anyio.run(go)
    assert answers["recall"]["memory"]["value"] == "Turin"
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
def _process(argv: list[str], log: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def _over_http(port: int, token: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {token}"}
        info = types.Implementation(name=CLIENT, version="1")
        url = f"http://127.0.0.1:{port}/mcp"
        with anyio.fail_after(60):
            async with (
                streamablehttp_client(url, headers=headers) as (read, write, _),
                ClientSession(read, write, client_info=info) as session,
            ):
                return await _every_tool(session)

    return anyio.run(go)


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=20)


def test_http_server_process_authenticates_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    db, port = tmp_path / "memory.db", _free_port()
    argv = [sys.executable, "-m", "memkeeper", "--db", str(db), "--config", str(_config(tmp_path))]
    log = tmp_path / "server.log"
    with _process([*argv, "mcp", "--http", f"127.0.0.1:{port}"], log, port) as proc:
        answers = _over_http(port, TOKEN)
        assert _stop(proc) == 0
    assert answers["recall"]["memory"]["value"] == "Turin"
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
    db, port = tmp_path / "memory.db", _free_port()
    argv = [sys.executable, "-m", "memkeeper", "--db", str(db), "--config", str(_config(tmp_path))]
    log = tmp_path / "service.log"
    with _process([*argv, "run", "--mcp", f"127.0.0.1:{port}"], log, port) as proc:
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
