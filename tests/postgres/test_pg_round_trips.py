"""A maintenance pass on PostgreSQL pays few round trips per batch, and never queues agents.

Round trips are read from libpq's own protocol trace of the job's connection (each ``Query``
or pipeline ``Sync`` the client sends is answered by one ``ReadyForQuery``), never from a
clock. Two stores on one database stand for the job's process and an agent's.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from memkeeper import MemoryStore
from memkeeper.clock import system_now
from memkeeper.maintenance.runner import run_job
from memkeeper.storage.postgres.dialect import (
    ROWS_PER_STATEMENT,
    many_deletes,
    many_rows,
    translate,
)
from memkeeper.storage.transaction import write_transaction
from memkeeper.storage.transitions import Transition, apply, with_changes


def _round_trips(store: MemoryStore, work: Callable[[], Any]) -> tuple[int, Any]:
    """How many times ``work`` waited for the server on ``store``'s connection, and its result
    (under one lease, so every statement of ``work`` runs on the connection traced)."""
    with store.storage.lock:
        return _traced(store.storage.hot.raw.pgconn, work)


def _traced(pgconn: Any, work: Callable[[], Any]) -> tuple[int, Any]:
    with tempfile.TemporaryFile("w+") as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            result = work()
        finally:
            pgconn.untrace()
        trace.seek(0)
        lines = trace.read().splitlines()
    return sum(1 for line in lines if "\tReadyForQuery" in line), result


def _demotions(store: MemoryStore, users: int, prefix: str = "user") -> list[Transition]:
    ids = [store.remember(f"{prefix}-{n}", "city", f"Town {n}").id for n in range(users)]
    images = store.storage.hot_images(ids)
    return [
        Transition(i, images[i], with_changes(images[i], confidence=0.5), "demote", "test")
        for i in ids
    ]


@pytest.fixture
def two_stores(pg_database: str):
    with MemoryStore(pg_database) as job, MemoryStore(pg_database) as agent:
        yield job, agent


def test_a_jobs_batch_over_many_users_costs_the_same_few_round_trips(two_stores) -> None:
    job, _ = two_stores
    small, large = _demotions(job, 2, "few"), _demotions(job, 40, "many")

    def batch(transitions: list[Transition]) -> Callable[[], Any]:
        return lambda: apply(job.storage, transitions, actor="job", now=system_now(), run_id="r")

    trips_small, _ = _round_trips(job, batch(small))
    trips_large, outcomes = _round_trips(job, batch(large))
    assert all(outcome.applied for outcome in outcomes)
    # BEGIN with every lock and try; the re-read, hot and cold; the writes with the COMMIT:
    # not one per user/row.
    assert trips_large == trips_small <= 3
    assert [job.get(t.memory_id).confidence for t in large] == pytest.approx([0.5] * 40)
    logged = job.storage.hot.query("SELECT count(*) AS n FROM changes WHERE action = 'demote'")
    assert next(logged)["n"] == len(small) + len(large)  # each change with its log row


def test_a_fenced_batch_sends_its_fence_check_with_its_commit(two_stores) -> None:
    """Under a job lock every COMMIT is fenced (leadership.Fence): the check goes with the
    COMMIT and the writes, not in a round trip of its own before it; a moved epoch still
    rolls the batch back."""
    from memkeeper.errors import LockLost
    from memkeeper.maintenance.locks import job_lock
    from memkeeper.storage.postgres.leadership import bump_epoch

    job, agent = two_stores
    batch, moved = _demotions(job, 5, "fenced"), _demotions(job, 2, "moved")
    with job_lock(job.storage, "expire").hold():
        trips, outcomes = _round_trips(
            job, lambda: apply(job.storage, batch, actor="job", now=system_now(), run_id="r")
        )
        assert all(outcome.applied for outcome in outcomes)
        assert trips == 3  # BEGIN with the locks; the re-read; writes, check and COMMIT
        with agent.storage.lock:
            bump_epoch(
                agent.storage.hot.raw, "memkeeper", "job:expire", host="b", pid=2, now=system_now()
            )
        with pytest.raises(LockLost, match="job:expire epoch"):
            apply(job.storage, moved, actor="job", now=system_now(), run_id="r")
    assert [job.get(t.memory_id).confidence for t in moved] != [0.5, 0.5]  # rolled back


def test_a_tried_batch_still_leaves_the_user_an_agent_is_writing(two_stores) -> None:
    job, agent = two_stores
    transitions = _demotions(job, 6)
    busy = transitions[3].expected["user_id"]  # type: ignore[index]
    with write_transaction(agent.storage, users=[busy]) as hot:
        hot.execute("SELECT 1")  # a write's locks are taken with its first statement
        outcomes = apply(job.storage, transitions, actor="job", now=system_now(), run_id="r")
    assert [o.applied for o in outcomes] == [True, True, True, False, True, True]


def test_a_jobs_start_and_end_never_wait_for_an_agents_write(two_stores) -> None:
    job, agent = two_stores
    job.remember("ann", "city", "Oslo")
    with job.storage.lock, write_transaction(agent.storage, users=["ann"]) as hot:
        hot.execute("SELECT 1")  # a write's locks are taken with its first statement
        job.storage.hot.raw.execute("SET lock_timeout = '3s'")  # waiting would fail the run
        result = run_job(job, "settle", now=system_now(), lock_wait_seconds=0)
        job.storage.hot.raw.execute("RESET lock_timeout")
    assert result.status == "ok"
    assert [run.status for run in job.job_runs(job="settle")] == ["ok"]


def test_many_rows_of_one_insert_become_one_statement_with_the_same_outcome(two_stores) -> None:
    job, _ = two_stores
    conn = job.storage.hot.conn
    sql = (
        "INSERT OR REPLACE INTO uses (memory_id, day, count, first_at, last_at)"
        " VALUES (?, ?, ?, ?, ?)"
    )
    rows = [("m1", "d1", 1, "a", "a"), ("m2", "d1", 2, "b", "b"), ("m1", "d1", 3, "c", "c")]
    assert many_rows(translate(sql), rows) is None  # a key twice: one by one, the last wins
    assert many_rows(translate(sql), rows[:2]) is not None
    conn.executemany(sql, rows)
    ignored = conn.executemany(sql.replace("REPLACE", "IGNORE"), [("m3", "d", 1, "x", "x")] * 3)
    assert ignored.rowcount == 1  # the first of three same keys, as one statement each
    conn.executemany(sql, [("m2", "d1", 5, "e", "e"), ("m4", "d1", 4, "f", "f")])
    got = {(r["memory_id"], r["count"]) for r in job.storage.hot.query("SELECT * FROM uses")}
    assert got == {("m1", 3), ("m2", 5), ("m3", 1), ("m4", 4)}


def test_many_rows_leaves_other_statements_and_bulk_copies_alone() -> None:
    insert = translate("INSERT INTO changes (at, actor) VALUES (:at, :actor)")
    # Plain values: one JSON parameter (psycopg splits no statement of many placeholders).
    assert many_rows(insert, [{"at": "1", "actor": "a%"}, {"at": "2", "actor": None}]) == (
        "INSERT INTO changes (at, actor) SELECT v.at, v.actor"
        " FROM jsonb_populate_recordset(NULL::changes, %s::jsonb) AS v",
        ['[{"at": "1", "actor": "a%"}, {"at": "2", "actor": null}]'],
    )
    # Bytes, a NaN or a bool are no plain JSON value: the rows go as VALUES groups.
    for odd in (b"a", float("nan"), True):
        assert many_rows(insert, [{"at": "1", "actor": odd}, {"at": "2", "actor": "b"}]) == (
            "INSERT INTO changes (at, actor) VALUES (%s, %s), (%s, %s)",
            ["1", odd, "2", "b"],
        )
    assert many_rows(translate("DELETE FROM memories WHERE id = ?"), [("a",), ("b",)]) is None
    assert many_rows(insert, [{"at": "1", "actor": "a"}] * (ROWS_PER_STATEMENT + 1)) is None


def test_rows_sent_as_json_come_back_as_the_values_given(two_stores) -> None:
    job, _ = two_stores
    conn = job.storage.hot.conn
    rows = [
        ("2026-01-01", "job", None, "demote", "m1", "ann", "", 'it\'s 100% \\ "odd"', 7),
        ("2026-01-02", "job", "r", "demote", "m2", "bo", "ns", "深色模式 ünï", -3),
        ("2026-01-03", "job", "r", "demote", "m3", "cy", "", "0.1", 2**40),
    ]
    sql = (
        "INSERT INTO changes (at, actor, run_id, action, memory_id, user_id, namespace, reason,"
        " details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    assert "jsonb_populate_recordset" in many_rows(translate(sql), rows)[0]  # type: ignore[index]
    assert conn.executemany(sql, rows).rowcount == 3
    got = conn.execute(
        "SELECT at, actor, run_id, action, memory_id, user_id, namespace, reason, details"
        " FROM changes ORDER BY id"
    ).fetchall()
    assert [tuple(row) for row in got] == [(*row[:-1], str(row[-1])) for row in rows]


def test_many_deletes_by_key_become_one_statement_with_the_same_count(two_stores) -> None:
    job, _ = two_stores
    ids = [job.remember("ann", f"k{n}", "v").id for n in range(4)]
    delete = translate("DELETE FROM memories WHERE id = ?")
    assert many_deletes(delete, [("a",), ("b",)]) == (
        "DELETE FROM memories WHERE id IN (%s, %s)",
        ["a", "b"],
    )
    assert many_deletes(translate("DELETE FROM memories WHERE id = ? AND 1 = 1"), [("a",)]) is None
    assert many_deletes(translate("DELETE FROM uses WHERE memory_id = ?"), [("a", "b")]) is None
    trips, cursor = _round_trips(
        job,
        lambda: job.storage.hot.conn.executemany(
            "DELETE FROM memories WHERE id = ?", [(ids[0],), (ids[1],), (ids[0],), ("none",)]
        ),
    )
    assert (trips, cursor.rowcount) == (1, 2)  # each row deleted once, as one by one
    left = {row["id"] for row in job.storage.hot.query("SELECT id FROM memories")}
    assert left == set(ids[2:])


def test_a_jobs_limits_are_set_once_for_its_leases_and_reset_for_other_threads(
    two_stores, monkeypatch
) -> None:
    """A job borrows a connection per batch: its session limit is set on the first borrow
    only (each set and reset was a round trip a batch), and a lease of another thread or
    after the job finds the server's default."""
    import threading

    from memkeeper.maintenance.locks import job_lock, set_takeover
    from memkeeper.storage.postgres import leases

    job, _ = two_stores
    applied: list[dict[str, Any]] = []
    real = leases.apply_settings
    monkeypatch.setattr(
        leases,
        "apply_settings",
        lambda raw, settings, held: applied.append(settings) or real(raw, settings, held),
    )
    set_takeover(job.storage, 7)
    show = "SHOW idle_in_transaction_session_timeout"
    hot = job.storage.hot

    def other_thread() -> str:
        seen: list[str] = []
        thread = threading.Thread(target=lambda: seen.append(hot.execute(show).fetchone()[0]))
        thread.start()
        thread.join(30)
        return seen[0]

    with job_lock(job.storage, "expire").hold():
        assert [hot.execute(show).fetchone()[0] for _ in range(5)] == ["7s"] * 5
        assert len(applied) == 1  # five leases, one setting
        assert other_thread() == "0"  # another thread's lease: reset (if it got that session)
        assert hot.execute(show).fetchone()[0] == "7s"
    assert hot.execute(show).fetchone()[0] == "0"  # the job ended: the next lease resets it
    count = len(applied)
    assert hot.execute(show).fetchone()[0] == "0"
    assert len(applied) == count  # nothing left to reset


