"""The bench's PostgreSQL leg, small (``memkeeper bench --postgres URL`` runs it at 1,000,000
beside SQLite's): the same generated rows loaded, a pass that changes what SQLite's would,
the agents beside it, and a database holding a real memory refused."""

from __future__ import annotations

import pytest

from memkeeper import MemoryStore
from memkeeper.bench.postgres_bench import run_postgres
from memkeeper.bench.run import Children
from memkeeper.errors import InvalidInput
from memkeeper.storage.postgres.scratch import has_memkeeper_schema


def test_the_postgres_leg_loads_passes_and_measures_then_drops_its_schema(
    pg_database: str,
) -> None:
    figures = run_postgres(
        pg_database,
        memories=600,
        users=6,
        seed=1,
        calls=50,
        children_factory=lambda url: Children(url, 1),  # type: ignore[arg-type]
        say=lambda text: None,
    )
    loaded = figures["database"]
    assert loaded["hot_memories"] > 0 and loaded["cold_memories"] > 0
    assert figures["pass"]["changes"] > 0 and figures["pass"]["errors"] == []
    assert figures["second_pass"]["changes"] == 0  # nothing due right after
    assert figures["agents_during_pass"]["calls"] > 0
    assert figures["agents_during_pass"]["errors"] == 0
    assert figures["search"]["searches"] == 50 and figures["server"]
    assert not has_memkeeper_schema(pg_database)  # the bench's own schema is gone


def test_the_bench_refuses_a_database_that_holds_a_memory(pg_database: str) -> None:
    with MemoryStore(pg_database) as store:
        store.remember("ann", "city", "Oslo")
    with pytest.raises(InvalidInput, match="scratch database"):
        run_postgres(
            pg_database,
            memories=600,
            users=6,
            seed=1,
            calls=50,
            children_factory=lambda url: pytest.fail("must refuse before starting anything"),
            say=lambda text: None,
        )
    with MemoryStore(pg_database) as store:
        assert store.recall("ann", "city").value == "Oslo"
