"""``memkeeper bench --mcp-clients N``: MCP tool latencies over HTTP while a pass runs.

The set-up is ``memkeeper run --mcp``'s: the HTTP server (:mod:`memkeeper.mcp.http`, uvicorn
in a thread, its own store) and a full maintenance pass (settle, expire, demote, prune) in
one process, over the bench's generated database (:mod:`memkeeper.bench.generate`, about
10 % due). N clients — each a process of its own speaking protocol 2026-07-28 (stateless
POSTs, :mod:`memkeeper.bench.mcp_worker`) with its own bearer token and user — call
``search`` and ``recall`` in turn, with a ``remember`` (a new value of one of 20 keys) and a
``context`` every tenth call, without pausing: first while the pass runs (it starts once
every client is up), then for as long again with no pass; each client calls every tool at
least once in each phase. Each call's latency is measured at the client, per tool, and the
recall+search calls per second are reported on their own (the README's target: 500/s with
8 clients, p99 at most 50 ms, 100 ms during a pass), and so is the server process's CPU time
per call (``server_cpu_ms_per_call``: the process's CPU seconds over the phase, less the
pass thread's own, over the calls), which does not depend on what else the machine runs,
and the clients' (``client_cpu_ms_per_call``: what each client process spent meanwhile,
over the calls), since they take their CPU from the same cores.

The clients share the machine's cores with the server (they are separate processes, not
separate hosts), so on a small machine the figures are a lower bound of the server's.
"""

from __future__ import annotations

import os
import resource
import secrets
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memkeeper.bench.generate import NOW, generate
from memkeeper.bench.measure import quantile
from memkeeper.bench.workers import PASS_JOBS, running_clock
from memkeeper.clock import fixed
from memkeeper.config import Config
from memkeeper.config.mcp import McpSection
from memkeeper.maintenance.runner import run_once
from memkeeper.store import MemoryStore

TOOLS = ("remember", "search", "recall", "context")
READS = ("recall", "search")
DEFAULT_MEMORIES = 20_000
DEFAULT_USERS = 200
MODE = "2026-07-28"
"""The clients speak the current protocol: every call one stateless POST."""