def test_an_agents_recall_waits_for_the_server_once(two_stores) -> None:
    _, agent = two_stores
    agent.remember("ann", "city", "Oslo")
    trips, found = _round_trips(agent, lambda: agent.recall("ann", "city"))
    assert found is not None and found.access_count == 1
    # BEGIN with the user's lock, the read that marks the use (the entry's row and its
    # day's count) and the COMMIT: one string.
    assert trips == 1
    assert found == agent.get(found.id)
    trips, again = _round_trips(agent, lambda: agent.recall("ann", "city"))
    assert trips == 1 and again.access_count == 2 and again == agent.get(again.id)
    counted = agent.storage.hot.query("SELECT count FROM uses WHERE memory_id = ?", [found.id])
    assert [row["count"] for row in counted] == [2]
    trips, missing = _round_trips(agent, lambda: agent.recall("ann", "tea"))
    assert missing is None and trips == 2  # the hot file's answer; cold storage's


def test_an_agents_remember_waits_for_the_server_three_times(two_stores) -> None:
    _, agent = two_stores
    agent.remember("ann", "city", "Oslo")
    trips, memory = _round_trips(agent, lambda: agent.remember("ann", "city", "Rome"))
    assert memory.value == "Rome" and memory == agent.get(memory.id)
    # BEGIN with the user's lock and the current and superseded values (one statement); the
    # savepoint with the re-read (hot, cold and the key's holders in one trip); the release
    # with the writes and the COMMIT. The entry written is not read back.
    assert trips == 3
    assert agent.recall("ann", "city").value == "Rome"
    trips, fresh = _round_trips(agent, lambda: agent.remember("ann", "tea", "green"))  # new key
    assert trips == 3 and fresh == agent.get(fresh.id)
    trips, again = _round_trips(agent, lambda: agent.remember("ann", "city", "Oslo"))  # revived
    assert trips == 3 and again == agent.get(again.id) and again.state == "active"
    assert again.access_count == 0  # the Oslo entry was never recalled
    trips, same = _round_trips(agent, lambda: agent.remember("ann", "city", "Oslo"))  # the same
    assert trips == 3 and same == agent.get(same.id) and same.id == again.id
    logged = agent.storage.hot.query("SELECT action FROM changes ORDER BY id")
    assert [row["action"] for row in logged] == [
        "create",
        "supersede",
        "create",
        "create",
        "supersede",
        "reconfirm",
        "reconfirm",
    ]


