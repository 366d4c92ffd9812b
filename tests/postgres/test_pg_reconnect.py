"""A store whose connection the server drops: it reconnects, and never loses an acknowledged
write nor half-commits an unacknowledged one.

The server ends a backend as it does on a restart or a failover (``pg_terminate_backend``):
the store's next statement finds the connection dead.
"""

from __future__ import annotations

import pytest
from helpers.postgres import kill_backends

from memkeeper import MemoryStore
from memkeeper.errors import DatabaseUnreachable
from memkeeper.storage.transaction import write_transaction


def test_a_read_after_the_connection_died_reconnects(pg_database: str) -> None:
    with MemoryStore(pg_database) as store:
        store.remember("ann", "city", "Oslo")
        kill_backends(pg_database, store)
        assert store.recall("ann", "city").value == "Oslo"


def test_a_write_after_the_connection_died_commits_once(pg_database: str) -> None:
    with MemoryStore(pg_database) as store:
        kill_backends(pg_database, store)
        store.remember("ann", "city", "Oslo")
        kill_backends(pg_database, store)
        store.remember("ann", "tea", "green")
    with MemoryStore(pg_database) as again:
        assert [m.key for m in again.list_memories("ann")] == ["city", "tea"]
        assert len(again.changes(user_id="ann")) == 2


def test_a_connection_lost_inside_a_write_commits_nothing(pg_database: str) -> None:
    with MemoryStore(pg_database) as store:
        store.remember("ann", "city", "Oslo")
        storage = store.storage
        with pytest.raises(DatabaseUnreachable) as caught, write_transaction(storage) as hot:
            hot.execute("DELETE FROM memories WHERE user_id = ?", ["ann"])
            kill_backends(pg_database, store)
            hot.execute("DELETE FROM changes WHERE user_id = ?", ["ann"])
        assert "did not commit" in str(caught.value)
        # The same store goes on working, and the delete never happened.
        assert store.recall("ann", "city").value == "Oslo"


def test_an_agent_goes_on_after_the_server_restarted_and_loses_nothing(
    pg_server, pg_database: str
) -> None:
    with MemoryStore(pg_database) as store:
        for n in range(5):
            store.remember("ann", f"k{n}", f"v{n}")
        pg_server.restart()
        store.remember("ann", "after", "the restart")  # acknowledged on a new connection
        assert store.recall("ann", "k4").value == "v4"
    with MemoryStore(pg_database) as again:
        assert sorted(m.key for m in again.list_memories("ann")) == [
            "after",
            "k0",
            "k1",
            "k2",
            "k3",
            "k4",
        ]
