"""Steps 0003_fleet and 0004_job_locks migrate a memory created at 0001 or 0003 (released):
nothing lost, fleet ready, a fenced lock per job."""

from __future__ import annotations

import psycopg
import pytest
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
        assert applied_steps(conn, "memkeeper")[1:] == [
            "0003_fleet",
            "0004_job_locks",
            "0005_uses_in_place",
            "0006_erased_values",
        ]
        hosts = dict(conn.execute("SELECT run_id, host FROM memkeeper.job_runs").fetchall())
        assert hosts == {"old-run": None, result.run_id: "old-host-upgraded"}
        # The run took its job's lock and the jobs lock shared: those epochs started, their
        # holder recorded; the exclusive jobs epoch (undo's) did not move.
        rows = conn.execute(
            "SELECT name, epoch, host FROM memkeeper.leadership ORDER BY name"
        ).fetchall()
        assert rows == [
            ("daemon", 0, None),
            ("job:expire", 1, "old-host-upgraded"),
            ("jobs", 0, None),
            ("jobs:shared", 1, "old-host-upgraded"),
        ]


def test_a_0003_memory_gets_a_lock_per_job(pg_database: str) -> None:
    """A memory at 0003 (the released fleet schema): its leadership rows stay, and a row may
    now be named for a job; any other name is still refused."""
    _schema_at_0001(pg_database)
    with psycopg.connect(pg_database, autocommit=True) as conn, conn.transaction():
        conn.execute("SET LOCAL search_path TO memkeeper, public")
        conn.execute(sql.SQL(dict(STEPS)["0003_fleet"]).format(schema=sql.Identifier("memkeeper")))
        conn.execute(
            "INSERT INTO memkeeper.schema_migrations VALUES ('0003_fleet', '2026-12-01T00:00:00Z')"
        )
        conn.execute("UPDATE memkeeper.leadership SET epoch = 7 WHERE name = 'jobs'")
    with MemoryStore(pg_database) as store:
        run_once(store, ["settle"])
    with psycopg.connect(pg_database, autocommit=True) as conn:
        assert applied_steps(conn, "memkeeper")[-3:] == [
            "0004_job_locks",
            "0005_uses_in_place",
            "0006_erased_values",
        ]
        epochs = dict(conn.execute("SELECT name, epoch FROM memkeeper.leadership").fetchall())
        assert epochs == {"daemon": 0, "jobs": 7, "job:settle": 1, "jobs:shared": 1}
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO memkeeper.leadership (name) VALUES ('other')")
