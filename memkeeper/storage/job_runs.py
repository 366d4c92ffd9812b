"""The job-runs table: one row per maintenance run, written by the runner, read by the jobs.

A run is recorded ``running`` when it starts and given its status, counts and error when it
ends (each its own short write transaction, so a run killed in between leaves a ``running``
row that :func:`close_abandoned` marks later). The readers answer the questions the
scheduler, undo, the CLI and the jobs' own bookkeeping ask: is there such a run, when did a
job last succeed, where did the last run leave off. Times go in and come out as aware
``datetime`` values (stored as :func:`memkeeper.clock.to_db` text, which is the backend's
business); the caller passes them in, nothing here reads the clock.

Every function takes the storage (writers: for its lock and write transaction) or the hot
database handle (readers, which the caller runs under ``storage.lock`` where it shares the
connection with other threads), so that another backend can offer the same functions.
A run's row is no memory's: on PostgreSQL its writes take the write lock shared
(:data:`NO_MEMORY`), so agents never wait for a job's start or end (SQLite has one writer).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from memkeeper.clock import from_db, to_db
from memkeeper.storage.base import Storage
from memkeeper.storage.handle import Handle
from memkeeper.storage.host import host_name
from memkeeper.storage.postgres import retention as pg_retention
from memkeeper.storage.transaction import immediate_transaction

NO_MEMORY: frozenset[str] = frozenset()
"""The users a job-runs write changes the memories of: none."""


def record_start(
    storage: Storage,
    run_id: str,
    job: str,
    trigger: str,
    scheduled_for: datetime | None,
    started_at: datetime,
) -> None:
    """Insert run ``run_id`` as ``running`` (not a dry run), in its own transaction.

    On PostgreSQL the row names the host that runs it (a fleet shares one memory)."""
    scheduled = to_db(scheduled_for) if scheduled_for else None
    values = [run_id, job, trigger, scheduled, to_db(started_at)]
    columns, marks = "", ""
    if storage.hot.dialect == "postgres":
        columns, marks = ", host", ", ?"
        values.append(host_name())
    with storage.lock, immediate_transaction(storage.hot, users=NO_MEMORY):
        storage.hot.conn.execute(
            "INSERT INTO job_runs (run_id, job, trigger, scheduled_for, started_at, status,"
            f" dry_run{columns}) VALUES (?, ?, ?, ?, ?, 'running', 0{marks})",
            values,
        )


def close_abandoned(storage: Storage, error: str, *, job: str | None = None) -> int:
    """Mark every ``running`` run (of ``job`` only, if given) ``interrupted`` with ``error``;
    returns how many.

    Only correct while the caller holds that job's lock (or, for every job, the ``jobs`` lock
    exclusively): then no such run is really running.
    """
    sql = "UPDATE job_runs SET status = 'interrupted', error = ? WHERE status = 'running'"
    params: list[Any] = [error]
    if job is not None:
        sql += " AND job = ?"
        params.append(job)
    with storage.lock, immediate_transaction(storage.hot, users=NO_MEMORY):
        return storage.hot.conn.execute(sql, params).rowcount


def running_jobs(db: Handle) -> list[str]:
    """The jobs with a run recorded ``running`` (live elsewhere, or left by a killed process)."""
    rows = db.query("SELECT DISTINCT job FROM job_runs WHERE status = 'running' ORDER BY job")
    return [row["job"] for row in rows]


def record_end(
    storage: Storage,
    run_id: str,
    *,
    finished_at: datetime,
    status: str,
    counts: dict[str, Any],
    error: str | None,
) -> None:
    """Give run ``run_id`` its end: time, status, counts (kept as JSON) and error."""
    text = json.dumps(counts, sort_keys=True)
    with storage.lock, immediate_transaction(storage.hot, users=NO_MEMORY):
        storage.hot.conn.execute(
            "UPDATE job_runs SET finished_at = ?, status = ?, counts = ?, error = ?"
            " WHERE run_id = ?",
            [to_db(finished_at), status, text, error, run_id],
        )


def exists(db: Handle, run_id: str) -> bool:
    """Whether the job-runs table has run ``run_id``."""
    return db.execute("SELECT 1 FROM job_runs WHERE run_id = ?", [run_id]).fetchone() is not None


def job_and_start(db: Handle, run_id: str) -> tuple[str, datetime | None] | None:
    """Run ``run_id``'s job and start time; None when there is no such run."""
    row = db.execute("SELECT job, started_at FROM job_runs WHERE run_id = ?", [run_id]).fetchone()
    return (row[0], from_db(row[1])) if row else None


def latest_covering(
    db: Handle, statuses: tuple[str, ...]
) -> list[tuple[str, datetime | None, datetime | None]]:
    """Per job, the latest start and scheduled time of its real runs with one of ``statuses``.

    ``(job, started, scheduled)``; either time may be None. ``statuses`` are memkeeper's own
    words (written into the statement as a tuple literal).
    """
    sql = (
        "SELECT job, max(started_at) AS started, max(scheduled_for) AS scheduled"
        f" FROM job_runs WHERE status IN {statuses!r} AND dry_run = 0 GROUP BY job"
    )
    return [
        (row["job"], from_db(row["started"]), from_db(row["scheduled"])) for row in db.query(sql)
    ]


def last_ok_counts(db: Handle, job: str) -> tuple[str, str | None] | None:
    """The run id and counts (JSON text) of ``job``'s latest ``ok`` run, if it had one."""
    row = db.execute(
        "SELECT run_id, counts FROM job_runs WHERE job = ? AND status = 'ok'"
        " ORDER BY started_at DESC LIMIT 1",
        [job],
    ).fetchone()
    return (row[0], row[1]) if row else None


def retain_thinned_through(db: Handle) -> int:
    """The highest ``thinned_through`` any ``retain`` run recorded in its stats (0: none)."""
    if db.dialect == "postgres":
        row = db.execute(pg_retention.THINNED_THROUGH).fetchone()
    else:
        row = db.execute(
            "SELECT max(json_extract(counts, '$.stats.thinned_through')) FROM job_runs"
            " WHERE job = 'retain'"
        ).fetchone()
    return int(row[0] or 0)


def recent(db: Handle, job: str | None, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` runs (of ``job``, if given), newest first."""
    sql = "SELECT * FROM job_runs"
    params: list[Any] = []
    if job is not None:
        sql += " WHERE job = ?"
        params.append(job)
    sql += " ORDER BY started_at DESC, run_id DESC LIMIT ?"
    params.append(limit)
    return list(db.query(sql, params))


def last_of_each_job(db: Handle) -> list[dict[str, Any]]:
    """Each job's latest run, by job name."""
    return list(
        db.query(
            "SELECT * FROM job_runs WHERE started_at = (SELECT max(started_at) FROM"
            " job_runs AS newest WHERE newest.job = job_runs.job) ORDER BY job"
        )
    )
