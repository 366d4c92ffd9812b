"""One load client of ``memkeeper bench --mcp-clients N``, run in its own process.

Each client is an agent of the current protocol (2026-07-28): every tool call one
self-contained JSON-RPC POST with its protocol version and client info in ``_meta``,
exactly what the SDK's client sends in that mode, over one kept-alive HTTP connection
(``http.client``: a lean client, see :func:`run_client`). It runs in a process of its own,
as an agent would, so the figures are the server's and not those of clients sharing its
interpreter. It calls until told to stop
(and every tool at least once), then reports each call's latency per tool.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from typing import Any

PROTOCOL = "2026-07-28"

PATTERN = ("search", "recall") * 4 + ("remember", "context")
"""The tools in turn: mostly reads (recall and search), a write and a context now and then."""
KEYS = 20
WORDS = ("report", "travel", "coffee", "meeting", "python", "garden")


def step(client: int, n: int) -> tuple[str, dict[str, Any]]:
    """The client's ``n``-th call: its tool and arguments, on its own keys."""
    tool = PATTERN[n % len(PATTERN)]
    key = f"k{(n // len(PATTERN) + n) % KEYS}"
    word = WORDS[(client + n) % len(WORDS)]
    if tool == "remember":
        return tool, {"key": key, "value": f"{word} {n}", "namespace": "load"}
    if tool == "search":
        return tool, {"query": word, "namespace": "load"}
    if tool == "recall":
        return tool, {"key": key, "namespace": "load"}
    return tool, {"namespace": "load", "query": word}


def client_meta(name: str) -> dict[str, Any]:
    """The ``_meta`` of every stateless call: protocol version, client info, capabilities."""
    return {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientInfo": {"name": name, "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def call_headers(token: str) -> dict[str, str]:
    """The HTTP headers of a stateless ``tools/call`` POST with ``token``."""
    return {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": PROTOCOL,
        "Mcp-Method": "tools/call",
    }


def run_client(
    number: int, url: str, token: str, go: Any, stop: Any, up: Any, results: Any
) -> None:  # pragma: no cover - runs in a child process
    """Say ``up`` once connected, call tools from ``go`` until ``stop`` is set, then put
    (latencies in ms by tool, errors, the process's CPU seconds meanwhile) in ``results``.

    A lean client, as an agent's would be: one kept-alive ``http.client`` connection, each
    tool's headers built once, each call one ``send``. (httpx, used before, spent 1.5 ms of
    CPU per call on this machine, as much as the server, on cores the server shares.)
    """
    from http.client import HTTPConnection
    from urllib.parse import urlsplit

    where = urlsplit(url)
    meta = client_meta(f"bench-client-{number}")
    by_tool = {tool: {**call_headers(token), "Mcp-Name": tool} for tool in set(PATTERN)}
    latencies: dict[str, list[float]] = defaultdict(list)
    errors: Counter[str] = Counter()
    http = HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=60)
    try:
        http.request("GET", "/")  # connected (any answer will do)
        http.getresponse().read()
        up.put(number)
        go.wait()
        cpu_began = time.process_time()
        n = 0
        while n < len(PATTERN) or not stop.is_set():
            tool, arguments = step(number, n)
            body = {
                "jsonrpc": "2.0",
                "id": n,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments, "_meta": meta},
            }
            began = time.perf_counter()
            http.request("POST", where.path, json.dumps(body).encode(), by_tool[tool])
            response = http.getresponse()
            text = response.read()
            latencies[tool].append((time.perf_counter() - began) * 1000)
            n += 1
            try:
                result = json.loads(text).get("result") or {}
            except ValueError:
                result = {}
            if response.status != 200 or result.get("isError") or not result:
                errors[f"{tool}: HTTP {response.status} {text[:120]!r}"] += 1
        cpu = time.process_time() - cpu_began
    finally:
        http.close()
    results.put((dict(latencies), dict(errors), cpu))
