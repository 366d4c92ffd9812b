"""Step 0003_fleet migrates a memory created at 0001 (released): nothing lost, fleet ready."""

from __future__ import annotations

import psycopg
from psycopg import sql

from memkeeper import MemoryStore
from memkeeper.maintenance.runner import run_once
from memkeeper.storage.postgres.ddl import EXTENSIONS, STEPS
from memkeeper.storage.postgres.schema import applied_steps


def _schema_at_0001(url: str) -> None:
    """The schema as memkeeper 0001 left it, with one job run and one memory."""
    with psycopg.connect(url, autocommit=True) as conn:
        for extension in EXTENSIONS:
            conn.execute(
                sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(extension))
            )
        conn.execute("CREATE SCHEMA memkeeper")
        conn.execute(
            "CREATE TABLE memkeeper.schema_migrations"
            " (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        with conn.transaction():
            conn.execute("SET LOCAL search_path TO memkeeper, public")
            conn.execute(
                sql.SQL(dict(STEPS)["0001_initial"]).format(schema=sql.Identifier("memkeeper"))
            )
            conn.execute(
                "INSERT INTO memkeeper.schema_migrations"
                " VALUES ('0001_initial', '2026-11-01T00:00:00.000000+00:00')"
            )
        conn.execute(
            "INSERT INTO memkeeper.job_runs (run_id, job, trigger, started_at, status, dry_run)"
            " VALUES ('old-run', 'expire', 'manual', '2026-11-01T00:00:00.000000+00:00', 'ok', 0)"
        )


def test_a_0001_memory_gets_the_fleet_tables_and_keeps_its_runs(
    pg_database: str, monkeypatch
) -> None:
    _schema_at_0001(pg_database)
    monkeypatch.setenv("MEMKEEPER_HOST_NAME", "old-host-upgraded")
    with MemoryStore(pg_database) as store:
        store.remember("ann", "city", "Oslo")
        [result] = run_once(store, ["expire"]).results
    with psycopg.connect(pg_database, autocommit=True) as conn:
        assert applied_steps(conn, "memkeeper")[-1] == "0003_fleet"
        hosts = dict(conn.execute("SELECT run_id, host FROM memkeeper.job_runs").fetchall())
        assert hosts == {"old-run": None, result.run_id: "old-host-upgraded"}
        # The run took the job lock: the lock's epoch started, its holder recorded.
        rows = conn.execute(
            "SELECT name, epoch, host FROM memkeeper.leadership ORDER BY name"
        ).fetchall()
        assert rows == [("daemon", 0, None), ("jobs", 1, "old-host-upgraded")]
