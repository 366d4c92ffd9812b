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
from memkeeper.maintenance.locks import job_lock, jobs_lock
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
