"""The whole bench, in order, and the figures it gives (``memkeeper bench``; README
"Performance").

1. Generate the database (:mod:`memkeeper.bench.generate`) and copy it twice: one copy for
   the floor, one for the pass the agents run against.
2. Start the child processes (:mod:`memkeeper.bench.workers`): the runner and 4 agents.
3. A full pass on the database alone (its time, changes and peak RSS), then a second pass
   right after (nothing is due).
4. The floor on its copy (:mod:`memkeeper.bench.floor`); both must end in the same state.
5. The agents run against the third copy while the runner makes the same pass there, then
   again for as long with no pass: latencies and errors of both.
6. Growth per recall and the API's call rates, on the first database, in this process.
7. Search there, keyword-only and by meaning, and one run of the index job against the
   local embeddings stand-in (:mod:`memkeeper.bench.semantic`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import platform
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from memkeeper import __version__
from memkeeper.bench import measure, report, semantic, workers
from memkeeper.bench.floor import CHUNK
from memkeeper.bench.generate import AGENTS, NOW, generate
from memkeeper.config import Config
from memkeeper.paths import cold_path_for

QUICK = (100_000, 1_000)
DEFAULT = (1_000_000, 10_000)
WAIT_SECONDS = 3600.0
"""Longest wait for one answer from a child process before the bench gives up."""


@dataclass(frozen=True)
class Options:
    memories: int = DEFAULT[0]
    users: int = DEFAULT[1]
    seed: int = 1
    keep: Path | None = None
    postgres: str | None = None
    """A scratch PostgreSQL database to measure beside SQLite (``--postgres URL``)."""


def api_calls(memories: int) -> int:
    """Calls for the growth and rate measurements: 3,000, fewer (down to 500) on small
    databases so that the smoke version stays quick."""
    return max(500, min(3000, memories // 10))


def _receive(conn: Connection, process: Any, what: str) -> Any:
    deadline = time.monotonic() + WAIT_SECONDS
    while not conn.poll(0.2):
        if not process.is_alive():
            raise RuntimeError(f"the bench's {what} process ended (exit code {process.exitcode})")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the bench's {what} process did not answer in {WAIT_SECONDS} s")
    return conn.recv()


class Children:
    """The runner and the agents, started at once and waiting for commands."""

    def __init__(self, agents_db: Path, seed: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.processes: list[tuple[Any, Connection, str]] = []
        ours, theirs = context.Pipe()
        self.runner = (context.Process(target=workers.runner, args=(theirs, NOW)), ours, "runner")
        self.agents = []
        for index in range(AGENTS):
            ours, theirs = context.Pipe()
            args = (theirs, index, str(agents_db), NOW, seed)
            process = context.Process(target=workers.agent, args=args)
            self.agents.append((process, ours, f"agent {index}"))
        for process, _, _ in (self.runner, *self.agents):
            process.daemon = True
            process.start()
        for process, conn, what in (self.runner, *self.agents):
            _receive(conn, process, what)

    def ask(self, command: tuple[str, str]) -> dict[str, Any]:
        process, conn, what = self.runner
        conn.send(command)
        return _receive(conn, process, what)

    def agents_run(self) -> None:
        for _, conn, _ in self.agents:
            conn.send("run")

    def agents_stop(self) -> list[dict[str, Any]]:
        for _, conn, _ in self.agents:
            conn.send("stop")
        return [_receive(conn, process, what) for process, conn, what in self.agents]

    def agents_around_a_pass(
        self, path: str, *, say: Callable[[], None]
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """The agents during a pass on ``path``, then for as long with no pass: (the
        pass's figures, the agents' latency during it, their latency without it)."""
        self.agents_run()
        with_agents = self.ask(("pass", path))
        during = measure.latency(self.agents_stop(), with_agents["seconds"])
        say()
        idle_seconds = max(1.0, with_agents["seconds"])
        self.agents_run()
        time.sleep(idle_seconds)
        return with_agents, during, measure.latency(self.agents_stop(), idle_seconds)

    def close(self) -> None:
        for _, conn, _ in (self.runner, *self.agents):
            with contextlib.suppress(OSError):
                conn.send("exit")
        for process, _, _ in (self.runner, *self.agents):
            process.join(10)
            if process.is_alive():
                process.terminate()
                process.join(5)


@contextlib.contextmanager
def _directory(keep: Path | None) -> Iterator[Path]:
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="memkeeper-bench-") as tmp:
            yield Path(tmp)
        return
    keep.mkdir(parents=True, exist_ok=True)
    if any(keep.iterdir()):
        raise FileExistsError(f"--keep directory {keep} is not empty")
    yield keep


def _copy(source: Path, target: Path) -> None:
    for src, dst in ((source, target), (cold_path_for(source), cold_path_for(target))):
        shutil.copyfile(src, dst)


def _size(path: Path) -> int:
    return sum(
        p.stat().st_size for p in (path, Path(f"{path}-wal"), cold_path_for(path)) if p.exists()
    )


def _without_rss(result: dict[str, Any]) -> dict[str, Any]:
    """A later pass's figures: the runner's peak RSS is the first pass's figure."""
    return {name: value for name, value in result.items() if name != "peak_rss_mb"}


