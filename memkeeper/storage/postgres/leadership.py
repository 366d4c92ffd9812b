"""Leadership and fencing of a PostgreSQL memory shared by a fleet of ``memkeeper run``.

**Leader.** Every service takes the ``daemon`` session advisory lock
(:class:`~memkeeper.storage.postgres.job_locks.AdvisoryLock`) on a connection of its own; the
one that holds it schedules the jobs, the others stand by and try it again every second. The
lock's session carries ``idle_session_timeout = takeover_seconds`` and is pinged far more
often by its holder, so the server ends the session of a holder that stopped answering (a
paused VM, a SIGSTOP, a partition whose TCP connection stays half open) within
``takeover_seconds``; a killed holder's session ends at once. Either way the lock is free
and the next follower's try takes it.

**Fencing: a lease epoch checked inside each job transaction.** A holder that lost its lock
may not know yet (it was paused, and resumes mid-job). So each fenced lock (``daemon`` and
``jobs``) has a row in ``leadership`` whose ``epoch`` every new holder bumps, on the lock's
own session, right after taking the lock. Every job runs under the ``jobs`` lock, and every
transaction on the running store's connection checks, just before its ``COMMIT``, that the
``jobs`` epoch is still the one its holder bumped it to (:class:`Fence`; ``SELECT … FOR
SHARE``, sent in the ``COMMIT``'s own string: :meth:`Fence.before_commit`). A new
holder's ``UPDATE`` of the row waits for a transaction that already passed the check, so
either the old transaction committed *before* the new holder started, or it
reads the new epoch and rolls back with :class:`~memkeeper.errors.LockLost`: no job write of
a deposed holder commits after a new one began. (Running the writes on the lock's own session
was the other way; it would tie every job transaction to one connection and lose the store's
reconnecting, and a paused holder's session is ended by the server anyway.) A check that
passed and then stalled before its ``COMMIT`` (the process paused in that instant) would make
the new holder's bump wait: after ``BUMP_WAIT_SECONDS`` the new holder ends such sessions
(``pg_terminate_backend``: same role, or ``pg_signal_backend``), rolling them back.

**Shared locks.** Every job run holds ``jobs`` *shared* (and its own ``job:<name>``
exclusively), ``undo`` holds it exclusively. A shared holder cannot bump ``jobs`` (it would
fence the other jobs running beside it), so the shared holders have a row of their own,
``jobs:shared``, which each bumps when it takes the lock: an exclusive holder's fence checks
that ``jobs`` is still its epoch *and* that ``jobs:shared`` has not moved since it took the
lock (no job started after it: it was deposed), and a shared holder's fence checks that
``jobs`` has not moved since it took the lock (no undo started after it) and its own
``job:<name>`` epoch. A row not written yet reads as epoch 0.

**Fleet members** refresh a row each (host, pid, role) every few seconds for ``status``.
The host name is the machine's, or ``MEMKEEPER_HOST_NAME`` (containers that all call
themselves ``localhost``; the tests' simulated hosts).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from memkeeper.clock import from_db, to_db
from memkeeper.errors import LockLost
from memkeeper.logs import get_logger
from memkeeper.storage.host import ENV_HOST_NAME, host_name  # noqa: F401 - re-exported

log = get_logger(__name__)

BUMP_WAIT_SECONDS = 3.0
TAKEN_SHARED = frozenset({"jobs"})
"""The fenced locks that are also taken shared (their ``<name>:shared`` row counts those)."""
MEMBERS_KEPT = timedelta(hours=1)
"""Rows of members not seen for this long are deleted by the leader."""


def _table(schema: str, name: str) -> sql.Composed:
    return sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(name))


def has_fleet_tables(conn: psycopg.Connection, schema: str) -> bool:
    """Whether ``schema`` has step 0003's tables (a store opened it with this version)."""
    row = conn.execute(
        "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'leadership'", (schema,)
    ).fetchone()
    return row is not None


def shared_name(name: str) -> str:
    """The row whose epoch the shared holders of lock ``name`` bump."""
    return f"{name}:shared"


def read_epoch(conn: psycopg.Connection, schema: str, name: str) -> int:
    """The current epoch of lock ``name`` (0: no holder wrote one yet)."""
    row = conn.execute(
        sql.SQL("SELECT epoch FROM {} WHERE name = %s").format(_table(schema, "leadership")),
        (name,),
    ).fetchone()
    return int(row[0]) if row else 0


