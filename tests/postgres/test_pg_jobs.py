"""Jobs on PostgreSQL: the job lock is a session advisory lock, a killed connection loses nothing.

The job, undo and transition tests run on both backends (tests/test_jobs_*.py, test_undo.py,
test_transitions.py, test_locks.py); these are the cases only PostgreSQL has: the lock lives
in the server, keyed per schema, on a connection of its own, and a connection the server
kills in the middle of a job.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from freezegun import freeze_time
from helpers import current_images, replay
from helpers.backends import empty_memory

from memkeeper import MemoryStore
from memkeeper.clock import fixed
from memkeeper.errors import DatabaseUnreachable, LockBusy
from memkeeper.maintenance.locks import jobs_lock
from memkeeper.maintenance.runner import run_once
from memkeeper.storage import transitions
from memkeeper.storage.postgres.job_locks import LOCK_CLASS, lock_key
from memkeeper.storage.postgres.storage import PostgresStorage

START = datetime(2026, 1, 1, 9, tzinfo=UTC)
LATER = START + timedelta(days=400)


def _superseded(url: str, count: int = 12) -> list[str]:
    """``count`` superseded values (settle retires them to cold storage at LATER)."""
    with freeze_time(START) as clock, MemoryStore(url) as store:
        for index in range(count):
            store.remember("u", f"k{index}", "old")
        clock.move_to(START + timedelta(hours=1))
        for index in range(count):
            store.remember("u", f"k{index}", "new")
        return [m.id for m in store.list_memories("u", state="superseded")]


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
                assert rows[0][0] not in store.storage.backend_pids()
                assert rows[0][1].startswith("memkeeper pid ")
            # An agent writes while a job holds the job lock: it is not the write lock.
            store.remember("alice", "city", "Beijing")
            # Another store (another process, another host) is refused, naming the holder;
            # the holding thread itself may take it again (the service checks, then runs).
            with (
                MemoryStore(memory_url) as other,
                pytest.raises(LockBusy, match=r"job run lock .* is held by pid \d+ on "),
            ):
                jobs_lock(other.storage).acquire(0)
            with jobs_lock(store.storage).hold():
                assert lock.held
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


def test_a_connection_killed_mid_job_rolls_back_and_the_next_run_completes(
    memory_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _superseded(memory_url)
    store = MemoryStore(memory_url, clock=fixed(LATER))

    def kill(step: str) -> None:
        if step == "hot-written":  # everything written, nothing committed yet
            victim = store.storage.hot.raw.info.backend_pid  # the job's leased connection
            with psycopg.connect(memory_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (victim,))

    monkeypatch.setattr(transitions, "step_hook", kill)
    failed = run_once(store, ["settle"]).results[0]  # the store reconnects to record it
    monkeypatch.setattr(transitions, "step_hook", lambda step: None)
    store.close()
    assert failed.status == "failed" and "did not commit" in (failed.error or "")

    with MemoryStore(memory_url, clock=fixed(LATER)) as again:
        # The killed transaction rolled back whole: nothing moved, nothing logged.
        assert {again.get(i).state for i in ids} == {"superseded"}
        assert [c for c in again.changes() if c.action == "retire"] == []
        result = run_once(again, ["settle"]).results[0]
        assert (result.status, result.counts) == ("ok", {"retire (superseded)": len(ids)})
        assert {again.get(i).state for i in ids} == {"cold"}
        assert len([c for c in again.changes() if c.action == "retire"]) == len(ids)
        # The killed run was recorded failed, on the connection that replaced the killed one.
        runs = [(run.job, run.status) for run in again.job_runs()]
        assert sorted(runs) == [("settle", "failed"), ("settle", "ok")]
        assert replay(again) == current_images(again)


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
        with (
            MemoryStore(memory_url) as other,  # another process's run-once
            pytest.raises(DatabaseUnreachable, match="lost while taking the job run lock"),
        ):
            jobs_lock(other.storage).acquire(60)
        killer.join(30)
        assert ended
