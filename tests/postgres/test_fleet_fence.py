"""The fence in one process: a holder of the job lock whose epoch was superseded (a new holder
started while it was away) commits nothing more, and says why."""

from __future__ import annotations

import os

import psycopg
import pytest

from memkeeper import MemoryStore
from memkeeper.clock import system_now
from memkeeper.errors import LockLost
from memkeeper.maintenance.locks import jobs_lock
from memkeeper.storage import job_runs
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
