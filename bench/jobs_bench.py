"""Benchmark: how fast the maintenance jobs and the store API run on a large database.

    python bench/jobs_bench.py                  # 200,000 entries (about a minute on 2 cores)
    python bench/jobs_bench.py --entries 20000  # quicker

It loads N facts for 1,000 users directly with set-based SQL (bypassing the API, which would
take far longer to load and is measured separately), all unused for 200 days, then times:
a dry run of expire, the real expire run (N entries → pending review), a settle run with
nothing due, the API's remember and recall, and prints entries per second. The suite runs a
small version of this (tests/test_bench_smoke.py); the figures in the README come from here.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memkeeper import MemoryStore
from memkeeper.clock import fixed, to_db
from memkeeper.config import Config
from memkeeper.logs import configure
from memkeeper.maintenance.runner import run_once
from memkeeper.storage.schema import MEMORY_COLUMNS
from memkeeper.storage.sqlite import immediate_transaction

START = datetime(2026, 1, 1, tzinfo=UTC)


def load(store: MemoryStore, entries: int, users: int) -> None:
    """Insert ``entries`` active facts spread over ``users`` users, all last used at START."""
    stamp = to_db(START)
    rows = (
        (
            f"{i:016x}",
            f"user{i % users}",
            "",
            "fact",
            f"key{i // users}",
            f"value {i}",
            "bench",
            0.9,
            "active",
            0,
            None,
            stamp,
            stamp,
            None,
            0,
            stamp,
            stamp,
        )
        for i in range(entries)
    )
    names = ", ".join(MEMORY_COLUMNS)
    with immediate_transaction(store.storage.hot):
        store.storage.hot.conn.executemany(
            f"INSERT INTO memories ({names}) VALUES ({', '.join(':' + c for c in MEMORY_COLUMNS)})",
            rows,
        )


def timed(label: str, func, count: int, results: dict) -> object:
    began = time.perf_counter()
    value = func()
    seconds = time.perf_counter() - began
    results[label] = {
        "count": count,
        "seconds": round(seconds, 3),
        "per_second": round(count / seconds) if seconds else None,
    }
    return value


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--api-calls", type=int, default=2_000)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    configure(level="warning")
    config = Config.model_validate(
        {"database": {"batch_size": args.batch_size}, "jobs": {"prune": {"max_facts": 10**9}}}
    )
    later = START + timedelta(days=200)
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore(Path(tmp) / "bench.db", config=config, clock=fixed(later))
        timed(
            "load (bulk SQL)", lambda: load(store, args.entries, args.users), args.entries, results
        )
        dry = timed(
            "expire --dry-run",
            lambda: run_once(store, ["expire"], dry_run=True),
            args.entries,
            results,
        )
        real = timed("expire", lambda: run_once(store, ["expire"]), args.entries, results)
        timed("settle (nothing due)", lambda: run_once(store, ["settle"]), args.entries, results)
        assert dry.results[0].counts == real.results[0].counts == {"expire": args.entries}
        n = args.api_calls
        timed(
            "api remember",
            lambda: [store.remember("api", f"k{i}", "v") for i in range(n)],
            n,
            results,
        )
        timed("api recall", lambda: [store.recall("api", f"k{i}") for i in range(n)], n, results)
        store.close()
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"entries: {args.entries}, users: {args.users}, batch size: {args.batch_size}")
        for label, figures in results.items():
            print(
                f"  {label:<22} {figures['count']:>8} in {figures['seconds']:>8.3f} s  "
                f"({figures['per_second']}/s)"
            )
    return results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
