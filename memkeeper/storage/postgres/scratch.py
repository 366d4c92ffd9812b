"""Looking at and clearing memkeeper's schema in a scratch database (the bench's)."""

from __future__ import annotations

from psycopg import sql

from memkeeper.storage.postgres.pool import connect
from memkeeper.storage.postgres.schema import DEFAULT_SCHEMA
from memkeeper.storage.postgres.url import parse_url


def has_memkeeper_schema(url: str, schema: str = DEFAULT_SCHEMA) -> bool:
    """Whether the database ``url`` names has a schema ``schema``."""
    with connect(parse_url(url), autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row is not None


def drop_memkeeper_schema(url: str, schema: str = DEFAULT_SCHEMA) -> None:
    """Drop ``schema`` and everything in it (the bench's own data; never a real memory:
    the bench refuses a database that had one before it started)."""
    with connect(parse_url(url), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def server_version(url: str) -> str:
    """The server's version, as it reports it (``server_version``)."""
    with connect(parse_url(url), autocommit=True) as conn:
        return str(conn.execute("SHOW server_version").fetchone()[0])
