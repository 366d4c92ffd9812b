"""Fixtures of the PostgreSQL tests: one real server per session, a database or schema per test.

Every test in this directory is marked ``postgres`` (``pytest -m "not postgres"`` skips
them). The server is pgserver's (tests/helpers/postgres.py) or the one
``MEMKEEPER_TEST_POSTGRES_URL`` names (its user needs CREATEDB). At the end of the session
the server is stopped and no directory's mode may have changed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from helpers.postgres import ROLE_PASSWORD, TestServer
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.postgres)


def _admin(server: TestServer) -> psycopg.Connection:
    return psycopg.connect(server.url, autocommit=True, connect_timeout=10)


@pytest.fixture
def pg_database(pg_server: TestServer) -> Iterator[str]:
    """The URL of a new, empty database of this test's own (dropped afterwards)."""
    name = f"mk_test_{uuid.uuid4().hex[:12]}"
    with _admin(pg_server) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield pg_server.url_for(name)
    with _admin(pg_server) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def pg_shared_database(pg_server: TestServer) -> str:
    """One database that tests share, each in a schema of its own (faster than a database)."""
    name = f"mk_shared_{uuid.uuid4().hex[:8]}"
    with _admin(pg_server) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = pg_server.url_for(name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    return url


@pytest.fixture
def pg_schema(pg_shared_database: str) -> Iterator[tuple[str, str]]:
    """(database URL, schema name): a schema name of this test's own (dropped afterwards)."""
    schema = f"mk_{uuid.uuid4().hex[:12]}"
    yield pg_shared_database, schema
    with psycopg.connect(pg_shared_database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def role(pg_database: str) -> Iterator[str]:
    """A login role with ROLE_PASSWORD that owns the test database (the server checks passwords
    of every role but the superuser). The extensions are there already, as a DBA would do."""
    name = f"mk_role_{uuid.uuid4().hex[:8]}"
    dbname = conninfo_to_dict(pg_database)["dbname"]
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(name), sql.Literal(ROLE_PASSWORD)
            )
        )
        conn.execute(
            sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                sql.Identifier(dbname), sql.Identifier(name)
            )
        )
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    yield name
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(sql.SQL("REASSIGN OWNED BY {} TO postgres").format(sql.Identifier(name)))
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
