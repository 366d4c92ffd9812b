"""Benchmark: wall time of one summarize run over 40 due sessions at max_concurrency 8.

The LLM is the tests' fake server on 127.0.0.1, answering every call after a fixed delay
(default 0.5 s, like a quick flash-model answer), so the figure measures memkeeper's own
overhead and its concurrency, not a real model. The suite runs a small version
(tests/test_bench_smoke.py). From a source checkout (the fake server is the tests' own,
``tests/fake_llm.py``, which an installed memkeeper does not ship):

    python -m memkeeper.bench.summarize_bench [--sessions 40] [--concurrency 8]
        [--delay 0.5] [--messages 25]

Ideal wall time is ceil(sessions / concurrency) x delay; the printed overhead is the rest.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

from memkeeper import MemoryStore
from memkeeper.logs import configure
from memkeeper.maintenance.runner import run_once

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
TESTS = Path(__file__).resolve().parents[2] / "tests"
"""The checkout's tests, where the fake LLM server lives."""


def fake_llm_module() -> ModuleType:
    """The tests' fake LLM module (``tests/fake_llm.py``), found beside this checkout."""
    if not (TESTS / "fake_llm.py").is_file():
        raise SystemExit(
            f"the summarize benchmark needs a source checkout: {TESTS / 'fake_llm.py'} is missing"
        )
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    return importlib.import_module("fake_llm")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--delay", type=float, default=0.5, help="seconds per fake answer")
    parser.add_argument("--messages", type=int, default=25, help="messages per session")
    args = parser.parse_args(argv)

    fakes = fake_llm_module()
    configure(level="warning")
    os.environ["ZHIPUAI_API_KEY"] = "bench-key-not-secret"
    with tempfile.TemporaryDirectory() as tmp, fakes.FakeLLM(delay=args.delay) as fake:
        config = fakes.summarize_config(fake.url, job={"max_concurrency": args.concurrency})
        with MemoryStore(Path(tmp) / "memory.db", config=config) as store:
            for n in range(args.sessions):
                fakes.add_session(
                    store, f"s{n:03d}", args.messages, user_id=f"u{n % 10}", start=START
                )
            began = time.perf_counter()
            (result,) = run_once(store, ["summarize"], now=START).results
            wall = time.perf_counter() - began

    ideal = math.ceil(args.sessions / args.concurrency) * args.delay
    sequential = args.sessions * args.delay
    print(
        f"summarize: {args.sessions} sessions x {args.messages} messages, "
        f"max_concurrency {args.concurrency}, fake answer delay {args.delay:g} s"
    )
    print(f"  status {result.status}; summarized {result.stats.get('sessions_summarized')}")
    print(f"  requests {len(fake.requests)}; most in flight at once {fake.max_in_flight}")
    print(f"  wall time {wall:.2f} s (ideal {ideal:.2f} s; sequential would be {sequential:.1f} s)")
    print(
        f"  overhead {wall - ideal:.2f} s ({(wall - ideal) / args.sessions * 1000:.1f} ms/session)"
    )
    return 0 if result.status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
