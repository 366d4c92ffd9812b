"""``memkeeper bench --fleet N --postgres URL``: N hosts on one memory, the leader killed once.

Each simulated host is what a fleet host runs: one ``memkeeper run --mcp`` process (its own
configuration, home directory and connections; its host name given by
``MEMKEEPER_HOST_NAME``) on the same PostgreSQL database. Every host's MCP endpoint has
agents of its own (:mod:`memkeeper.bench.fleet_worker`, a process each) that write and search,
failing over to another host when theirs stops answering, as a load balancer would.

Two measurements, reported apart:

1. **The most the fleet serves** (``max_seconds``): the agents call as fast as they can (the
   next call as soon as the last answered). On one machine that saturates every core, so
   this phase's latency is mostly queueing for a CPU: it is reported with the throughput,
   not as the fleet's latency.
2. **Latency at a stated load** (``rate`` calls a second per agent, open loop: calls are
   scheduled whatever the answers, and each is timed from its scheduled time, so waiting
   behind a slow call counts). After a warm-up the leader's process is killed with SIGKILL;
   the bench times how long until another host holds the leadership (the ``leadership``
   row's epoch moves on, :mod:`memkeeper.storage.postgres.leadership`), lets the agents run
   two seconds and the warm-up's length again, and stops the rest with SIGTERM.

Reported: the takeover time; the most calls per second and their latency; the offered and
achieved load, and the agents' latency at it before, through (from the kill to two seconds
after the takeover) and after the takeover; calls that failed over; errors (target 0; p99
<= 50 ms); each surviving host's exit status. The hosts and agents share this machine's
cores: the figures are a lower bound of a fleet's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from memkeeper.clock import system_now

AGENTS_PER_HOST = 2
RATE_PER_AGENT = 20.0
"""Calls a second each agent offers in the latency measurement (6 agents: 120 calls/s)."""
MAX_SECONDS = 6.0
"""How long the agents call as fast as they can, for the most the fleet serves."""
WARM_UP_SECONDS = 8.0
AFTER_SECONDS = 8.0
THROUGH_MARGIN_SECONDS = 2.0
UP_TIMEOUT_SECONDS = 90.0
TAKEOVER_TIMEOUT_SECONDS = 120.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)


class Host:
    """One simulated host: a ``memkeeper run --mcp`` process of its own."""

    def __init__(self, root: Path, number: int, url: str, token_file: Path) -> None:
        self.name = f"bench-host-{number}"
        self.home = root / self.name
        self.home.mkdir(mode=0o700)
        self.port = _free_port()
        self.config = self.home / "config.toml"
        _private(self.config, f'[mcp]\ntoken_file = "{token_file}"\n')
        self.log = (self.home / "service.log").open("wb")
        env = {
            **os.environ,
            "HOME": str(self.home),
            "XDG_DATA_HOME": str(self.home / "data"),
            "XDG_CONFIG_HOME": str(self.home / "config"),
            "MEMKEEPER_DB": url,
            "MEMKEEPER_HOST_NAME": self.name,
        }
        self.process = subprocess.Popen(  # noqa: S603 - our own program
            [
                sys.executable,
                "-m",
                "memkeeper",
                "--config",
                str(self.config),
                "run",
                "--mcp",
                f"127.0.0.1:{self.port}",
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def answers(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2):
            return True
        return False

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM, then the exit status (None: killed after ``timeout``)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            status = None
        self.log.close()
        return status

    def tail(self, lines: int = 5) -> str:
        text = (self.home / "service.log").read_text(encoding="utf-8", errors="replace")
        return " | ".join(text.strip().splitlines()[-lines:])


def _leader(url: str) -> dict[str, Any] | None:
    """The ``daemon`` lease as the database holds it now (host, pid, epoch), or None."""
    from memkeeper.storage.postgres.leadership import fleet_state
    from memkeeper.storage.postgres.pool import connect
    from memkeeper.storage.postgres.schema import DEFAULT_SCHEMA
    from memkeeper.storage.postgres.url import parse_url

    with contextlib.suppress(Exception), connect(parse_url(url), autocommit=True) as conn:
        state = fleet_state(conn, DEFAULT_SCHEMA, now=system_now(), recent=timedelta(minutes=1))
        return state["leader"]
    return None


def _wait(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.02)
    raise TimeoutError(f"the fleet bench waited {timeout:g} s for {what}")


def _quantiles(values: list[float]) -> dict[str, Any] | None:
    if not values:
        return None
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {"calls": len(ordered), "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": at(1.0)}


def measure_fleet(
    hosts: int,
    url: str,
    *,
    agents_per_host: int = AGENTS_PER_HOST,
    rate: float = RATE_PER_AGENT,
    max_seconds: float = MAX_SECONDS,
    warm_up: float = WARM_UP_SECONDS,
    after: float = AFTER_SECONDS,
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run the measurement (see the module's docstring); the figures as a JSON-ready dict.
    ``rate`` 0: no stated load, the agents call as fast as they can throughout."""
    import multiprocessing

    from memkeeper.bench.fleet_worker import run_agent
    from memkeeper.bench.mcp_load import write_token_file
    from memkeeper.bench.postgres_bench import refuse_a_real_memory
    from memkeeper.storage.postgres.scratch import drop_memkeeper_schema
    from memkeeper.store import MemoryStore

    if hosts < 2:
        raise ValueError("a fleet needs at least 2 hosts")
    refuse_a_real_memory(url)
    MemoryStore(url).close()  # the schema, once, before the hosts race to create it
    context = multiprocessing.get_context("spawn")
    go, stop, up, results = context.Event(), context.Event(), context.Queue(), context.Queue()
    steady = context.Event()
    fleet: list[Host] = []
    agents: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="memkeeper-fleet-bench-") as directory:
        root = Path(directory)
        token_file, tokens = write_token_file(root, hosts * agents_per_host, "fleet-agent")
        try:
            say(f"starting {hosts} hosts (memkeeper run --mcp) on one PostgreSQL")
            fleet = [Host(root, n, url, token_file) for n in range(hosts)]
            _wait(lambda: all(h.answers() for h in fleet), UP_TIMEOUT_SECONDS, "every host")
            leader = _wait(lambda: _leader(url), UP_TIMEOUT_SECONDS, "a leader")
            urls = [h.url for h in fleet]
            for number, token in enumerate(tokens):
                args = (number, urls, number % hosts, token, go, stop, up, results, steady, rate)
                agents.append(context.Process(target=run_agent, args=args, daemon=True))
            for agent in agents:
                agent.start()
            for _ in agents:
                up.get(timeout=UP_TIMEOUT_SECONDS)
            say(f"{len(agents)} agents calling; the leader is {leader['host']}")
            began = time.time()
            go.set()
            if rate > 0:
                time.sleep(max_seconds)
                fleet_rate = rate * len(agents)
                say(f"offering {rate:g} calls/s per agent ({fleet_rate:g} across the fleet)")
                steady.set()
            started = time.time()
            time.sleep(warm_up)
            leader = _leader(url) or leader
            killed = next((h for h in fleet if h.process.pid == leader["pid"]), None)
            if killed is None:
                raise RuntimeError(f"the leader {leader} is not one of the bench's hosts")
            killed_at = time.time()
            os.kill(killed.process.pid, signal.SIGKILL)
            say(f"killed the leader {killed.name} (SIGKILL)")

            def taken_over() -> dict[str, Any] | None:
                now = _leader(url)
                moved = now and now["pid"] != leader["pid"] and now["epoch"] > leader["epoch"]
                return now if moved else None

            successor = _wait(taken_over, TAKEOVER_TIMEOUT_SECONDS, "a new leader")
            taken_at = time.time()
            say(f"{successor['host']} took over in {taken_at - killed_at:.2f} s")
            time.sleep(THROUGH_MARGIN_SECONDS + after)
            stop.set()
            calls: list[tuple[float, float, str, int, str]] = []
            errors: Counter[str] = Counter()
            failovers = 0
            for _ in agents:
                got, failed, moved = results.get(timeout=UP_TIMEOUT_SECONDS)
                calls.extend(got)
                errors.update(failed)
                failovers += moved
            ended = time.time()
        finally:
            stop.set()
            go.set()
            for agent in agents:
                if agent.pid is not None:
                    agent.join(timeout=30)
            statuses = {h.name: h.stop() for h in fleet if h.process.poll() is None}
            drop_memkeeper_schema(url)
    killed.process.wait()
    through_end = taken_at + THROUGH_MARGIN_SECONDS
    most = [c for c in calls if c[4] == "max"]
    if rate > 0:
        calls = [c for c in calls if c[4] == "load"]
    return {
        "hosts": hosts,
        "agents": len(agents),
        "killed": killed.name,
        "new_leader": successor["host"],
        "takeover_seconds": round(taken_at - killed_at, 3),
        "most": {
            "seconds": round(started - began, 1),
            "calls_per_second": round(len(most) / max(started - began, 1e-9), 1),
            **(_quantiles([c[1] for c in most]) or {}),
        }
        if rate > 0
        else None,
        "offered_per_agent": rate or None,
        "offered_calls_per_second": round(rate * len(agents), 1) if rate > 0 else None,
        "calls_per_second": round(len(calls) / (ended - started), 1),
        "all": _quantiles([c[1] for c in calls]),
        "before": _quantiles([c[1] for c in calls if c[0] < killed_at]),
        "through_takeover": _quantiles([c[1] for c in calls if killed_at <= c[0] < through_end]),
        "after": _quantiles([c[1] for c in calls if c[0] >= through_end]),
        "failovers": failovers,
        "errors": sum(errors.values()),
        "error_samples": [text for text, _ in errors.most_common(3)],
        "exit_statuses": statuses,
    }


