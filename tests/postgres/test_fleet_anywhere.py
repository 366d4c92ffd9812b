"""Jobs and corrections from any host while a service (another host) runs on the memory.

``run-once`` on host-b takes the same job lock as host-a's service: with ``--wait 0`` it is
refused (exit 75) naming the holder's pid and host, with a wait it runs once the service's
pass is done, recorded with its own host. ``review``, ``restore``, ``forget`` and ``undo``
work from host-b while host-a's service runs. (The CLI runs in this test's process, its host
name set by ``MEMKEEPER_HOST_NAME``; the service is a real process.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memkeeper.cli import main
from memkeeper.errors import EXIT_BUSY
from postgres.fleet import Host, changes_of, query, runs, seed_expired, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SEEDED = 600


def test_run_once_and_corrections_from_another_host(
    pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    url = pg_database
    seed_expired(url, SEEDED)
    service = Host(tmp_path, "host-a", url)
    monkeypatch.setenv("MEMKEEPER_HOST_NAME", "host-b")

    def cli(*args: str) -> tuple[int, str, str]:
        code = main(["--db", url, *args])
        out, err = capsys.readouterr()
        return code, out, err

    try:
        wait_for(
            "host-a's pass under way",
            lambda: any(
                r["status"] == "running" and changes_of(url, r["run_id"]) >= 5 for r in runs(url)
            ),
            60,
            [service],
        )
        code, _, err = cli("run-once", "--job", "expire", "--wait", "0")
        assert code == EXIT_BUSY == 75
        assert f"pid {service.proc.pid} on host-a" in err
        # Waiting instead: it runs once the service's pass let go of the lock.
        code, out, err = cli("run-once", "--job", "expire", "--wait", "120", "--json")
        assert code == 0, err
        mine = json.loads(out)["jobs"][0]
        assert mine["status"] == "ok"
        by_host = {r["run_id"]: r["host"] for r in runs(url)}
        assert by_host[mine["run_id"]] == "host-b"
        first = next(r for r in runs(url) if r["host"] == "host-a")
        assert first["status"] == "ok"
        # Corrections from host-b while host-a's service keeps running.
        code, out, _ = cli("review", "list", "--json")
        assert code == 0
        pending = [m["id"] for m in json.loads(out)]
        assert len(pending) == SEEDED
        assert cli("review", "keep", pending[0], "--yes")[0] == 0
        assert cli("review", "drop", pending[1], "--yes")[0] == 0
        assert cli("restore", pending[1], "--yes")[0] == 0
        assert cli("forget", "user2", "key2", "--yes")[0] == 0
        code, _, err = cli("undo", first["run_id"], "--yes")
        assert code == 0, err
        states = dict(query(url, "SELECT state, count(*) FROM memories GROUP BY state"))
        assert states == {"active": SEEDED - 1}
        assert service.proc.poll() is None
        assert service.stop() == 0
    finally:
        service.close()


def test_the_server_restarted_under_a_running_service(
    pg_server, pg_database: str, tmp_path: Path
) -> None:
    """The service survives a server restart: its lock session ends, it stands by, takes the
    lead again on the restarted server, and the next scheduled fires run."""
    url = pg_database
    seed_expired(url, 5)
    service = Host(tmp_path, "host-a", url)
    try:
        wait_for(
            "a first run",
            lambda: any(r["status"] == "ok" for r in runs(url)),
            60,
            [service],
        )
        pg_server.restart()
        restarted = len(runs(url))
        wait_for("the lead lost", lambda: "leadership lost" in service.log(), 30, [service])
        wait_for(
            "two fires after the restart",
            lambda: len([r for r in runs(url)[restarted:] if r["status"] == "ok"]) >= 2,
            60,
            [service],
        )
        assert service.proc.poll() is None
        assert service.log().count("took over the lead") >= 1
        assert service.stop() == 0
    finally:
        service.close()
