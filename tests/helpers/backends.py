"""One suite, every backend: the store-level tests run on SQLite and on PostgreSQL.

A test module opts in with ``pytestmark = pytest.mark.both_backends``; its tests that take
``db_path`` (directly, or through ``store``, ``cli``, ``make_store``) then run twice, as
``[sqlite]`` and ``[postgres]``. On PostgreSQL ``db_path`` is the URL of the session's test
database, emptied before each test (``TRUNCATE`` of memkeeper's tables: far cheaper than a
database or a schema per test), so every store a test opens on it shares one memory, as
stores opened on one file do. A test of a SQLite-only behaviour (the two files, their bytes,
PRAGMAs) in such a module is marked ``sqlite_only`` and runs once.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from memkeeper.storage.postgres.ddl import TABLES
from memkeeper.storage.postgres.schema import DEFAULT_SCHEMA

BACKENDS = ("sqlite", "postgres")


def empty_memory(url: str) -> None:
    """Empty every memkeeper table of the test database (its schema stays migrated)."""
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute("SET lock_timeout = '10s'")  # a store left open in a transaction: fail
        exists = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (DEFAULT_SCHEMA,)
        ).fetchone()
        if not exists or not exists[0]:
            return
        conn.execute(
            sql.SQL("TRUNCATE {} RESTART IDENTITY").format(
                sql.SQL(", ").join(sql.Identifier(DEFAULT_SCHEMA, t) for t in TABLES)
            )
        )
