"""Jobs on PostgreSQL: the job lock is a session advisory lock of its own connection.

The job, undo, transition and lock tests run on both backends (tests/test_jobs_*.py,
test_undo.py, test_transitions.py, test_locks.py); these are the cases only PostgreSQL has:
the lock lives in the server, on a connection of its own, keyed per schema. (A connection
the server kills in the middle of a job: tests/postgres/test_pg_job_faults.py.)
"""

from __future__ import annotations

import os
import threading
import time

import psycopg
import pytest
from helpers.backends import empty_memory

from memkeeper import MemoryStore
from memkeeper.errors import DatabaseUnreachable, LockBusy
from memkeeper.maintenance.locks import jobs_lock
from memkeeper.storage.postgres.job_locks import LOCK_CLASS, lock_key
from memkeeper.storage.postgres.storage import PostgresStorage


@pytest.fixture
def memory_url(pg_suite_url: str) -> str:
    """The suite's shared test database, emptied (cheaper than a database of its own,
    whose DROP waits for a checkpoint)."""
    empty_memory(pg_suite_url)
    return pg_suite_url


def test_the_job_lock_is_a_session_lock_of_its_own_connection(memory_url: str) -> None:
    with MemoryStore(memory_url) as store:
        lock = jobs_lock(store.storage)
        with lock.hold():
            with psycopg.connect(memory_url, autocommit=True) as probe:
                rows = probe.execute(
                    "SELECT l.pid, a.application_name FROM pg_locks l"
                    " JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory'"
                    " AND l.granted AND l.classid = %s AND l.objid = %s",
                    (LOCK_CLASS, lock_key("memkeeper", "jobs")),
                ).fetchall()
                assert len(rows) == 1
                # Not the store's connection: its transactions come and go, the lock stays.
                assert rows[0][0] != store.storage.hot.raw.info.backend_pid
                assert rows[0][1].startswith("memkeeper pid ")
            # An agent writes while a job holds the job lock: it is not the write lock.
            store.remember("alice", "city", "Beijing")
            with pytest.raises(LockBusy, match=r"job run lock .* is held by pid \d+ on "):
                jobs_lock(store.storage).acquire(0)
        again = jobs_lock(store.storage)
        again.acquire(0)  # free again once released
        again.release()


def test_each_schema_has_its_own_job_lock(pg_schema: tuple[str, str]) -> None:
    url, schema = pg_schema
    first = PostgresStorage(url, schema=schema)
    second = PostgresStorage(url, schema=schema + "_b")
    same = PostgresStorage(url, schema=schema)
    try:
        with jobs_lock(first).hold():
            with jobs_lock(second).hold():  # another memory in the same database: free
                pass
            with pytest.raises(LockBusy):  # the same memory, opened again: taken
                jobs_lock(same).acquire(0)
    finally:
        for storage in (first, second, same):
            storage.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}_b" CASCADE')


def test_a_lock_wait_whose_session_the_server_ends_fails_as_our_error(memory_url: str) -> None:
    """The server goes away while a run-once waits for the job lock: DatabaseUnreachable
    (exit 75), not the driver's exception."""
    label = f"memkeeper pid {os.getpid()} on %"
    with MemoryStore(memory_url) as store, jobs_lock(store.storage).hold():
        with psycopg.connect(memory_url, autocommit=True) as admin:
            (holder,) = admin.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND classid = %s AND objid = %s",
                (LOCK_CLASS, lock_key("memkeeper", "jobs")),
            ).fetchone()
        ended: list[int] = []

        def end_the_waiters_session() -> None:
            deadline = time.monotonic() + 30
            with psycopg.connect(memory_url, autocommit=True) as admin:
                while not ended and time.monotonic() < deadline:
                    for (pid,) in admin.execute(
                        "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s"
                        " AND pid != %s",
                        (label, holder),
                    ).fetchall():
                        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                        ended.append(pid)
                    time.sleep(0.02)

        killer = threading.Thread(target=end_the_waiters_session, daemon=True)
        killer.start()
        with pytest.raises(DatabaseUnreachable, match="lost while taking the job run lock"):
            jobs_lock(store.storage).acquire(60)
        killer.join(30)
        assert ended
