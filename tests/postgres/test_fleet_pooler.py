"""Poolers: a session lock taken through a transaction-mode pooler is detected and refused.

Through PgBouncer in transaction mode, two statements of one client connection may run on
two server sessions: a lock taken by the first is not held by the session of the second.
``check_session`` asks, right after the lock is taken, whether the session the next
statement runs on holds it. Here the "next statement" is sent on another server session, as
the pooler would do, and on the holding one, as a direct connection does.
"""

from __future__ import annotations

import psycopg
import pytest

from memkeeper.errors import EXIT_CONFIG, PoolerDetected
from memkeeper.storage.postgres.job_locks import LOCK_CLASS, check_session, lock_key


def test_a_lock_not_on_the_next_statements_session_is_refused(pg_database: str) -> None:
    key = lock_key("memkeeper", "daemon")
    with (
        psycopg.connect(pg_database, autocommit=True) as holder,
        psycopg.connect(pg_database, autocommit=True) as elsewhere,
    ):
        assert holder.execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, key)).fetchone()[
            0
        ]
        # A direct (or session-mode) connection: the next statement's session holds it.
        assert check_session(holder, key, "test") == holder.info.backend_pid
        # A transaction-mode pooler handed the next statement to another session.
        with pytest.raises(PoolerDetected, match="transaction-mode pooler") as caught:
            check_session(elsewhere, key, "test")
        assert caught.value.exit_code == EXIT_CONFIG == 78
        assert "session-mode" in str(caught.value)
