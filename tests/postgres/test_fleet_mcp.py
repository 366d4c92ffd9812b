"""MCP on every host: ``memkeeper run --mcp`` on two hosts of a fleet serve one memory.

A 2026-07-28 client speaks through a round-robin proxy (a load balancer without sticky
sessions) to two hosts, the leader and the one standing by: its requests land on both, and
every answer is the same memory's.
"""

from __future__ import annotations

import http.client
import itertools
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.listening import listening_port
from mcp_clients import MODERN, over_http

from postgres.fleet import Host, leader, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TOKEN = "fleet-token-Qe4Rt7Yu1Io9Pa3S"
CLIENT = "fleet-agent"
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class RoundRobin(ThreadingHTTPServer):
    """Each request to the next backend in turn; counts what each one answered."""

    daemon_threads = True

    def __init__(self, ports: list[int]) -> None:
        self.backends = itertools.cycle(ports)
        self.served: Counter[int] = Counter()
        self.turn = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Forward)


class _Forward(BaseHTTPRequestHandler):
    server: RoundRobin

    def _forward(self) -> None:
        with self.server.turn:
            port = next(self.server.backends)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        upstream = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        upstream.request(self.command, self.path, body=body or None, headers=headers)
        answer = upstream.getresponse()
        data = answer.read()
        self.server.served[port] += 1
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in HOP_BY_HOP:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        upstream.close()

    do_POST = do_GET = do_DELETE = _forward

    def log_message(self, *_args: Any) -> None:
        pass


def _port(host: Host) -> int | None:
    """The port ``host`` says it listens on (it asked for 0), once it has said so."""
    port = listening_port(host.log())
    assert port is not None or host.proc.poll() is None, host.log()
    return port


def test_stateless_requests_of_one_client_go_to_either_host(
    pg_database: str, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(f'[[tokens]]\ntoken = "{TOKEN}"\nuser = "erin"\n', encoding="utf-8")
    tokens.chmod(0o600)
    extra = f'[mcp]\ntoken_file = "{tokens}"\n'
    hosts: list[Host] = []
    try:
        for i in range(2):
            hosts.append(
                Host(tmp_path, f"host-{i}", pg_database, "--mcp", "127.0.0.1:0", extra=extra)
            )
        for host in hosts:
            wait_for(f"{host.name} listening", lambda h=host: _port(h) is not None, 30, hosts)
        ports = [_port(host) or 0 for host in hosts]
        wait_for("a leader", lambda: leader(pg_database), 30, hosts)
        proxy = RoundRobin(ports)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()

        async def go() -> list[Any]:
            url = f"http://127.0.0.1:{proxy.server_address[1]}/mcp"
            found = []
            async with over_http(url, TOKEN, CLIENT, MODERN) as session:
                for n in range(4):
                    await session.call_tool("remember", {"key": f"k{n}", "value": f"v{n}"})
                    for m in range(n + 1):
                        got = await session.call_tool("recall", {"key": f"k{m}"})
                        found.append((m, got.structured_content["memory"]["value"]))
            return found

        found = anyio.run(go)
        proxy.shutdown()
        assert all(value == f"v{m}" for m, value in found)
        assert len(found) == 10
        # Both hosts answered (the proxy alternates), the leader and the one standing by.
        assert set(proxy.served) == set(ports) and min(proxy.served.values()) >= 5
        codes = [h.stop() for h in hosts]
    finally:
        for h in hosts:
            h.close()
    assert codes == [0, 0], [h.log()[-2000:] for h in hosts]
