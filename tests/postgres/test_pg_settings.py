"""The session settings a store's connection gets, and keeps across a reconnect."""

from __future__ import annotations

import psycopg
import pytest

from memkeeper import MemoryStore
from memkeeper.config import Config


def _show(store: MemoryStore, name: str) -> str:
    return store.storage.hot.raw.execute(f"SHOW {name}").fetchone()[0]


@pytest.mark.parametrize(("synchronous", "expected"), [("normal", "off"), ("full", "on")])
def test_database_synchronous_sets_the_commit_durability(
    pg_database: str, synchronous: str, expected: str
) -> None:
    config = Config.model_validate({"database": {"synchronous": synchronous}})
    with MemoryStore(pg_database, config=config) as store:
        assert _show(store, "synchronous_commit") == expected
        pid = store.storage.hot.raw.info.backend_pid
        with psycopg.connect(pg_database, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        store.remember("ann", "city", "Oslo")  # on a new connection
        assert store.storage.hot.raw.info.backend_pid != pid
        assert _show(store, "synchronous_commit") == expected
        assert _show(store, "search_path").startswith("memkeeper")
