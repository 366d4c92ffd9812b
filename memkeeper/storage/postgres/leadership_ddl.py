"""Schema step ``0003_fleet``: what a fleet of services on one PostgreSQL memory shares.

- ``leadership``: one row per fenced lock (``daemon``: the scheduling leader; ``jobs``: the
  job lock). ``epoch`` is bumped by every new holder, on the lock's own session, right after
  it took the lock; every transaction of a job checks, before it commits, that the ``jobs``
  epoch is still the one its run started with (``FOR SHARE``, so a new holder's bump waits
  for a check already made to commit). See :mod:`memkeeper.storage.postgres.leadership`.
- ``fleet_members``: one row per ``memkeeper run`` process (host, pid, role), refreshed every
  few seconds, for ``status``.
- ``job_runs.host``: the host that ran each job.

Schema step ``0004_job_locks``: a fenced lock per job. Every job run holds ``jobs`` shared and
``job:<name>`` exclusively, so ``leadership`` gets a row per job name (``job:merge``…) and
one for the shared holders of ``jobs`` (``jobs:shared``), each written by its first holder.

(0002 is the search helper's step; the names only need to be distinct and ordered.)
"""

FLEET = """
CREATE TABLE {schema}.leadership (
    name TEXT PRIMARY KEY CHECK (name IN ('daemon', 'jobs')),
    epoch BIGINT NOT NULL DEFAULT 0,
    host TEXT,
    pid INTEGER,
    since TEXT,
    renewed_at TEXT
);
INSERT INTO {schema}.leadership (name) VALUES ('daemon'), ('jobs');

CREATE TABLE {schema}.fleet_members (
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('leader', 'follower')),
    started_at TEXT NOT NULL,
    seen_at TEXT NOT NULL,
    PRIMARY KEY (host, pid)
);

ALTER TABLE {schema}.job_runs ADD COLUMN host TEXT;
"""

JOB_LOCKS = """
ALTER TABLE {schema}.leadership DROP CONSTRAINT IF EXISTS leadership_name_check;
ALTER TABLE {schema}.leadership ADD CONSTRAINT leadership_name_check
    CHECK (name IN ('daemon', 'jobs', 'jobs:shared') OR name LIKE 'job:%');
"""
