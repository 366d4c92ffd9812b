"""A follower stands by on one connection, and a reloaded takeover time applies at once.

Followers try the lead every second: each try once opened (and closed) a connection of its
own. Now the lock keeps its session between tries and takes the lead on it; a kept session
the server ended is replaced at the next try. ``service.takeover_seconds`` changed by a
reload (SIGHUP) once applied at the next start only; now the lead's session, its pinger and
the heartbeat follow at once.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg

from memkeeper import MemoryStore
from memkeeper.config import load_config
from memkeeper.maintenance.locks import daemon_lock
from memkeeper.service.daemon import Daemon
from memkeeper.service.fleet import Leadership
from memkeeper.storage.postgres.job_locks import LOCK_CLASS, lock_key
from memkeeper.storage.postgres.storage import PostgresStorage

WAIT = 30.0


def _sessions_waiting(url: str, holder_backend: int) -> list[int]:
    """Server pids of sessions that tried the daemon lock, other than the holder's: the
    sessions labelled by memkeeper that do not hold it."""
    with psycopg.connect(url, autocommit=True) as probe:
        rows = probe.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'memkeeper pid %%'"
            " AND pid <> %s AND pid NOT IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory'"
            " AND objid = %s AND classid = %s)",
            (holder_backend, lock_key("memkeeper", "daemon"), LOCK_CLASS),
        ).fetchall()
    return sorted(pid for (pid,) in rows)


def test_a_follower_tries_the_lead_on_one_session_and_leads_on_it(pg_database: str) -> None:
    with MemoryStore(pg_database) as store:
        holder_storage = PostgresStorage(pg_database)
        holder = daemon_lock(holder_storage)
        holder.acquire(0)
        lead = Leadership(store)
        try:
            holding = holder.connection.info.backend_pid  # type: ignore[attr-defined]
            assert lead.try_lead() is False
            [standby] = _sessions_waiting(pg_database, holding)
            for _ in range(3):
                assert lead.try_lead() is False
                assert _sessions_waiting(pg_database, holding) == [standby]
            # The server ends the kept session (idle limit, a restart): the next try opens one.
            with psycopg.connect(pg_database, autocommit=True) as other:
                other.execute("SELECT pg_terminate_backend(%s)", (standby,))
            assert lead.try_lead() is False
            [replaced] = _sessions_waiting(pg_database, holding)
            assert replaced != standby
            holder.release()
            assert lead.try_lead() is True
            assert lead.lock.connection.info.backend_pid == replaced  # type: ignore[attr-defined]
        finally:
            lead.close()
            holder.release()
            holder_storage.close()
        assert lead.lock.held is False


def test_a_reloaded_takeover_time_applies_to_the_running_lead(
    pg_database: str, tmp_path: Path
) -> None:
    config_path = tmp_path / "config.toml"
    config_path.write_text("[service]\ntakeover_seconds = 15\n", encoding="utf-8")
    daemon = Daemon(
        db=pg_database,
        config=load_config(config_path, explicit=True),
        config_path=config_path,
        config_explicit=True,
        handle_signals=False,
        tick_seconds=0.05,
    )
    runner = threading.Thread(target=daemon.run, daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + WAIT
        while (lead := daemon.leadership) is None or not lead.lock.held:
            assert time.monotonic() < deadline, "the service never took the lead"
            time.sleep(0.05)
        show = "SHOW idle_session_timeout"
        assert lead.lock.connection.execute(show).fetchone()[0] == "15s"  # type: ignore[attr-defined]
        config_path.write_text("[service]\ntakeover_seconds = 4\n", encoding="utf-8")
        daemon.request_reload()
        while lead.lock.connection.execute(show).fetchone()[0] != "4s":  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, "the new takeover time was not applied"
            time.sleep(0.05)
        assert lead.takeover_seconds == 4
        assert lead.poll_seconds == 1.0 and lead.beat_seconds == 1.0
    finally:
        daemon.request_stop()
        runner.join(WAIT)
    assert not runner.is_alive()
