"""PostgreSQL stores under a frozen clock, dropped without ``close()``, as time-travel tests do.

With psycopg_pool, each store's pool ran a scheduler thread whose deadlines read
``time.monotonic``, which freezegun froze in some frames and not in others: a dropped store's
pool could not stop its threads ("couldn't stop thread ... within 5.0 seconds") and kept its
connections, and a loop of stores soon failed with "no connection within 10 s". memkeeper's
pool has no thread, waits on the real clock, and a dropped store closes its connections.

The suite's conftest tells freezegun to leave psycopg alone (for pytest's own timer and
older habits); these tests use freezegun's own defaults, as a user's program would, in this
process and in a fresh one. They run on the suite's real PostgreSQL server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import freezegun
import freezegun.config
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from memkeeper import DatabaseUnreachable, MemoryStore
from memkeeper.config import Config

STORES = 100


@pytest.fixture
def url(pg_server: Any) -> Iterator[str]:
    """A database of this test's own on the session's server (dropped afterwards)."""
    from helpers.postgres import create_database

    made = create_database(pg_server, "mk_frozen")
    yield made
    with psycopg.connect(pg_server.url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{conninfo_to_dict(made)["dbname"]}" WITH (FORCE)')


@pytest.fixture
def plain_freezegun(monkeypatch: pytest.MonkeyPatch) -> None:
    """freezegun as installed: its default ignore list, without the suite's additions."""
    monkeypatch.setattr(freezegun.config, "settings", freezegun.config.Settings())


def _memkeeper_sessions(url: str) -> int:
    dbname = conninfo_to_dict(url)["dbname"]
    with psycopg.connect(url, autocommit=True) as admin:
        (count,) = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
            " AND application_name = 'memkeeper'",
            (dbname,),
        ).fetchone()
    return count


@pytest.mark.usefixtures("plain_freezegun")
def test_a_hundred_dropped_stores_under_a_frozen_clock(url: str) -> None:
    MemoryStore(url).close()  # the schema, created before the clock stops
    threads_before = {t.ident for t in threading.enumerate()}
    began = time.perf_counter()
    with freezegun.freeze_time("2027-01-01T09:00:00Z") as frozen:
        for day in range(STORES):
            store = MemoryStore(url)  # never closed: dropped at the next turn
            store.remember("ann", "day", str(day))
            found = store.recall("ann", "day")
            assert found is not None and found.value == str(day)
            frozen.tick(timedelta(days=1))
        del store, found
    assert time.perf_counter() - began < 120  # a guard: the stall cost 5 s per store
    left = [t.name for t in threading.enumerate() if t.ident not in threads_before]
    assert left == []  # no pool thread, not even of the last store
    assert _memkeeper_sessions(url) == 0  # every dropped store gave its connections back


@pytest.mark.usefixtures("plain_freezegun")
def test_a_store_starts_no_thread(url: str) -> None:
    threads_before = {t.ident for t in threading.enumerate()}
    with freezegun.freeze_time("2027-01-01"), MemoryStore(url) as store:
        store.remember("ann", "city", "Oslo")
        assert [t for t in threading.enumerate() if t.ident not in threads_before] == []
        assert store.storage.pool.stats()["pool_size"] >= 1


@pytest.mark.usefixtures("plain_freezegun")
def test_a_wait_for_a_connection_ends_under_a_frozen_clock(url: str) -> None:
    """A thread beyond the pool's size waits connect_timeout_s of real time, then hears
    DatabaseUnreachable: the frozen clock never makes it wait for ever."""
    config = Config.model_validate({"database": {"pool_size": 1, "connect_timeout_s": 1}})
    outcome: list[BaseException | None] = []
    with freezegun.freeze_time("2027-01-01"), MemoryStore(url, config=config) as store:
        store.remember("ann", "city", "Oslo")

        def recall() -> None:
            try:
                store.recall("ann", "city")
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        with store.storage.lock:  # this thread holds the one connection
            waiter = threading.Thread(target=recall, daemon=True)
            waiter.start()
            waiter.join(60)
            assert not waiter.is_alive(), "the wait for a connection never ended"
        assert len(outcome) == 1 and isinstance(outcome[0], DatabaseUnreachable)
        assert "pool_size" in str(outcome[0])
        found = store.recall("ann", "city")  # given back: the next one is served
        assert found is not None and found.value == "Oslo"


PROGRAM = """
import sys, threading
from datetime import timedelta
from freezegun import freeze_time
from memkeeper import MemoryStore

url, count = sys.argv[1], int(sys.argv[2])
with freeze_time("2027-06-01") as frozen:
    for i in range(count):
        store = MemoryStore(url)
        store.remember("ann", "visit", str(i))
        frozen.tick(timedelta(hours=6))
print(store.recall("ann", "visit").value, threading.active_count())
"""


def test_a_program_of_dropped_stores_in_a_fresh_process(url: str) -> None:
    MemoryStore(url).close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMKEEPER_")}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, url, str(STORES)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [str(STORES - 1), "1"]
    assert "couldn't stop thread" not in done.stderr
    assert _memkeeper_sessions(url) == 0
