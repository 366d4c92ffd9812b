"""``memkeeper bench --forget``: a small run has every figure, and reuses what it kept."""

from __future__ import annotations

import json
from pathlib import Path

from memkeeper.cli import main


def test_a_small_forget_bench_reports_both_ways_and_no_byte_left(capsys, tmp_path: Path) -> None:
    keep = tmp_path / "kept"
    argv = ["bench", "--forget", "--memories", "1500", "--users", "30", "--json"]
    assert main([*argv, "--keep", str(keep)]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["database"]["reused"] is False
    for mode in ("rebuild", "in_place"):
        found = figures[mode]
        assert found["forget"]["erased"] >= 1
        assert found["forget"]["seconds"] >= found["forget"]["scrub_seconds"] > 0
        assert found["secret_left_in"] == []
        for phase in ("agents_during_forget", "agents_without_forget"):
            agents = found[phase]
            assert agents["calls"] >= 4 and agents["errors"] == 0, agents["error_samples"]
    assert figures["rebuild"]["forget"]["rebuilt"]  # the whole-file way rebuilds
    assert figures["in_place"]["forget"]["rebuilt"] == []
    assert figures["in_place"]["forget"]["fallbacks"] == []
    assert [t["what"] for t in figures["targets"]] == [
        "removing the erased bytes (the scrub), seconds",
        "agents during the scrub: p99 / max ms, errors in the forget",
        "files still holding the erased value",
    ]
    # A second run reuses the database it kept (the copies it forgot in are gone).
    assert main([*argv[:-1], "--keep", str(keep)]) == 0
    out = capsys.readouterr().out
    assert "(reused)" in out and "in place:" in out and "rebuild:" in out
    assert sorted(p.name for p in keep.iterdir()) == [
        "forget-base-cold.db",
        "forget-base.db",
        "forget-base.json",
    ]
