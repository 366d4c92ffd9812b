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

Each call is reported as (wall-clock start, latency in ms, tool, host index that answered,
phase ``"max"`` or ``"load"``), so the parent can cut the run into before, through and after
the takeover.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

from memkeeper.bench.mcp_worker import call_headers, client_meta, step

RETRY_DOWN_SECONDS = 2.0
"""How long a host that failed a call is left out before it is tried again."""


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
    import httpx

    headers = call_headers(token)
    meta = client_meta(f"fleet-agent-{number}")
    down_until = [0.0] * len(urls)
    calls: list[tuple[float, float, str, int, str]] = []
    errors: Counter[str] = Counter()
    failovers = 0
    clients = [httpx.Client(headers=headers, timeout=30) for _ in urls]
    try:
        clients[home].get(urls[home].rsplit("/", 1)[0] + "/")
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
            served, response = -1, None
            order = [(home + k) % len(urls) for k in range(len(urls))]
            now = time.monotonic()
            order = [i for i in order if down_until[i] <= now] or order
            for index in order:
                try:
                    response = clients[index].post(
                        urls[index], content=body, headers={"Mcp-Name": tool}
                    )
                except httpx.TransportError:
                    down_until[index] = time.monotonic() + RETRY_DOWN_SECONDS
                    failovers += 1
                    continue
                served = index
                break
            latency = (time.perf_counter() - began) * 1000
            calls.append((began_wall, latency, tool, served, phase))
            if response is None:
                errors[f"{tool}: no host answered"] += 1
                continue
            try:
                result = response.json().get("result") or {}
            except ValueError:
                result = {}
            if response.status_code != 200 or result.get("isError") or not result:
                errors[f"{tool}: HTTP {response.status_code} {response.text[:120]}"] += 1
    finally:
        for client in clients:
            client.close()
    results.put((calls, dict(errors), failovers))
