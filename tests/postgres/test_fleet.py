"""The fleet simulation: three ``memkeeper run`` hosts on one PostgreSQL memory.

A job (expire, every few seconds through ``@every``) is the schedule; the leader is killed
with SIGKILL in the middle of a pass. Checked from the database: one leader at a time, the
takeover's catch-up finishes the pass, every scheduled time is run (successfully) exactly
once, no acknowledged agent write is lost, the killed run's half-done transaction left
nothing (each entry expired by exactly one change, its state and its change together), and
the surviving hosts exit 0 on SIGTERM.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import threading
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memkeeper import MemoryStore
from memkeeper.maintenance.runner import ABANDONED_ERROR
from postgres.fleet import (
    EVERY,
    Host,
    changes_of,
    leader,
    query,
    runs,
    seed_expired,
    wait_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SEEDED = 400


def test_three_hosts_one_schedule_the_leader_killed_mid_pass(
    pg_database: str, tmp_path: Path
) -> None:
    url = pg_database
    seed_expired(url, SEEDED)
    hosts = [Host(tmp_path, f"host-{i}", url) for i in range(3)]
    acknowledged: list[str] = []
    writing = threading.Event()

    def agent() -> None:  # an agent writing through the library all along
        with MemoryStore(url) as store:
            i = 0
            while not writing.is_set():
                store.remember("agent", f"k{i}", f"v{i}")
                acknowledged.append(f"k{i}")
                i += 1
                writing.wait(0.05)

    writer = threading.Thread(target=agent, daemon=True)
    writer.start()
    try:
        first = wait_for("a leader", lambda: leader(url), 30, hosts)
        victim = next(h for h in hosts if h.proc.pid == first[1])
        # Mid-pass: its run is recorded running and has committed some of its changes.
        run = wait_for(
            "the leader's pass under way",
            lambda: next(
                (
                    r
                    for r in runs(url)
                    if r["status"] == "running" and changes_of(url, r["run_id"]) >= 5
                ),
                None,
            ),
            30,
            hosts,
        )
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(timeout=10)
        assert run["host"] == victim.name
        survivors = [h for h in hosts if h is not victim]
        second = wait_for(
            "a new leader", lambda: (got := leader(url)) and got != first and got, 30, survivors
        )
        assert second[0] in {h.name for h in survivors}
        # The takeover's catch-up finishes the pass; then two more fires come and go.
        wait_for(
            "every entry expired",
            lambda: (
                query(url, "SELECT count(*) FROM memories WHERE state = 'pending_review'")[0][0]
                == SEEDED
            ),
            60,
            survivors,
        )
        done_at = len([r for r in runs(url) if r["status"] == "ok"])
        wait_for(
            "two more scheduled fires",
            lambda: len([r for r in runs(url) if r["status"] == "ok"]) >= done_at + 2,
            4 * EVERY + 20,
            survivors,
        )
        # status (any host) shows the leader, the one standing by, and who ran the job.
        status = subprocess.run(
            [sys.executable, "-m", "memkeeper", "--db", url, "status", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        service = json.loads(status.stdout)["service"]
        now_leader = leader(url)
        assert service["running"] and service["pid"] == now_leader[1]
        assert (service["leader"]["host"], service["leader"]["pid"]) == now_leader
        standing = {(m["host"], m["role"]) for m in service["members"]}
        assert standing == {
            (h.name, "leader" if h.name == now_leader[0] else "follower") for h in survivors
        }
        assert {r["host"] for r in service["runs"] if r["job"] == "expire"} <= {
            h.name for h in hosts
        }
        text = subprocess.run(
            [sys.executable, "-m", "memkeeper", "--db", url, "status"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert f"leader    {now_leader[0]} pid {now_leader[1]}" in text
        assert "standing by host-" in text and "ran       expire" in text
    finally:
        writing.set()
        writer.join(timeout=30)
        codes = {h.name: h.stop() for h in hosts if h is not None and h.proc.returncode is None}
        for h in hosts:
            h.close()
    assert codes == {h.name: 0 for h in survivors}, [h.log()[-3000:] for h in survivors]

    every_run = runs(url)
    killed = next(r for r in every_run if r["run_id"] == run["run_id"])
    assert killed["status"] == "interrupted" and killed["error"] == ABANDONED_ERROR
    # Every scheduled time was run successfully exactly once, by one host or another.
    ok = [r for r in every_run if r["status"] == "ok"]
    scheduled = Counter(r["scheduled_for"] for r in ok)
    assert scheduled and max(scheduled.values()) == 1, scheduled
    # After the takeover, no fire was missed: consecutive ok runs are one period apart.
    times = sorted(datetime.fromisoformat(r["scheduled_for"]) for r in ok)
    gaps = {later - earlier for earlier, later in itertools.pairwise(times[1:])}
    assert gaps <= {timedelta(seconds=EVERY)}, times
    assert {r["host"] for r in ok} <= {h.name for h in survivors}
    assert all(r["status"] != "running" for r in every_run)
    # Each seeded entry expired exactly once: its state and its change committed together,
    # and the killed run's unfinished transaction left neither.
    per_entry = query(
        url,
        "SELECT m.id, m.state, count(c.id) FROM memories m LEFT JOIN changes c"
        " ON c.memory_id = m.id AND c.action = 'expire' WHERE m.user_id LIKE 'user%'"
        " GROUP BY m.id, m.state",
    )
    assert len(per_entry) == SEEDED
    assert {(state, n) for _, state, n in per_entry} == {("pending_review", 1)}
    killed_changes = changes_of(url, run["run_id"])
    assert 5 <= killed_changes < SEEDED
    # No acknowledged agent write was lost through the kill and the takeover.
    stored = {k for (k,) in query(url, "SELECT key FROM memories WHERE user_id = 'agent'")}
    assert acknowledged and set(acknowledged) <= stored