def bump_epoch(
    conn: psycopg.Connection, schema: str, name: str, *, host: str, pid: int, now: datetime
) -> int:
    """Start a new epoch of lock ``name`` (its holder took it just now, on ``conn``).

    Waits for fenced transactions that passed their check to commit; one that stalls longer
    than :data:`BUMP_WAIT_SECONDS` belongs to a deposed holder and is ended (as is a deposed
    leader's heartbeat paused halfway: nothing else locks the row).
    """
    update = sql.SQL(
        "INSERT INTO {0} AS l (name, epoch, host, pid, since, renewed_at)"
        " VALUES (%s, 1, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET"
        " epoch = l.epoch + 1, host = excluded.host, pid = excluded.pid,"
        " since = excluded.since, renewed_at = excluded.renewed_at RETURNING epoch"
    ).format(_table(schema, "leadership"))
    for _attempt in range(3):
        try:
            with conn.transaction():
                conn.execute(f"SET LOCAL lock_timeout = {int(BUMP_WAIT_SECONDS * 1000)}")
                row = conn.execute(update, (name, host, pid, to_db(now), to_db(now))).fetchone()
            return int(row[0]) if row else 0
        except psycopg.errors.LockNotAvailable:
            ended = _end_stalled_checks(conn, schema)
            log.warning("ended stalled transactions of a deposed holder", lock=name, sessions=ended)
    raise LockLost(f"could not start a new epoch of the {name} lock: its row stays locked")


_STALLED = (
    "SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'relation' AND l.relation = to_regclass(%s)"
    " AND l.mode IN ('RowShareLock', 'RowExclusiveLock') AND l.granted"
    " AND l.pid <> pg_backend_pid() AND a.state LIKE 'idle in transaction%%'"
    " AND a.state_change < now() - make_interval(secs => %s)"
)


def _end_stalled_checks(conn: psycopg.Connection, schema: str) -> int:
    """End the sessions stalled inside a transaction that locked ``leadership`` rows: idle in
    it for most of the wait just given up. Jobs of other names pass their check and commit at
    once, so one caught in between is never idle that long and is left alone."""
    rows = conn.execute(_STALLED, (f'"{schema}".leadership', BUMP_WAIT_SECONDS * 2 / 3)).fetchall()
    return sum(1 for (ended,) in rows if ended)


def limit_idle_transactions(db: Any, seconds: float | None) -> None:
    """``idle_in_transaction_session_timeout`` of the store's session while it runs a job
    (None: the server's default again). A failure here never stops the job."""
    value = "0" if seconds is None else str(int(seconds * 1000))
    per_thread = getattr(db, "thread_setting", None)
    if per_thread is not None:  # a pooled store: this thread's connections only
        per_thread("idle_in_transaction_session_timeout", None if seconds is None else value)
        return
    try:
        db.execute("SELECT set_config('idle_in_transaction_session_timeout', ?, false)", [value])
    except Exception as exc:
        log.debug("could not limit idle transactions", error=str(exc))


FENCE_SQLSTATE = "MKF01"
"""The SQLSTATE of a fence check that failed on the server (:meth:`Fence.before_commit`)."""


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class Fence:
    """The check a fenced store runs before each ``COMMIT`` (see the module docstring).

    ``epochs``: the epoch each fenced lock must still have (``jobs``, and ``daemon`` when a
    service leader runs the job); ``lost`` is the job lock's own "my session ended" flag:
    set, the check fails at once.
    """

    def __init__(self, schema: str, epochs: dict[str, int], lost: Any = None) -> None:
        self.schema = schema
        self.epochs = dict(epochs)
        self.lost = lost
        quoted = schema.replace('"', '""')
        # The check as one statement that fails the transaction, sent with the COMMIT in its
        # round trip (:meth:`before_commit`): each lock's row read FOR SHARE (a row not
        # written yet is epoch 0), its epoch compared with the one held, in name order.
        steps = "".join(
            f'SELECT epoch INTO found FROM "{quoted}".leadership WHERE name = {_literal(name)}'
            f" FOR SHARE; IF coalesce(found, 0) <> {int(epoch)} THEN RAISE EXCEPTION USING"
            f" ERRCODE = '{FENCE_SQLSTATE}', MESSAGE = format('%s epoch %s was followed by %s',"
            f" {_literal(name)}, {int(epoch)}, coalesce(found, 0)); END IF; "
            for name, epoch in sorted(self.epochs.items())
        )
        self._guard = f"DO $fence$ DECLARE found bigint; BEGIN {steps}END $fence$"

    def before_commit(self, conn: Any) -> None:
        """The check, sent with the ``COMMIT`` that follows (one round trip, not two): it
        fails the transaction on the server, and :meth:`refusal` turns that error into
        :class:`~memkeeper.errors.LockLost`. A job's batch paid a round trip for the check's
        answer alone before its ``COMMIT``."""
        if self.lost is not None and self.lost.is_set():
            raise LockLost(self._refused("its lock's session ended"))
        conn.pending.parts.append(self._guard)

    def refusal(self, exc: BaseException) -> LockLost | None:
        """The :class:`~memkeeper.errors.LockLost` of a failed :meth:`before_commit` check
        (``exc`` the server's error), None for any other error."""
        if getattr(exc, "sqlstate", None) != FENCE_SQLSTATE:
            return None
        diag = getattr(exc, "diag", None)
        return LockLost(self._refused(getattr(diag, "message_primary", None) or "epoch moved"))

    def _refused(self, why: str) -> str:
        return (
            f"the job lock or the lead was lost ({why}): another process may be running jobs "
            "now; this transaction rolled back"
        )


