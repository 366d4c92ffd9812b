"""The session settings a store's connection gets, and keeps across a reconnect."""

from __future__ import annotations

import psycopg
import pytest

from memkeeper import MemoryStore
from memkeeper.config import Config


def _show(store: MemoryStore, name: str) -> str:
    with store.storage.lock:  # a connection of the store's pool, leased to this thread
        return store.storage.hot.raw.execute(f"SHOW {name}").fetchone()[0]


@pytest.mark.parametrize(("synchronous", "expected"), [("normal", "off"), ("full", "on")])
def test_database_synchronous_sets_the_commit_durability(
    pg_database: str, synchronous: str, expected: str
) -> None:
    config = Config.model_validate({"database": {"synchronous": synchronous}})
    with MemoryStore(pg_database, config=config) as store:
        assert _show(store, "synchronous_commit") == expected
        pids = store.storage.backend_pids()
        with psycopg.connect(pg_database, autocommit=True) as admin:
            for pid in pids:
                admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        store.remember("ann", "city", "Oslo")  # on a new connection
        assert store.storage.backend_pids().isdisjoint(pids)
        assert _show(store, "synchronous_commit") == expected
        assert _show(store, "search_path").startswith("memkeeper")
