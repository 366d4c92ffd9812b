"""Issue 18 item 6: HTTP sessions expire when idle and each principal holds a few at most.

Before: one valid token opening sessions without closing them grew the server by ~57 KiB per
session and nothing was ever released. Now a session ends after ``[mcp]
session_idle_seconds`` without a request, and one more than ``[mcp]
max_sessions_per_principal`` gets 429 (other principals unaffected). The memory a session
holds is measured here (tracemalloc, the server runs in this process) and printed.
"""

from __future__ import annotations

import io
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_mcp_http import ACCEPT, INITIALIZE, TOKENS, write_tokens

from memkeeper import MemoryStore, logs
from memkeeper.config import Config
from memkeeper.config.mcp import McpSection
from memkeeper.mcp.http import HttpServer, plan

CAP = 6
# Short enough to wait for, long enough to open the capped sessions on a loaded machine: with
# 1 s, the first session could end before the last one opened (two pytest-xdist workers).
IDLE = 5


@pytest.fixture
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HttpServer]:
    """The server; its sessions end after ``request.param`` idle seconds (an hour unless the
    test parametrizes it), so that a loaded machine never ends a session a test still uses."""
    logs.configure(level="info", fmt="json", stream=io.StringIO())
    section = McpSection(
        token_file=str(write_tokens(tmp_path / "tokens.toml")),
        session_idle_seconds=getattr(request, "param", 3600),
        max_sessions_per_principal=CAP,
    )
    config = Config(mcp=section)
    store = MemoryStore(tmp_path / "memory.db", config=config, actor="mcp")
    running = HttpServer(store, plan("127.0.0.1:0", config))
    running.start()
    try:
        yield running
    finally:
        running.stop()
        store.close()
        logs.configure(level="warning", fmt="console")


def open_session(url: str, who: str) -> httpx.Response:
    headers = {**ACCEPT, "Authorization": f"Bearer {TOKENS[who]}"}
    return httpx.post(url, json=INITIALIZE, headers=headers, timeout=30)


def wait_until(condition: object, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("server", [IDLE], indirect=True)
def test_sessions_are_capped_per_principal_and_expire_when_idle(server: HttpServer) -> None:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        opened = [open_session(server.url, "alice") for _ in range(CAP)]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert [r.status_code for r in opened] == [200] * CAP
    assert len({r.headers["mcp-session-id"] for r in opened}) == CAP
    print(f"memory per open session: {held / CAP / 1024:.1f} KiB (traced, {CAP} sessions)")
    assert server.open_sessions() == CAP

    refused = open_session(server.url, "alice")
    assert refused.status_code == 429
    assert "too many open MCP sessions for this token (6" in refused.json()["error"]
    assert "max_sessions_per_principal" in refused.json()["error"]
    assert refused.headers["retry-after"] == str(IDLE)
    assert open_session(server.url, "bob").status_code == 200  # another principal is not held
    assert server.open_sessions() == CAP + 1

    # Idle sessions end (their ids then answer 404) and free the principal's places.
    assert wait_until(lambda: server.open_sessions() == 0), server.open_sessions()
    stale = httpx.post(
        server.url,
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers={
            **ACCEPT,
            "Authorization": f"Bearer {TOKENS['alice']}",
            "mcp-session-id": opened[0].headers["mcp-session-id"],
            "mcp-protocol-version": "2025-06-18",
        },
    )
    assert stale.status_code == 404
    assert open_session(server.url, "alice").status_code == 200


def test_a_deleted_session_frees_its_place(server: HttpServer) -> None:
    opened = [open_session(server.url, "alice") for _ in range(CAP)]
    assert open_session(server.url, "alice").status_code == 429
    headers = {
        **ACCEPT,
        "Authorization": f"Bearer {TOKENS['alice']}",
        "mcp-session-id": opened[0].headers["mcp-session-id"],
        "mcp-protocol-version": "2025-06-18",
    }
    assert httpx.delete(server.url, headers=headers).status_code == 200
    assert open_session(server.url, "alice").status_code == 200


def test_stateless_requests_open_no_session(server: HttpServer) -> None:
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {
        **ACCEPT,
        "Authorization": f"Bearer {TOKENS['alice']}",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/list",
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": envelope}}
    for _ in range(CAP + 3):
        response = httpx.post(server.url, json=body, headers=headers)
        assert response.status_code == 200, response.text
        assert "mcp-session-id" not in response.headers
    assert server.open_sessions() == 0


def test_a_session_answers_only_the_token_that_opened_it(server: HttpServer) -> None:
    """Another valid token naming alice's session id gets 404, and alice's session lives on."""
    session_id = open_session(server.url, "alice").headers["mcp-session-id"]
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}

    def as_(who: str) -> httpx.Response:
        headers = {
            **ACCEPT,
            "Authorization": f"Bearer {TOKENS[who]}",
            "mcp-session-id": session_id,
            "mcp-protocol-version": "2025-06-18",
        }
        return httpx.post(server.url, json=ping, headers=headers, timeout=30)

    assert as_("bob").status_code == 404
    assert as_("alice").status_code == 200
    assert server.open_sessions() == 1
