"""``memkeeper bench --forget``: a small run has every figure, and reuses what it kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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
        "the forget call, seconds",
        "agents during the forget: p99 / max ms, errors",
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


@pytest.mark.postgres
def test_the_postgres_leg_times_the_erasure_and_its_vacuums_and_reuses_what_it_kept(
    capsys, tmp_path: Path, pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers.postgres import create_database

    from memkeeper import MemoryStore
    from memkeeper.storage.postgres.scratch import has_memkeeper_schema

    monkeypatch.setattr("memkeeper.bench.forget_postgres.IDLE_SECONDS", 0.5)
    url, keep = create_database(pg_server, "mk_forget_bench"), tmp_path / "kept"
    argv = ["bench", "--forget", "--postgres", url, "--memories", "1500", "--users", "30"]
    assert main([*argv, "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["database"]["reused"] is False and figures["server"]
    forget = figures["forget"]
    assert forget["erased"] >= 1
    assert forget["seconds"] >= forget["erase_seconds"] + forget["vacuum_seconds"] - 0.002
    assert forget["erase_seconds"] > 0 and forget["vacuum_seconds"] > 0
    # Every table the erasure deleted from is vacuumed, each timed.
    assert {"memories", "cold_memories", "changes"} <= set(forget["vacuumed"])
    assert set(forget["vacuum_tables"]) == set(forget["vacuumed"])
    assert figures["secret_left_in"] == []
    for phase in ("agents_during_forget", "agents_without_forget"):
        agents = figures[phase]
        assert agents["calls"] >= 1 and agents["errors"] == 0, agents["error_samples"]
    assert figures["agents_during_vacuum"]["errors"] == 0
    assert [t["what"] for t in figures["targets"]] == [
        "the forget call, seconds",
        "agents during the forget: p99 / max ms, errors",
        "tables with a row still holding the erased value",
    ]
    assert not has_memkeeper_schema(url)  # without --keep, its schema is dropped
    # With --keep, the schema stays for the next run, which reuses it (a secret of its own).
    assert main([*argv, "--keep", str(keep)]) == 0
    assert "(reused)" not in capsys.readouterr().out
    assert main([*argv, "--keep", str(keep)]) == 0
    out = capsys.readouterr().out
    assert "(reused)" in out and "the VACUUMs" in out
    assert "forget of u000023's key" in out  # each run on a kept schema: another user
    assert "erased value still in      no table" in out
    # A memkeeper schema the bench did not load is a real memory: refused, left alone.
    from memkeeper.storage.postgres.scratch import drop_memkeeper_schema

    drop_memkeeper_schema(url)
    with MemoryStore(url) as store:
        store.remember("ann", "city", "Oslo")
    assert main([*argv, "--keep", str(keep)]) != 0
    assert "scratch database" in capsys.readouterr().err
    with MemoryStore(url) as store:
        assert store.recall("ann", "city").value == "Oslo"