# -- fleet members -------------------------------------------------------------------------------


def member_session(conn: psycopg.Connection, idle_limit_seconds: float) -> psycopg.Connection:
    """Prepare a service's heartbeat connection: its statements never wait long for a lock,
    and a transaction of it left open (the process paused halfway) ends after the limit, so
    a paused service's heartbeat never holds up the one taking over."""
    conn.execute("SELECT set_config('lock_timeout', '1000', false)")
    idle = str(int(idle_limit_seconds * 1000))
    conn.execute("SELECT set_config('idle_in_transaction_session_timeout', %s, false)", (idle,))
    return conn


def beat(
    conn: psycopg.Connection,
    schema: str,
    *,
    host: str,
    pid: int,
    role: str,
    started: datetime,
    now: datetime,
) -> None:
    """Refresh this service's row (and, as leader, the lease's ``renewed_at`` and old rows)."""
    members = _table(schema, "fleet_members")
    with conn.transaction():
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (host, pid, role, started_at, seen_at) VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT (host, pid) DO UPDATE SET role = excluded.role,"
                " seen_at = excluded.seen_at"
            ).format(members),
            (host, pid, role, to_db(started), to_db(now)),
        )
        if role == "leader":
            conn.execute(
                sql.SQL("UPDATE {} SET renewed_at = %s WHERE name = 'daemon'").format(
                    _table(schema, "leadership")
                ),
                (to_db(now),),
            )
            # Old rows, and the row of a predecessor that died leading (one leader at a time).
            conn.execute(
                sql.SQL(
                    "DELETE FROM {} WHERE seen_at < %s OR (role = 'leader'"
                    " AND NOT (host = %s AND pid = %s))"
                ).format(members),
                (to_db(now - MEMBERS_KEPT), host, pid),
            )


def leave(conn: psycopg.Connection, schema: str, *, host: str, pid: int) -> None:
    """Delete this service's row (a clean stop)."""
    conn.execute(
        sql.SQL("DELETE FROM {} WHERE host = %s AND pid = %s").format(
            _table(schema, "fleet_members")
        ),
        (host, pid),
    )


def fleet_state(
    conn: psycopg.Connection, schema: str, *, now: datetime, recent: timedelta
) -> dict[str, Any]:
    """The leader's lease (host, pid, since, epoch) and the members seen within ``recent``."""
    if not has_fleet_tables(conn, schema):
        return {"leader": None, "members": []}
    row = conn.execute(
        sql.SQL("SELECT host, pid, since, renewed_at, epoch FROM {} WHERE name = 'daemon'").format(
            _table(schema, "leadership")
        )
    ).fetchone()
    leader = None
    if row is not None and row[0] is not None:
        leader = {"host": row[0], "pid": row[1], "since": row[2], "renewed_at": row[3]}
        leader["epoch"] = row[4]
    rows = conn.execute(
        sql.SQL(
            "SELECT host, pid, role, started_at, seen_at FROM {} WHERE seen_at >= %s"
            " ORDER BY host, pid"
        ).format(_table(schema, "fleet_members")),
        (to_db(now - recent),),
    ).fetchall()
    members = [
        {"host": h, "pid": p, "role": r, "started_at": s, "seen_at": seen}
        for h, p, r, s, seen in rows
    ]
    return {"leader": leader, "members": members}


def seconds_since(text: str | None, now: datetime) -> float | None:
    """How long ago a stored time was (for "seen 3 s ago")."""
    moment = from_db(text)
    return None if moment is None else (now - moment).total_seconds()


def recent_runs(conn: psycopg.Connection, schema: str, per_job: int) -> list[dict[str, Any]]:
    """Each job's latest ``per_job`` real runs with the host that ran them, newest first."""
    rows = conn.execute(
        sql.SQL(
            "SELECT job, run_id, status, started_at, host FROM (SELECT *, row_number() OVER"
            " (PARTITION BY job ORDER BY started_at DESC, run_id DESC) AS n FROM {}"
            " WHERE dry_run = 0) AS r WHERE n <= %s ORDER BY job, started_at DESC"
        ).format(_table(schema, "job_runs")),
        (per_job,),
    ).fetchall()
    keys = ("job", "run_id", "status", "started_at", "host")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def fleet_status(
    url: Any, schema: str, *, connect_timeout: float, now: datetime, recent: timedelta
) -> dict[str, Any]:
    """For ``status``: the leader's lease, the members seen within ``recent``, recent runs."""
    from memkeeper.storage.postgres.pool import connect

    with connect(url, connect_timeout=connect_timeout, autocommit=True) as conn:
        state = fleet_state(conn, schema, now=now, recent=recent)
        if has_fleet_tables(conn, schema):
            state["runs"] = recent_runs(conn, schema, 3)
        else:
            state["runs"] = []
    return state
