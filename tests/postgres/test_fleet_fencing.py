"""Fencing: a leader paused (SIGSTOP) past the takeover time commits nothing once resumed.

Host A leads and is mid-pass when it is paused. The server ends its idle lock sessions
after ``takeover_seconds``, host B takes the lead and the job lock (new epochs), marks A's
run interrupted and finishes the pass. A is resumed: its job goes on from where it was, but
every transaction it tries fails the epoch check and rolls back, so the change log holds no
more of A's run than before the resume and A's run stays as B recorded it; A stands by.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from memkeeper.maintenance.runner import ABANDONED_ERROR
from postgres.fleet import TAKEOVER, Host, changes_of, leader, query, runs, seed_expired, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SEEDED = 600


def test_a_paused_leader_commits_nothing_after_a_follower_took_over(
    pg_database: str, tmp_path: Path
) -> None:
    url = pg_database
    seed_expired(url, SEEDED)
    a = Host(tmp_path, "host-a", url)
    hosts = [a]
    try:
        wait_for("host-a leading", lambda: (leader(url) or ("",))[0] == "host-a", 30, hosts)
        b = Host(tmp_path, "host-b", url)
        hosts.append(b)
        run = wait_for(
            "host-a's pass under way",
            lambda: next(
                (
                    r
                    for r in runs(url)
                    if r["host"] == "host-a"
                    and r["status"] == "running"
                    and changes_of(url, r["run_id"]) >= 5
                ),
                None,
            ),
            30,
            hosts,
        )
        a.signal(signal.SIGSTOP)
        wait_for(
            "host-b leading", lambda: (leader(url) or ("",))[0] == "host-b", TAKEOVER + 30, [b]
        )
        wait_for(
            "host-b's catch-up done",
            lambda: any(r["host"] == "host-b" and r["status"] == "ok" for r in runs(url)),
            60,
            [b],
        )
        marked = next(r for r in runs(url) if r["run_id"] == run["run_id"])
        assert marked["status"] == "interrupted" and marked["error"] == ABANDONED_ERROR
        before = changes_of(url, run["run_id"])
        a.signal(signal.SIGCONT)
        wait_for("host-a standing by", lambda: "leadership lost" in a.log(), 30, hosts)
        wait_for(
            "every entry expired",
            lambda: (
                query(url, "SELECT count(*) FROM memories WHERE state = 'pending_review'")[0][0]
                == SEEDED
            ),
            60,
            hosts,
        )
        # Nothing of A's run committed after the resume, and its row is as B left it.
        assert changes_of(url, run["run_id"]) == before
        after = next(r for r in runs(url) if r["run_id"] == run["run_id"])
        assert (after["status"], after["error"]) == ("interrupted", ABANDONED_ERROR)
        assert "rolled back" in a.log()
        assert leader(url)[0] == "host-b"
        # Every entry expired by exactly one change that committed with its state.
        per_entry = query(
            url,
            "SELECT count(c.id) FROM memories m LEFT JOIN changes c ON c.memory_id = m.id"
            " AND c.action = 'expire' WHERE m.user_id LIKE 'user%' GROUP BY m.id",
        )
        assert len(per_entry) == SEEDED and {n for (n,) in per_entry} == {1}
        codes = [h.stop() for h in hosts]
    finally:
        for h in hosts:
            h.close()
    assert codes == [0, 0], [h.log()[-3000:] for h in hosts]