def test_a_jobs_batch_moves_the_trigram_pending_list_in_small_steps(two_stores, monkeypatch):
    from memkeeper.storage import transitions
    from memkeeper.storage.postgres.write_locks import JOB_PENDING_LIST_KB

    job, _ = two_stores
    seen: list[str] = []

    def look(step: str) -> None:
        if step == "hot-written":  # inside the batch's transaction
            seen.append(job.storage.hot.raw.execute("SHOW gin_pending_list_limit").fetchone()[0])

    batch = _demotions(job, 3)  # the remembers write with the server's limit
    monkeypatch.setattr(transitions, "step_hook", look)
    apply(job.storage, batch, actor="job", now=system_now(), run_id="r")
    assert seen == [f"{JOB_PENDING_LIST_KB // 1024}MB"]
    with job.storage.lock:
        limit = job.storage.hot.raw.execute("SHOW gin_pending_list_limit").fetchone()[0]
    assert limit == "4MB"  # the transaction's own: the connection keeps the server's


def test_a_job_on_postgresql_never_shrinks_its_transactions_to_a_row(two_stores) -> None:
    import threading

    from memkeeper.maintenance.jobkit import PER_USER_SMALLEST, JobContext

    job, _ = two_stores
    ctx = JobContext(
        store=job,
        job="expire",
        config=job.config.jobs.expire,
        now=system_now(),
        run_id="r",
        dry_run=False,
        stop_event=threading.Event(),
    )
    ctx.pacer.observe(ctx.pacer.size, 10.0)  # a transaction that ran far too long
    assert ctx.pacer.size == PER_USER_SMALLEST
