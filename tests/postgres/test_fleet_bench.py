"""``memkeeper bench --fleet N`` small: two hosts on one PostgreSQL, the leader killed once.

The bench's own figures are the README's; here it runs short (two hosts, one agent each, a
few seconds either side of the kill) to prove the measurement: another host takes over, no
agent call is lost (the dead host's agents fail over), the survivor stops cleanly on
SIGTERM, and the scratch schema is dropped."""

from __future__ import annotations

import pytest

from memkeeper.bench.fleet_load import fleet_table, measure_fleet
from memkeeper.errors import InvalidInput
from memkeeper.storage.postgres.scratch import has_memkeeper_schema

pytestmark = pytest.mark.e2e


def test_the_fleet_bench_kills_the_leader_and_another_host_takes_over(pg_database: str) -> None:
    figures = measure_fleet(
        2, pg_database, agents_per_host=1, rate=20.0, max_seconds=1.0, warm_up=2.0, after=2.0
    )
    assert figures["new_leader"] != figures["killed"]
    assert 0 < figures["takeover_seconds"] <= 30  # the default takeover bound
    assert figures["errors"] == 0, figures["error_samples"]
    assert figures["before"]["calls"] > 0 and figures["after"]["calls"] > 0
    assert figures["failovers"] >= 1  # the killed host's agent moved to the survivor
    assert list(figures["exit_statuses"].values()) == [0]
    # The most it serves (as fast as they can) apart from the latency at the stated load.
    assert figures["most"]["calls"] > 0
    assert figures["offered_calls_per_second"] == 40.0
    table = fleet_table(figures)
    assert "took over in" in table
    assert "most it serves" in table and "40 across the fleet; open loop" in table
    assert not has_memkeeper_schema(pg_database)


def test_the_fleet_bench_refuses_a_database_that_holds_a_memory(pg_database: str) -> None:
    from memkeeper import MemoryStore

    with MemoryStore(pg_database) as store:
        store.remember("ann", "city", "Oslo")
    with pytest.raises(InvalidInput, match="already holds a memkeeper schema"):
        measure_fleet(2, pg_database)
    with MemoryStore(pg_database) as store:
        assert store.recall("ann", "city").value == "Oslo"


def test_the_fleet_bench_needs_postgres(cli) -> None:  # type: ignore[no-untyped-def]
    code, _, err = cli("bench", "--fleet", "2")
    assert code == 2
    assert "--fleet needs --postgres" in err