def run_bench(options: Options, say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Run every measurement; the figures as one JSON-ready dict."""
    config = Config()
    began = time.perf_counter()
    with _directory(options.keep) as root:
        ours, floor_db, busy = root / "memkeeper.db", root / "floor.db", root / "agents.db"
        say(f"generating {options.memories:,} memories over {options.users:,} users")
        generated = generate(
            ours, config, memories=options.memories, users=options.users, seed=options.seed
        )
        size = _size(ours)
        _copy(ours, floor_db)
        _copy(ours, busy)
        say("starting the runner and the agents")
        children = Children(busy, options.seed)
        try:
            say("full pass, then a second pass")
            first = children.ask(("pass", str(ours)))
            second = children.ask(("pass", str(ours)))
            say("the floor")
            floor = children.ask(("floor", str(floor_db)))
            state = measure.compare_states(ours, floor_db)
            say("the agents during a pass")
            with_agents, during, idle = children.agents_around_a_pass(
                str(busy), say=lambda: say("the agents with no pass")
            )
        finally:
            children.close()
        calls = api_calls(options.memories)
        say("growth per recall, call rates")
        growth = measure.growth_per_recall(ours, config, NOW, calls)
        rates = measure.api_rates(ours, config, NOW, calls)
        say("search, keyword-only and by meaning (the embeddings stand-in)")
        search = measure.search_latency(ours, config, NOW, min(calls, 300))
        search["keyword_index"] = measure.keyword_index_bytes(ours)
        search["by_meaning"] = semantic.search_with_vectors(ours, config, NOW, min(calls, 300))
        say(f"index job throughput (a stand-in at {semantic.INDEX_LATENCY_S * 1000:.0f} ms a call)")
        index = semantic.index_throughput(ours, config, NOW)
    postgres = None
    if options.postgres is not None:
        from memkeeper.bench.postgres_bench import run_postgres

        postgres = run_postgres(
            options.postgres,
            memories=options.memories,
            users=options.users,
            seed=options.seed,
            calls=calls,
            children_factory=lambda url: Children(url, options.seed),  # type: ignore[arg-type]
            say=say,
        )
    figures = {
        "date": datetime.now(UTC).date().isoformat(),
        "memkeeper": __version__,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
        },
        "parameters": {
            "memories": options.memories,
            "users": options.users,
            "seed": options.seed,
            "now": NOW.isoformat(),
            "batch_size": config.database.batch_size,
            "floor_chunk": CHUNK,
            "agents": AGENTS,
            "agent_pause_ms": workers.AGENT_PAUSE * 1000,
            "kept_in": str(options.keep) if options.keep else None,
        },
        "database": {**generated.to_dict(), "bytes": size},
        "pass": {**first, "due_percent": round(100 * first["changes"] / options.memories, 2)},
        "second_pass": {
            **_without_rss(second),
            "percent_of_first": round(100 * second["seconds"] / first["seconds"], 2),
        },
        "floor": {
            **floor,
            "ratio": round(first["seconds"] / floor["seconds"], 2),
            "same_state": state["same"],
            "differences": state["differences"],
            "states_after": state["states"],
        },
        "agents_during_pass": {**during, "pass": _without_rss(with_agents)},
        "agents_without_pass": idle,
        "growth": growth,
        "rates": rates,
        "search": search,
        "index": index,
        "seconds": round(time.perf_counter() - began, 1),
    }
    if postgres is not None:
        figures["postgres"] = postgres
    figures["targets"] = report.targets(figures)
    return figures
