"""Search latency of two source trees, measured side by side on one database (README,
"Performance"): ``python tests/postgres/measure_search_ab.py OLD_TREE NEW_TREE URL``.

Each tree runs in a process of its own (``PYTHONPATH`` = the tree), both on the same
database (a PostgreSQL URL or a SQLite path), searching the bench's user with 500 entries
(:func:`memkeeper.bench.measure.fill_search_user`, the bench's queries). They take turns, a
batch of searches each, the first of each pair alternating, so that both see the same
machine: on a shared machine the speed of one minute is not the next one's, and two runs
one after the other compare the minutes more than the code. Prints each tree's p50, p90
and p99 over all its searches. Not part of the suite (it takes a minute or two).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

ROUNDS = 24
BATCH = 25


def worker(target: str) -> None:
    """One tree's side: fill the search user, then answer each batch size read from stdin
    with that many searches' times (ms) as a JSON list."""
    from memkeeper.bench import measure
    from memkeeper.bench.generate import AGENT_PREFIX, NOW
    from memkeeper.bench.workers import running_clock
    from memkeeper.config import Config
    from memkeeper.store import MemoryStore

    store = MemoryStore(target, config=Config(), clock=running_clock(NOW), actor="bench")
    user = f"{AGENT_PREFIX}search"
    measure.fill_search_user(store, user)
    for n in range(30):  # warm: the postings kept, the statements prepared
        store.search(user, measure.search_query(n))
    print("ready", flush=True)
    n = 0
    for line in sys.stdin:
        times = []
        for _ in range(int(line)):
            began = time.perf_counter()
            store.search(user, measure.search_query(n))
            times.append((time.perf_counter() - began) * 1000)
            n += 1
        print(json.dumps(times), flush=True)
    store.close()


def main(old: str, new: str, target: str) -> None:
    sides = {}
    for name, tree in (("old", old), ("new", new)):
        env = dict(os.environ, PYTHONPATH=tree)
        sides[name] = subprocess.Popen(
            [sys.executable, __file__, "--worker", target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert sides[name].stdout is not None and sides[name].stdout.readline() == "ready\n"
    times: dict[str, list[float]] = {"old": [], "new": []}
    for turn in range(ROUNDS):
        for name in ("old", "new") if turn % 2 == 0 else ("new", "old"):
            side = sides[name]
            assert side.stdin is not None and side.stdout is not None
            side.stdin.write(f"{BATCH}\n")
            side.stdin.flush()
            times[name] += json.loads(side.stdout.readline())
    for side in sides.values():
        assert side.stdin is not None
        side.stdin.close()
        side.wait()
    for name, found in times.items():
        found.sort()
        p50, p90, p99 = (found[int(q * len(found))] for q in (0.5, 0.9, 0.99))
        print(f"{name}: {len(found)} searches, p50 {p50:.2f} p90 {p90:.2f} p99 {p99:.2f} ms")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2])
    elif len(sys.argv) == 4:
        main(*sys.argv[1:])
    else:
        sys.exit(__doc__)
