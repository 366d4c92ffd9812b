"""Writers on PostgreSQL wait only for writers of the same user; a job skips a busy user.

Two stores on one database stand for two processes (each has its own connection). Whether a
writer waits is read from the server (``pg_locks``: an advisory lock not granted), never
from a clock.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from memkeeper import MemoryStore
from memkeeper.clock import system_now
from memkeeper.storage.transaction import write_transaction
from memkeeper.storage.transitions import Transition, apply, with_changes


def _waiting_on_a_lock(url: str, store: MemoryStore) -> bool:
    pids = sorted(store.storage.backend_pids())  # any connection of the store's pool
    with psycopg.connect(url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_locks WHERE pid = ANY(%s) AND locktype = 'advisory'"
            " AND NOT granted",
            (pids,),
        ).fetchone()
    return bool(row[0])


def _until(condition, what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"never happened: {what}")
        time.sleep(0.02)


@pytest.fixture
def two_stores(pg_database: str):
    with MemoryStore(pg_database) as job, MemoryStore(pg_database) as agent:
        yield job, agent


def test_an_agent_of_another_user_does_not_wait_for_a_write_in_progress(
    pg_database: str, two_stores
) -> None:
    job, agent = two_stores
    with agent.storage.lock:  # this thread's connection, which the agent's calls lease again
        agent.storage.hot.raw.execute("SET lock_timeout = '5s'")  # waiting would fail the test
    with write_transaction(job.storage, users=["ann"]):
        agent.remember("bob", "city", "Oslo")
        assert agent.recall("bob", "city").value == "Oslo"


def test_an_agent_of_the_same_user_waits_until_the_write_commits(
    pg_database: str, two_stores
) -> None:
    job, agent = two_stores
    done = threading.Event()

    def remember() -> None:
        agent.remember("ann", "city", "Oslo")
        done.set()

    with write_transaction(job.storage, users=["ann"]) as hot:
        hot.execute("SELECT 1")  # a write's locks are taken with its first statement
        worker = threading.Thread(target=remember)
        worker.start()
        _until(lambda: _waiting_on_a_lock(pg_database, agent), "the agent waits for ann's lock")
        assert not done.is_set()
    worker.join(timeout=30)
    assert done.is_set()


def test_a_write_of_everything_waits_for_a_user_scoped_writer(pg_database: str, two_stores) -> None:
    job, agent = two_stores
    done = threading.Event()

    def write_all() -> None:
        with write_transaction(job.storage):
            done.set()

    with write_transaction(agent.storage, users=["ann"]) as hot:
        hot.execute("SELECT 1")  # a write's locks are taken with its first statement
        worker = threading.Thread(target=write_all)
        worker.start()
        _until(lambda: _waiting_on_a_lock(pg_database, job), "the global writer waits")
        assert not done.is_set()
    worker.join(timeout=30)
    assert done.is_set()


def test_a_job_skips_the_user_an_agent_is_writing_and_applies_the_rest(two_stores) -> None:
    job, agent = two_stores
    ann = job.remember("ann", "city", "Oslo")
    bob = job.remember("bob", "city", "Rome")
    images = job.storage.hot_images([ann.id, bob.id])
    transitions = [
        Transition(i, images[i], with_changes(images[i], confidence=0.5), "demote", "test")
        for i in (ann.id, bob.id)
    ]
    with write_transaction(agent.storage, users=["ann"]) as hot:
        hot.execute("SELECT 1")  # a write's locks are taken with its first statement
        outcomes = apply(job.storage, transitions, actor="job", now=system_now(), run_id="r1")
    assert {o.transition.memory_id: o.applied for o in outcomes} == {ann.id: False, bob.id: True}
    assert job.get(ann.id).confidence == pytest.approx(0.9)
    assert job.get(bob.id).confidence == pytest.approx(0.5)


def test_a_flush_of_buffered_uses_waits_only_for_writers_of_their_owners(
    pg_database: str, two_stores
) -> None:
    """The MCP server's stores buffer their uses and flush them every few milliseconds: a
    flush locks the owners of the entries it writes, never the whole memory, so it neither
    waits for a job's batch of other users nor makes every writer queue behind it."""
    from memkeeper.storage import use_buffer

    job, agent = two_stores
    buffer = use_buffer.enable(agent.storage)
    ann = agent.remember("ann", "city", "Oslo")
    assert agent.recall("ann", "city").access_count == 1 and buffer.pending(ann.id) == 1
    done = threading.Event()

    def flush() -> None:
        use_buffer.flush(agent.storage)
        done.set()

    agent.storage.hot.thread_setting("lock_timeout", "5s")  # waiting would fail the test
    with write_transaction(job.storage, users=["bob"]) as hot:  # a batch of another user
        hot.execute("SELECT 1")  # a write's locks are taken with its first statement
        assert use_buffer.flush(agent.storage) == 1  # at once: nothing of ann's is written
    agent.storage.hot.thread_setting("lock_timeout", None)
    assert agent.get(ann.id).access_count == 1
    assert agent.recall("ann", "city").access_count == 2
    with write_transaction(job.storage, users=["ann"]) as hot:  # a writer of the owner
        hot.execute("SELECT 1")
        worker = threading.Thread(target=flush)
        worker.start()
        _until(lambda: _waiting_on_a_lock(pg_database, agent), "the flush waits for ann's lock")
        assert not done.is_set()
    worker.join(timeout=30)
    assert done.is_set() and agent.get(ann.id).access_count == 2


def test_a_recall_that_cannot_get_its_lock_fails_whole_and_the_store_goes_on(
    two_stores,
) -> None:
    job, agent = two_stores
    agent.remember("ann", "city", "Oslo")
    with agent.storage.lock:  # this thread's connection, which the agent's calls lease again
        agent.storage.hot.raw.execute("SET lock_timeout = '200ms'")
    with write_transaction(job.storage, users=["ann"]) as hot:
        hot.execute("SELECT 1")  # a write's locks are taken with its first statement
        with pytest.raises(psycopg.errors.LockNotAvailable):
            agent.recall("ann", "city")  # its one-trip transaction: the lock, then the rest
    assert agent.storage.hot.conn.in_transaction is False  # rolled back, not left aborted
    found = agent.recall("ann", "city")
    assert found is not None and found.access_count == 1  # the failed one counted nothing
    counted = agent.storage.hot.query("SELECT count FROM uses WHERE memory_id = ?", [found.id])
    assert [row["count"] for row in counted] == [1]
