"""One agent of ``memkeeper bench --fleet N``: MCP calls to its host, failing over as a
load balancer would, run in a process of its own.

The agent speaks the current protocol (2026-07-28: every tool call one stateless POST, as
:mod:`memkeeper.bench.mcp_worker` does) to its home host. When that host stops answering
(its process was killed: the connection is refused or reset), the call goes to the next host
of the fleet at once, and the dead one is tried again only after :data:`RETRY_DOWN_SECONDS`:
what a load balancer's health check does, so a stateless request never needs the host that
served the previous one. The call's latency includes the failed attempt. A call counts as an
error only when every host failed it, or the tool answered ``isError``.

Two phases. From ``go`` until ``steady``, the agent calls **as fast as it can** (closed loop:
the next call as soon as the last one answered): what the fleet serves at most. From
``steady`` until ``stop``, it **offers a stated load**, ``rate`` calls a second (open loop: the
calls are scheduled every 1/rate s whatever the answers, each agent's schedule shifted a
little so they do not fire together), and a call's latency is counted **from its scheduled
time**, so a call that had to wait for the previous one's slow answer counts that wait too
(no coordinated omission). ``rate`` 0: closed loop throughout.

The agent speaks HTTP through the standard library's ``http.client`` (one kept-alive
connection per host), not httpx: the agents share the machine's cores with the hosts and the
server, and httpx spent about 1.5 ms of CPU a call there, a fifth of the bench's CPU, which a
real fleet's agents (on machines of their own) do not take from its hosts.

Each call is reported as (wall-clock start, latency in ms, tool, host index that answered,
phase ``"max"`` or ``"load"``), so the parent can cut the run into before, through and after
the takeover.
"""

from __future__ import annotations

import http.client
import json
import time
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from memkeeper.bench.mcp_worker import call_headers, client_meta, step

RETRY_DOWN_SECONDS = 2.0
"""How long a host that failed a call is left out before it is tried again."""
IDLE_REUSE_SECONDS = 4.0
"""A kept-alive connection idle longer than this is reopened before use (the server closes
idle ones after 5 s; a request on one it just closed would look like a dead host)."""
TRANSPORT_ERRORS = (OSError, http.client.HTTPException)
"""What a host that stopped answering raises: refused, reset, closed mid-answer."""


class _Link:
    """One kept-alive HTTP connection to a host's MCP endpoint."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "", parts.port or 80, parts.path
        self.headers = headers
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        self.used = 0.0

    def request(self, method: str, path: str, body: str = "", **extra: str) -> tuple[int, str]:
        if time.monotonic() - self.used > IDLE_REUSE_SECONDS:
            self.conn.close()  # reopened by the request
        try:
            self.conn.request(method, path, body=body or None, headers={**self.headers, **extra})
            response = self.conn.getresponse()
            text = response.read().decode("utf-8", "replace")
        except TRANSPORT_ERRORS:
            self.conn.close()
            raise
        self.used = time.monotonic()
        return response.status, text

    def close(self) -> None:
        self.conn.close()


def run_agent(
    number: int,
    urls: list[str],
    home: int,
    token: str,
    go: Any,
    stop: Any,
    up: Any,
    results: Any,
    steady: Any = None,
    rate: float = 0.0,
) -> None:  # pragma: no cover - runs in a child process
    """Say ``up`` once connected, call tools from ``go`` until ``stop`` is set (as fast as it
    can, then from ``steady`` at ``rate`` calls a second), then put (calls, errors,
    failovers) in ``results``."""
    headers = call_headers(token)
    meta = client_meta(f"fleet-agent-{number}")
    down_until = [0.0] * len(urls)
    calls: list[tuple[float, float, str, int, str]] = []
    errors: Counter[str] = Counter()
    failovers = 0
    clients = [_Link(url, headers) for url in urls]
    try:
        clients[home].request("GET", "/")
        up.put(number)
        go.wait()
        n = 0
        scheduled: float | None = None  # perf_counter time of the next open-loop call
        while n < 10 or not stop.is_set():
            if scheduled is None and rate > 0 and steady is not None and steady.is_set():
                interval = 1.0 / rate
                scheduled = time.perf_counter() + interval * ((number * 0.37) % 1.0)
            if scheduled is not None:
                wait = scheduled - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
            tool, arguments = step(number, n)
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": n,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments, "_meta": meta},
                }
            )
            n += 1
            began_wall, began = time.time(), time.perf_counter()
            phase = "max"
            if scheduled is not None:  # counted from the scheduled time
                began_wall, began, phase = began_wall - (began - scheduled), scheduled, "load"
                scheduled += interval
            served, status, text = -1, 0, ""
            order = [(home + k) % len(urls) for k in range(len(urls))]
            now = time.monotonic()
            order = [i for i in order if down_until[i] <= now] or order
            for index in order:
                try:
                    status, text = clients[index].request(
                        "POST", clients[index].path, body, **{"Mcp-Name": tool}
                    )
                except TRANSPORT_ERRORS:
                    down_until[index] = time.monotonic() + RETRY_DOWN_SECONDS
                    failovers += 1
                    continue
                served = index
                break
            latency = (time.perf_counter() - began) * 1000
            calls.append((began_wall, latency, tool, served, phase))
            if served < 0:
                errors[f"{tool}: no host answered"] += 1
                continue
            try:
                result = json.loads(text).get("result") or {}
            except (ValueError, AttributeError):
                result = {}
            if status != 200 or result.get("isError") or not result:
                errors[f"{tool}: HTTP {status} {text[:120]}"] += 1
    finally:
        for client in clients:
            client.close()
    results.put((calls, dict(errors), failovers))
