"""``memkeeper bench``: a small run has every figure, and the pieces behave (issue 10, §4)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memkeeper.bench.generate import generate
from memkeeper.cli import main
from memkeeper.config import Config


def test_a_small_bench_prints_every_figure_as_json(capsys, tmp_path: Path) -> None:
    keep = tmp_path / "kept"
    code = main(["bench", "--memories", "2000", "--users", "40", "--json", "--keep", str(keep)])
    out = capsys.readouterr().out
    assert code == 0
    figures = json.loads(out)
    first, second, floor = figures["pass"], figures["second_pass"], figures["floor"]
    # Every job had something to do, and the floor made the same changes, ending alike.
    assert set(first["by_label"]) == {
        "expire",
        "retire (expired)",
        "retire (low_confidence)",
        "retire (over_cap)",
        "retire (superseded)",
    }
    assert set(first["statuses"].values()) == {"ok"}
    assert 5 <= first["due_percent"] <= 15
    assert floor["by_label"] == first["by_label"]
    assert floor["same_state"] is True
    assert set(floor["differences"].values()) == {0}
    assert floor["ratio"] > 0
    assert second["changes"] == 0 and second["percent_of_first"] > 0
    assert first["peak_rss_mb"] > 0
    for phase in ("agents_during_pass", "agents_without_pass"):
        agents = figures[phase]
        assert agents["calls"] >= 4
        assert agents["errors"] == 0, agents["error_samples"]
        assert 0 < agents["p50_ms"] <= agents["p99_ms"] <= agents["max_ms"]
    assert figures["agents_during_pass"]["pass"]["by_label"] == first["by_label"]
    growth = figures["growth"]
    assert growth["recalls"] == 500
    assert {"bytes_per_recall", "file_bytes_per_recall", "change_rows_per_recall"} <= set(growth)
    rates = figures["rates"]
    assert rates["recall"] > 0 and rates["remember"] > 0
    assert rates["search"] > 0
    search = figures["search"]
    assert search["entries"] == 500 and search["searches"] > 0
    assert 0 < search["p50_ms"] <= search["p99_ms"] <= search["max_ms"]
    assert search["keyword_index"]["bytes"] > 0
    meaning = search["by_meaning"]
    # Every search used the vectors; the query's embedding is timed apart from the search.
    assert meaning["by_meaning"] == meaning["searches"] > 0
    assert 0 < meaning["p50_ms"] <= meaning["p99_ms"] <= meaning["max_ms"]
    assert meaning["embed_max_ms"] > 0
    index = figures["index"]
    assert index["status"] == "ok" and index["latency_ms"] == 100
    assert index["entries_indexed"] > 0 and index["entries_failed"] == 0
    # Batches went out concurrently, each call at least the stand-in's latency.
    assert index["max_in_flight"] == index["concurrency"] == 2
    assert index["calls"] * 0.1 / index["concurrency"] <= index["seconds"] * 1.05
    assert 0 < index["entries_per_s"] <= index["ideal_entries_per_s"]
    assert [t["what"] for t in figures["targets"]] == [
        "memkeeper / floor",
        "second pass, % of the first",
        "agents during a pass: p99 / max ms, errors",
        "growth per recall, bytes",
        "search, user with 500 entries: p50 / p99 ms (no query embedding)",
        "peak RSS of the pass, MiB",
    ]
    kept = sorted(path.name for path in keep.iterdir() if path.suffix == ".db")
    assert kept == [
        "agents-cold.db",
        "agents.db",
        "floor-cold.db",
        "floor.db",
        "memkeeper-cold.db",
        "memkeeper.db",
    ]


def test_keep_refuses_a_directory_that_is_not_empty(capsys, tmp_path: Path) -> None:
    (tmp_path / "something").write_text("x")
    code = main(["bench", "--memories", "100", "--users", "2", "--keep", str(tmp_path)])
    assert code == 2
    assert "is not empty" in capsys.readouterr().err


def _dump(path: Path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT * FROM memories ORDER BY id").fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("seeds", [(7, 7), (7, 8)])
def test_the_generator_is_deterministic(tmp_path: Path, seeds: tuple[int, int]) -> None:
    paths = [tmp_path / f"{n}.db" for n in range(2)]
    for path, seed in zip(paths, seeds, strict=True):
        made = generate(path, Config(), memories=500, users=10, seed=seed)
        assert made.hot + made.cold == 500 + 4 * 40
    same = _dump(paths[0]) == _dump(paths[1])
    assert same is (seeds[0] == seeds[1])


def test_the_bench_is_not_imported_at_start_up() -> None:
    code = (
        "import sys, memkeeper, memkeeper.cli; "
        "print(sorted(m for m in sys.modules if m.startswith('memkeeper.bench')))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip() == "[]"
