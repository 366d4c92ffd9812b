"""A job whose connection the server kills mid-transaction: nothing of that transaction
commits, the run is recorded as failed, and the next run completes the work exactly once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from memkeeper import MemoryStore
from memkeeper.clock import fixed
from memkeeper.maintenance.runner import run_once
from memkeeper.storage import transitions

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


def test_a_job_killed_mid_transaction_rolls_back_and_the_next_run_completes(
    pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with MemoryStore(pg_database, clock=fixed(T0)) as store:
        for n in range(5):
            store.remember("ann", f"k{n}", f"v{n}")
        later = T0 + timedelta(days=400)  # past every TTL: expire moves all five
        killed = []

        def kill(step: str) -> None:
            if step == "hot-written" and not killed:
                pid = store.storage.hot.raw.info.backend_pid
                with psycopg.connect(pg_database, autocommit=True) as admin:
                    admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
                killed.append(pid)

        monkeypatch.setattr(transitions, "step_hook", kill)
        failed = run_once(store, ["expire"], now=later)
        monkeypatch.setattr(transitions, "step_hook", lambda step: None)
        assert killed and failed.results[0].status == "failed"
        assert "did not commit" in (failed.results[0].error or "")
        assert {m.state for m in store.list_memories("ann")} == {"active"}  # rolled back

        done = run_once(store, ["expire"], now=later)
        assert done.results[0].status == "ok"
        assert {m.state for m in store.list_memories("ann", state="pending_review")} == {
            "pending_review"
        }
        expired = [c for c in store.changes(user_id="ann") if c.action == "expire"]
        assert len(expired) == 5  # each entry once, none from the killed run
