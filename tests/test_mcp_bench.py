"""``memkeeper bench --mcp-clients N`` (issue 13): per-tool latencies of HTTP clients during a
maintenance pass and without one, measured on a small generated database."""

from __future__ import annotations

import json

import pytest

from memkeeper.bench.mcp_load import TOOLS, mcp_table
from memkeeper.cli import main


def test_bench_reports_each_tools_latency_during_a_pass_and_without(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["bench", "--mcp-clients", "2", "--memories", "400", "--users", "10", "--json"]
    assert main(argv) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["clients"] == 2 and figures["memories"] == 400
    assert figures["pass"]["ok"] is True and figures["pass"]["changes"] > 0
    assert figures["server"]["processes"] == 1
    calls = sum(figures[phase]["recall_search"]["calls"] for phase in ("during_pass", "no_pass"))
    assert figures["server"]["fast_path_calls"] >= calls  # every stateless call took it
    for phase in ("during_pass", "no_pass"):
        part = figures[phase]
        assert part["errors"] == 0, part["error_samples"]
        assert part["recall_search_per_second"] > 0
        assert part["server_cpu_ms_per_call"] > 0 and part["client_cpu_ms_per_call"] > 0
        reads = part["recall_search"]
        assert reads["calls"] == part["tools"]["recall"]["calls"] + part["tools"]["search"]["calls"]
        assert set(part["tools"]) <= set(TOOLS) and part["tools"]
        for row in part["tools"].values():
            assert row["calls"] >= 1
            assert 0 < row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"] <= row["max_ms"]
    assert set(figures["no_pass"]["tools"]) == set(TOOLS)  # at least a second of calls
    table = mcp_table(figures)
    assert "2 clients" in table and "no_pass" in table and "remember" in table
