"""Statements sent with the next one on PostgreSQL keep every guarantee of sending them alone.

A transaction's ``BEGIN`` and locks, savepoints and writes whose result nobody reads wait
for the next statement and go with it in one round trip
(:mod:`memkeeper.storage.postgres.round_trips`). These tests check what that must not
change: an error in a deferred write rolls the whole transaction back, a savepoint rolled
back undoes only its own statements (sent or not), a connection lost before the ``COMMIT``
commits nothing, the raw connection sees the deferred writes, and many rows of one
``UPDATE`` sent as one statement leave the rows as one statement per row would.
"""

from __future__ import annotations

import psycopg
import pytest

from memkeeper import MemoryStore
from memkeeper.errors import DatabaseUnreachable
from memkeeper.storage.postgres.dialect import many_updates, translate
from memkeeper.storage.postgres.round_trips import sent_with_next
from memkeeper.storage.transaction import write_transaction


@pytest.fixture
def store(pg_database: str):
    with MemoryStore(pg_database) as store:
        yield store


def _value(store: MemoryStore, key: str) -> str | None:
    rows = store.storage.hot.query(
        "SELECT value FROM memories WHERE user_id = 'ann' AND key = ? AND state = 'active'",
        [key],
    )
    return next((row["value"] for row in rows), None)


def test_a_deferred_write_that_fails_rolls_back_the_whole_transaction(store) -> None:
    store.remember("ann", "city", "Oslo")
    store.remember("ann", "tea", "green")
    failing = pytest.raises(psycopg.errors.CheckViolation)
    with failing, write_transaction(store.storage, users=["ann"]) as hot:
        hot.execute(
            "UPDATE memories SET value = 'Rome' WHERE user_id = ? AND key = ?", ["ann", "city"]
        )
        with sent_with_next(hot):
            result = hot.execute(
                "UPDATE memories SET access_count = -1 WHERE user_id = ? AND key = ?",
                ["ann", "tea"],
            )
        assert result.rowcount == -1  # no answer yet: it leaves with the COMMIT
    assert _value(store, "city") == "Oslo"
    assert store.recall("ann", "tea").access_count == 1


def test_a_savepoint_rolled_back_undoes_only_its_own_statements(store) -> None:
    store.remember("ann", "city", "Oslo")
    store.remember("ann", "tea", "green")
    set_city = "UPDATE memories SET value = ? WHERE user_id = 'ann' AND key = 'city'"
    with write_transaction(store.storage, users=["ann"]) as hot:
        hot.execute(set_city, ["Rome"])
        # Rolled back before anything of it left: nothing to undo on the server.
        with pytest.raises(KeyError), hot.atomic():
            with sent_with_next(hot):
                hot.execute("UPDATE memories SET value = 'black' WHERE key = 'tea'")
            raise KeyError("unsent")
        # Rolled back after its statements were sent: the server undoes them.
        with pytest.raises(KeyError), hot.atomic():
            hot.execute("UPDATE memories SET value = 'white' WHERE key = 'tea'")
            hot.execute("SELECT 1")
            raise KeyError("sent")
        with sent_with_next(hot):
            hot.execute(set_city, ["Paris"])
    assert _value(store, "city") == "Paris"
    assert _value(store, "tea") == "green"


def test_a_connection_lost_before_the_commit_commits_no_deferred_write(
    store, pg_database: str
) -> None:
    store.remember("ann", "city", "Oslo")
    lost = pytest.raises(DatabaseUnreachable)
    with lost as caught, write_transaction(store.storage, users=["ann"]) as hot:
        hot.execute("SELECT 1")  # BEGIN and the locks leave with it
        with sent_with_next(hot):
            hot.execute("DELETE FROM memories WHERE user_id = ?", ["ann"])
        pid = hot.raw.info.backend_pid  # the raw connection: the DELETE is sent first
        with psycopg.connect(pg_database, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
    assert "did not commit" in str(caught.value)
    assert store.recall("ann", "city").value == "Oslo"


def test_values_with_percent_signs_and_quotes_survive_being_sent_together(store) -> None:
    store.remember("ann", "city", "Oslo")
    odd = "50% off; 'quoted' %s %(name)s"
    with write_transaction(store.storage, users=["ann"]) as hot:
        with sent_with_next(hot):
            hot.execute("UPDATE memories SET value = ? WHERE user_id = 'ann'", [odd])
            hot.execute("UPDATE memories SET source = '100%' WHERE user_id = 'ann'")
        read = hot.execute("SELECT value, source FROM memories WHERE user_id = ?", ["ann"])
        assert read.fetchone() == (odd, "100%")
    assert store.recall("ann", "city").value == odd


def test_the_raw_connection_sees_the_deferred_writes(store) -> None:
    store.remember("ann", "city", "Oslo")
    with write_transaction(store.storage, users=["ann"]) as hot:
        with sent_with_next(hot):
            hot.execute("UPDATE memories SET value = 'Rome' WHERE user_id = 'ann'")
        seen = hot.raw.execute("SELECT value FROM memories WHERE user_id = 'ann'").fetchone()
    assert seen == ("Rome",)


def test_many_rows_of_one_update_by_key_are_one_statement_with_the_same_outcome(store) -> None:
    ids = [store.remember("ann", f"k{n}", f"v{n}").id for n in range(3)]
    sql = "UPDATE memories SET value = ?, ttl_days = ?, confidence = ? WHERE id = ?"
    rows = [("a", None, 0.25, ids[0]), ("b", 7, 1, ids[1]), ("c%", 30, 0.5, ids[2])]
    merged = many_updates(translate(sql), rows)
    assert merged is not None and merged[0].count("UPDATE") == 1
    assert many_updates(translate(sql), [*rows, ("d", 1, 0.1, ids[0])]) is None  # a key twice
    named = "UPDATE memories SET value = :value WHERE id = :id"
    assert many_updates(translate(named), [{"value": "x", "id": i} for i in ids]) is not None
    assert many_updates(translate(sql), [("a", float("nan"), 0.1, ids[0])] * 1) is None
    with write_transaction(store.storage, users=["ann"]) as hot:
        assert hot.conn.executemany(sql, rows).rowcount == 3
    got = {
        row["id"]: (row["value"], row["ttl_days"], row["confidence"])
        for row in store.storage.hot.query("SELECT * FROM memories WHERE user_id = 'ann'")
    }
    assert got == {ids[0]: ("a", None, 0.25), ids[1]: ("b", 7, 1.0), ids[2]: ("c%", 30, 0.5)}
    with write_transaction(store.storage, users=["ann"]) as hot:  # a repeated key: the last wins
        hot.conn.executemany(sql, [("x", None, 0.3, ids[0]), ("y", None, 0.4, ids[0])])
    assert store.get(ids[0]).value == "y"