def fleet_table(figures: dict[str, Any]) -> str:
    """The figures as a few lines of text."""
    lines = [
        f"fleet: {figures['hosts']} hosts, {figures['agents']} agents over MCP; killed the "
        f"leader {figures['killed']}, {figures['new_leader']} took over in "
        f"{figures['takeover_seconds']} s",
    ]
    most = figures.get("most")
    if most:
        lines.append(
            f"most it serves: {most['calls_per_second']} calls/s with every agent calling as "
            f"fast as it can ({most['seconds']} s, closed loop; p50 / p99 / max "
            f"{most.get('p50_ms')} / {most.get('p99_ms')} / {most.get('max_ms')} ms: mostly "
            "queueing for this machine's cores)"
        )
        lines.append(
            f"latency at a stated load: {figures['offered_per_agent']:g} calls/s per agent "
            f"offered ({figures['offered_calls_per_second']:g} across the fleet; open loop, "
            "each call timed from its scheduled time)"
        )
    else:
        lines.append("every agent calling as fast as it can (closed loop) throughout:")
    lines.append(f"{'phase':<18}{'calls':>8}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    for phase in ("before", "through_takeover", "after", "all"):
        row = figures[phase] or {"calls": 0, "p50_ms": "-", "p99_ms": "-", "max_ms": "-"}
        lines.append(
            f"{phase:<18}{row['calls']:>8}{row['p50_ms']:>9}{row['p99_ms']:>9}{row['max_ms']:>9}"
        )
    statuses = ", ".join(f"{name} {status}" for name, status in figures["exit_statuses"].items())
    lines.append(
        f"{figures['calls_per_second']} calls/s across the fleet (achieved); "
        f"{figures['failovers']} "
        f"failed over to another host; {figures['errors']} errors; exit on SIGTERM: {statuses}"
    )
    return "\n".join(lines)
