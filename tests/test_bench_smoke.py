"""A small run of the summarize benchmark, so the script keeps working (figures are not
checked). ``memkeeper bench`` has its own smoke test: tests/test_bench_cli.py."""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

import fake_llm
from fake_llm import FakeLLM, Recorded, Reply, summarize_config

from memkeeper.bench import summarize_bench


class _FirstTwoTogether(FakeLLM):
    """The bench's fake server, holding each of the first two calls until both have arrived.

    Two calls in flight at once is then a fact of the order of events, not a hope about the
    scheduler: a loaded machine may start the second call after the first one's answer delay.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.both_in = threading.Barrier(2, timeout=60)
        self._arrivals = 0

    def reply_for(self, request: Recorded) -> Reply:
        with self._lock:
            arrival = self._arrivals
            self._arrivals += 1
        if arrival < 2:
            self.both_in.wait()
        return super().reply_for(request)


def test_summarize_benchmark_runs_a_few_sessions(capsys, monkeypatch) -> None:
    monkeypatch.setenv("ZHIPUAI_API_KEY", "placeholder")  # the bench sets its own; restore after
    servers: list[_FirstTwoTogether] = []

    def gated(*args: Any, **kwargs: Any) -> _FirstTwoTogether:
        servers.append(_FirstTwoTogether(*args, **kwargs))
        return servers[-1]

    # The bench finds the fake server in this very module (tests/fake_llm.py).
    assert summarize_bench.fake_llm_module() is fake_llm
    monkeypatch.setattr(fake_llm, "FakeLLM", gated)
    # Generous client timeout: a held call must not time out and be retried.
    monkeypatch.setattr(
        fake_llm, "summarize_config", partial(summarize_config, timeout_seconds=60.0)
    )
    args = ["--sessions", "4", "--concurrency", "2", "--delay", "0.05", "--messages", "22"]
    assert summarize_bench.main(args) == 0
    out = capsys.readouterr().out
    assert not servers[0].both_in.broken
    assert "summarized 4" in out and "most in flight at once 2" in out