def write_token_file(root: Path, clients: int, user: str = "mcp-client") -> tuple[Path, list[str]]:
    """``root/tokens.toml`` (0600) with one new bearer token per client, user ``{user}-N``."""
    tokens = [secrets.token_urlsafe(32) for _ in range(clients)]
    path = root / "tokens.toml"
    text = "".join(
        f'[[tokens]]\ntoken = "{token}"\nuser = "{user}-{n}"\n\n' for n, token in enumerate(tokens)
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    return path, tokens


def _drive(
    url: str, tokens: list[str], done: Callable[[], bool], ready: Callable[[], None]
) -> dict[str, Any]:
    """Every client (a process each, :mod:`memkeeper.bench.mcp_worker`) calling until
    ``done()`` (each tool at least once); latencies (ms) per tool, errors, seconds.
    ``ready()`` is called once every client process is up and connected."""
    import multiprocessing

    from memkeeper.bench.mcp_worker import run_client

    context = multiprocessing.get_context("spawn")  # no fork of a process running threads
    go, stop, up, results = context.Event(), context.Event(), context.Queue(), context.Queue()
    workers = [
        context.Process(
            target=run_client, args=(number, url, token, go, stop, up, results), daemon=True
        )
        for number, token in enumerate(tokens)
    ]
    for worker in workers:
        worker.start()
    latencies: dict[str, list[float]] = defaultdict(list)
    errors: Counter[str] = Counter()
    client_cpu = 0.0
    try:
        for _ in workers:  # every child has imported what it needs and connected
            up.get(timeout=120)
        ready()
        started, cpu_began = time.perf_counter(), _cpu_seconds()
        go.set()
        while not done():
            time.sleep(0.02)
        stop.set()
        for _ in workers:
            got, failed, cpu_used = results.get(timeout=120)
            client_cpu += cpu_used
            for tool, values in got.items():
                latencies[tool].extend(values)
            errors.update(failed)
        seconds = time.perf_counter() - started
        cpu = _cpu_seconds() - cpu_began
    finally:
        stop.set()
        go.set()
        for worker in workers:
            worker.join(timeout=30)
    return {
        "latencies": latencies,
        "errors": errors,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "client_cpu_seconds": client_cpu,
    }


def _cpu_seconds() -> float:
    """CPU seconds (user and system) of this process so far, every thread's: the server's
    and, during a pass, the pass's (the clients are processes of their own)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _summary(run: dict[str, Any], pass_cpu_seconds: float = 0.0) -> dict[str, Any]:
    """The phase's figures; the server's CPU per call leaves out the pass's own CPU."""

    def quantiles(values: list[float]) -> dict[str, Any]:
        ordered = sorted(values)
        return {
            "calls": len(ordered),
            "p50_ms": quantile(ordered, 0.50),
            "p95_ms": quantile(ordered, 0.95),
            "p99_ms": quantile(ordered, 0.99),
            "max_ms": round(ordered[-1], 2),
        }

    calls = sum(len(values) for values in run["latencies"].values())
    reads = sum(len(run["latencies"][tool]) for tool in READS)
    read_values = [v for tool in READS for v in run["latencies"][tool]]
    per_second = (lambda count: round(count / run["seconds"], 1)) if run["seconds"] else None
    return {
        "seconds": round(run["seconds"], 3),
        "calls_per_second": per_second(calls) if per_second else None,
        "recall_search_per_second": per_second(reads) if per_second else None,
        "recall_search": quantiles(read_values) if read_values else None,
        "tools": {
            tool: quantiles(run["latencies"][tool]) for tool in TOOLS if run["latencies"][tool]
        },
        "server_cpu_ms_per_call": (
            round(1000 * max(0.0, run["cpu_seconds"] - pass_cpu_seconds) / calls, 3)
            if calls
            else None
        ),
        "client_cpu_ms_per_call": (
            round(1000 * run["client_cpu_seconds"] / calls, 3) if calls else None
        ),
        "errors": sum(run["errors"].values()),
        "error_samples": [text for text, _ in run["errors"].most_common(3)],
    }


def measure_mcp_load(
    clients: int,
    *,
    memories: int = DEFAULT_MEMORIES,
    users: int = DEFAULT_USERS,
    seed: int = 1,
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run the measurement (see the module's docstring); the figures as a JSON-ready dict."""
    from memkeeper.mcp.http import HttpServer, plan

    with tempfile.TemporaryDirectory(prefix="memkeeper-mcp-bench-") as directory:
        root = Path(directory)
        path = root / "memory.db"
        say(f"generating {memories:,} memories over {users:,} users")
        generate(path, Config(), memories=memories, users=users, seed=seed)
        token_file, tokens = write_token_file(root, clients)
        config = Config(mcp=McpSection(token_file=str(token_file)))
        store = MemoryStore(path, config=config, clock=running_clock(NOW), actor="mcp")
        server = HttpServer(store, plan("127.0.0.1:0", config))
        server.start()
        try:
            finished = threading.Event()
            outcome: dict[str, Any] = {}

            def maintenance_pass() -> None:
                cpu_began = time.thread_time()
                with MemoryStore(path, config=Config(), clock=fixed(NOW)) as runner:
                    began = time.perf_counter()
                    report = run_once(runner, list(PASS_JOBS), now=NOW)
                    outcome["seconds"] = time.perf_counter() - began
                    outcome["ok"] = report.ok
                    outcome["changes"] = sum(sum(r.counts.values()) for r in report.results)
                outcome["cpu_seconds"] = time.thread_time() - cpu_began
                finished.set()

            say(f"{clients} MCP clients during a maintenance pass")
            thread = threading.Thread(target=maintenance_pass, name="bench-pass")
            during = _drive(server.url, tokens, finished.is_set, thread.start)
            thread.join()
            idle_seconds = max(1.0, during["seconds"])
            idle_until = [0.0]

            def idle_start() -> None:
                idle_until[0] = time.monotonic() + idle_seconds

            say(f"{clients} MCP clients with no pass")
            idle = _drive(server.url, tokens, lambda: time.monotonic() >= idle_until[0], idle_start)
            fast = server.app.state.fast
            fast_calls = fast.answered if fast is not None else 0
        finally:
            server.stop()
            store.close()
    return {
        "clients": clients,
        # One server process (the event loop and the pass in it, as run --mcp); the calls
        # the fast path answered (memkeeper.mcp.fast_call) rather than the SDK.
        "server": {"processes": 1, "fast_path_calls": fast_calls},
        "memories": memories,
        "users": users,
        "pass": {
            "ok": outcome.get("ok", False),
            "seconds": round(outcome.get("seconds", 0.0), 3),
            "changes": outcome.get("changes", 0),
        },
        "during_pass": _summary(during, outcome.get("cpu_seconds", 0.0)),
        "no_pass": _summary(idle),
    }


def mcp_table(figures: dict[str, Any]) -> str:
    """The figures as a small text table, one line per tool and phase."""
    lines = [
        f"MCP over HTTP: {figures['clients']} clients, {figures['memories']:,} memories, "
        f"{figures['server']['processes']} server process; pass "
        f"{figures['pass']['seconds']} s, {figures['pass']['changes']} changes, "
        f"{'ok' if figures['pass']['ok'] else 'FAILED'}",
        f"{'phase':<12}{'tool':<10}{'calls':>7}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}"
        f"{'max ms':>9}",
    ]
    for phase in ("during_pass", "no_pass"):
        part = figures[phase]
        for tool, row in part["tools"].items():
            lines.append(
                f"{phase:<12}{tool:<10}{row['calls']:>7}{row['p50_ms']:>9}{row['p95_ms']:>9}"
                f"{row['p99_ms']:>9}{row['max_ms']:>9}"
            )
        reads = part["recall_search"] or {}
        lines.append(
            f"{phase:<12}{'all':<10}{part['calls_per_second']:>7} calls/s, {part['errors']} errors"
            f"; recall+search {part['recall_search_per_second']} calls/s, p99 "
            f"{reads.get('p99_ms')} ms; server CPU {part['server_cpu_ms_per_call']} ms/call, "
            f"clients' {part['client_cpu_ms_per_call']} ms/call"
        )
    return "\n".join(lines)
