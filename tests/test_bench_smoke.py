"""A small run of the jobs benchmark, so the script keeps working (figures are not checked)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).parent.parent / "bench" / "jobs_bench.py"


def test_jobs_benchmark_runs_on_a_small_database(capsys) -> None:
    spec = importlib.util.spec_from_file_location("jobs_bench", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = module.main(["--entries", "3000", "--users", "30", "--api-calls", "50", "--json"])
    assert results["expire"]["count"] == 3000
    assert set(results) >= {"expire --dry-run", "expire", "api remember", "api recall"}
    assert '"expire"' in capsys.readouterr().out
