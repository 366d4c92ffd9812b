"""The bench's child processes: the runner (passes and the floor) and the agents.

Each is a fresh interpreter (``multiprocessing``'s spawn start method): the runner's peak RSS
is its own, and the agents are separate processes with their own connections, as real agents
are. They take commands over a pipe and answer with plain data.

* The runner answers ``("pass", path)`` with the time, changes and statuses of a full pass
  (settle, expire, demote, prune) at the bench's "now", and the process's peak RSS so far;
  ``("floor", path)`` with the floor's figures (:mod:`memkeeper.bench.floor`);
  ``("forget", path, user, key, in_place)`` with the time of one forget
  (:mod:`memkeeper.bench.forget_load`).
* An agent, told ``"run"``, calls ``recall`` (80 %) and ``remember`` (20 %, a new value: the
  old one is superseded) on its own user's 40 keys with a short pause between calls, until
  told ``"stop"``; then it sends every call's latency and the errors.
"""

from __future__ import annotations

import random
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from memkeeper.clock import Clock
from memkeeper.config import Config

PASS_JOBS = ("settle", "expire", "demote", "prune")
AGENT_PAUSE = 0.01
"""Seconds an agent waits between two calls (an agent thinks between turns)."""
RECALL_SHARE = 0.8


def running_clock(start: datetime) -> Clock:
    """A clock that starts at ``start`` and runs with real time."""
    began = time.monotonic()
    return lambda: start + timedelta(seconds=time.monotonic() - began)


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB.

    On Linux it is ``VmHWM`` of this process's own memory: ``ru_maxrss`` keeps the peak of
    the memory a spawned process was forked from (the bench's parent, which just generated
    the database), which made a 140 MiB pass read as 445 MiB.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**10  # KiB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes vs KiB


def _quiet() -> None:
    from memkeeper import logs

    logs.configure(level="error")


def run_pass(path: str, now: datetime) -> dict[str, Any]:
    """One full pass over ``path`` at ``now``, timed."""
    from memkeeper.clock import fixed
    from memkeeper.maintenance.runner import run_once
    from memkeeper.store import MemoryStore

    store = MemoryStore(path, config=Config(), clock=fixed(now))
    try:
        began = time.perf_counter()
        report = run_once(store, list(PASS_JOBS), now=now)
        seconds = time.perf_counter() - began
    finally:
        store.close()
    labels: Counter[str] = Counter()
    for result in report.results:
        labels.update(result.counts)
    return {
        "seconds": round(seconds, 4),
        "changes": sum(labels.values()),
        "by_label": dict(sorted(labels.items())),
        "statuses": {result.job: result.status for result in report.results},
        "errors": [result.error for result in report.results if result.error],
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


def runner(conn: Connection, now: datetime) -> None:
    """The runner process: passes and the floor, one command at a time."""
    _quiet()
    from memkeeper.bench.floor import run_floor

    conn.send("ready")
    while True:
        command = conn.recv()
        if command == "exit":
            return
        verb, path, *more = command
        if verb == "pass":
            conn.send(run_pass(path, now))
        elif verb == "forget":
            from memkeeper.bench.forget_load import run_forget

            conn.send(run_forget(path, *more))
        else:
            conn.send(run_floor(Path(path), Config(), now))


def _call(store: Any, user: str, rng: random.Random, count: int) -> Callable[[], Any]:
    key = f"k{rng.randrange(40)}"
    if rng.random() < RECALL_SHARE:
        return lambda: store.recall(user, key)
    return lambda: store.remember(user, key, f"agent value {count}", source="bench")


def agent(conn: Connection, index: int, path: str, now: datetime, seed: int) -> None:
    """One agent process (see the module docstring)."""
    _quiet()
    from memkeeper.bench.generate import AGENT_PREFIX
    from memkeeper.store import MemoryStore

    user = f"{AGENT_PREFIX}agent-{index}"
    rng = random.Random(seed * 1000 + index)  # noqa: S311 - a reproducible workload
    store = MemoryStore(path, config=Config(), clock=running_clock(now), actor=f"agent{index}")
    conn.send("ready")
    calls = 0
    try:
        while conn.recv() == "run":
            latencies: list[float] = []
            started: list[float] = []  # each call's start (perf_counter: one clock for all)
            errors: Counter[str] = Counter()
            while not latencies or not conn.poll():  # at least one call per run
                call = _call(store, user, rng, calls)
                calls += 1
                began = time.perf_counter()
                started.append(began)
                try:
                    call()
                except Exception as exc:
                    errors[f"{type(exc).__name__}: {exc}"[:200]] += 1
                latencies.append((time.perf_counter() - began) * 1000)
                time.sleep(AGENT_PAUSE)
            conn.recv()  # the stop
            conn.send({"latencies_ms": latencies, "started_s": started, "errors": dict(errors)})
    finally:
        store.close()
