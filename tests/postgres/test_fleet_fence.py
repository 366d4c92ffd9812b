"""The fence in one process: a holder of the job lock whose epoch was superseded (a new holder
started while it was away) commits nothing more, and says why."""

from __future__ import annotations

import os
import threading

import psycopg
import pytest

from memkeeper import MemoryStore
from memkeeper.clock import system_now
from memkeeper.errors import LockLost
from memkeeper.maintenance.locks import job_lock, jobs_lock, set_takeover
from memkeeper.storage import job_runs
from memkeeper.storage.postgres import leadership
from memkeeper.storage.postgres.leadership import bump_epoch


def test_a_superseded_epoch_rolls_the_holders_transaction_back(pg_database: str) -> None:
    with MemoryStore(pg_database) as store, jobs_lock(store.storage).hold():
        now = system_now()
        job_runs.record_start(store.storage, "run-1", "expire", "manual", None, now)
        # A new holder started an epoch (as one does after taking the lock the server freed).
        with psycopg.connect(pg_database, autocommit=True) as other:
            bump_epoch(other, "memkeeper", "jobs", host="elsewhere", pid=os.getpid(), now=now)
        with pytest.raises(LockLost, match=r"jobs epoch 1 was followed by 2.*rolled back"):
            job_runs.record_start(store.storage, "run-2", "expire", "manual", None, now)
    # Only the holding store is fenced, and only while it holds the lock: nothing of run-2.
    with MemoryStore(pg_database) as store:
        store.remember("ann", "city", "Oslo")
        ids = [r["run_id"] for r in job_runs.recent(store.storage.hot, None, 10)]
    assert ids == ["run-1"]


@pytest.mark.parametrize(
    ("held", "bumped", "refused"),
    [
        ("expire", "job:expire", True),  # a new run of the same job started
        ("expire", "jobs", True),  # an undo started
        ("expire", "job:summarize", False),  # another job started: they run side by side
        ("expire", "jobs:shared", False),  # ... and so did its shared hold of jobs
        ("undo", "jobs:shared", True),  # a job started while the undo was away
        ("undo", "jobs", True),  # another undo started
        ("undo", "job:expire", False),
    ],
)
def test_each_lock_fences_what_would_overlap_it(
    pg_database: str, held: str, bumped: str, refused: bool
) -> None:
    with MemoryStore(pg_database) as store:
        lock = jobs_lock(store.storage) if held == "undo" else job_lock(store.storage, held)
        with lock.hold():
            now = system_now()
            with psycopg.connect(pg_database, autocommit=True) as other:
                bump_epoch(other, "memkeeper", bumped, host="elsewhere", pid=os.getpid(), now=now)
            if refused:
                with pytest.raises(LockLost, match=f"{bumped} epoch"):
                    job_runs.record_start(store.storage, "run-2", "expire", "manual", None, now)
            else:
                job_runs.record_start(store.storage, "run-2", "expire", "manual", None, now)
        ids = [r["run_id"] for r in job_runs.recent(store.storage.hot, None, 10)]
    assert ids == ([] if refused else ["run-2"])


def test_a_new_holder_ends_only_a_stalled_check_not_another_jobs_transaction(
    pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deposed expire paused between its check and its COMMIT holds the job:expire row: the
    next expire's bump ends that session. A job of another name in the middle of its own
    transaction (its check done, still working) shares the table lock, not the row: it is
    left alone (the bump once ended every session holding the table)."""
    monkeypatch.setattr(leadership, "BUMP_WAIT_SECONDS", 0.5)
    with MemoryStore(pg_database) as store:
        store.remember("ann", "city", "Oslo")  # the schema, and the leadership rows
    now = system_now()
    with psycopg.connect(pg_database, autocommit=True) as setup:
        bump_epoch(setup, "memkeeper", "job:expire", host="a", pid=1, now=now)
    stalled = psycopg.connect(pg_database)
    working = psycopg.connect(pg_database)
    check = "SELECT epoch FROM memkeeper.leadership WHERE name = %s FOR SHARE"
    stalled.execute(check, ("job:expire",))  # then paused: idle in its transaction
    working.execute(check, ("jobs",))
    busy = threading.Thread(target=lambda: working.execute("SELECT pg_sleep(2)"))
    busy.start()
    try:
        with psycopg.connect(pg_database, autocommit=True) as new_holder:
            epoch = bump_epoch(new_holder, "memkeeper", "job:expire", host="b", pid=2, now=now)
        assert epoch == 2
        busy.join(30)
        working.commit()  # still alive: its transaction commits
        with pytest.raises(psycopg.OperationalError):
            stalled.execute("SELECT 1")
    finally:
        busy.join(30)
        stalled.close()
        working.close()


def test_a_jobs_session_limit_holds_on_a_connection_that_replaced_a_lost_one(
    pg_database: str,
) -> None:
    """The store reconnects mid-job (its backend was killed): the new session has the job's
    idle-in-transaction limit too (it once had the server's default, 0: a holder paused in a
    transaction there would have kept its locks from the next holder)."""
    with MemoryStore(pg_database) as store:
        set_takeover(store.storage, 7)
        hot = store.storage.hot
        with job_lock(store.storage, "expire").hold(), store.storage.lock:
            show = "SHOW idle_in_transaction_session_timeout"
            assert hot.execute(show).fetchone()[0] == "7s"
            [(backend,)] = hot.execute("SELECT pg_backend_pid()").fetchall()
            with psycopg.connect(pg_database, autocommit=True) as other:
                other.execute("SELECT pg_terminate_backend(%s)", (backend,))
            [(again,)] = hot.execute("SELECT pg_backend_pid()").fetchall()  # reconnected
            assert again != backend
            assert hot.execute(show).fetchone()[0] == "7s"
        with store.storage.lock:  # released: the pool's next borrower has no limit
            assert hot.execute(show).fetchone()[0] == "0"


def test_a_write_outside_a_transaction_of_a_job_is_fenced_too(pg_database: str) -> None:
    """A statement written without a transaction would commit by itself, past the commit
    check: under a job lock it gets a transaction of its own, checked like any other."""
    with MemoryStore(pg_database) as store, job_lock(store.storage, "expire").hold():
        insert = (
            "INSERT INTO job_runs (run_id, job, trigger, started_at, status, dry_run)"
            " VALUES (?, 'expire', 'manual', '2026-12-02T00:00:00Z', 'running', 0)"
        )
        store.storage.hot.execute(insert, ["before"])
        with psycopg.connect(pg_database, autocommit=True) as other:
            bump_epoch(other, "memkeeper", "job:expire", host="b", pid=2, now=system_now())
        with pytest.raises(LockLost, match="job:expire epoch"):
            store.storage.hot.execute(insert, ["after"])
        with pytest.raises(LockLost):
            store.storage.hot.conn.executemany(insert, [["many-1"], ["many-2"]])
        ids = [r["run_id"] for r in job_runs.recent(store.storage.hot, None, 10)]
    assert ids == ["before"]
