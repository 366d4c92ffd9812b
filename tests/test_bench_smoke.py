"""Small runs of the benchmarks, so the scripts keep working (figures are not checked)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).parent.parent / "bench"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_jobs_benchmark_runs_on_a_small_database(capsys) -> None:
    module = _load("jobs_bench")
    results = module.main(["--entries", "3000", "--users", "30", "--api-calls", "50", "--json"])
    assert results["expire"]["count"] == 3000
    assert set(results) >= {"expire --dry-run", "expire", "api remember", "api recall"}
    assert '"expire"' in capsys.readouterr().out


def test_summarize_benchmark_runs_a_few_sessions(capsys, monkeypatch) -> None:
    monkeypatch.setenv("ZHIPUAI_API_KEY", "placeholder")  # the bench sets its own; restore after
    module = _load("summarize_bench")
    args = ["--sessions", "4", "--concurrency", "2", "--delay", "0.05", "--messages", "22"]
    assert module.main(args) == 0
    out = capsys.readouterr().out
    assert "summarized 4" in out and "most in flight at once 2" in out
