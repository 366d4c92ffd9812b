"""The memkeeper schema on a real PostgreSQL: created, re-opened, migrated once, refused."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import sql

from memkeeper.errors import EXIT_DATABASE, DatabaseError
from memkeeper.storage.postgres.ddl import EXTENSIONS, TABLES
from memkeeper.storage.postgres.pool import Pool
from memkeeper.storage.postgres.schema import (
    KNOWN_STEPS,
    MIGRATIONS_TABLE,
    applied_steps,
    extension_schemas,
    migrate,
)
from memkeeper.storage.postgres.status import read_status
from memkeeper.storage.postgres.url import parse_url

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def tables_of(conn: psycopg.Connection, schema: str) -> set[str]:
    rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))
    return {name for (name,) in rows.fetchall()}


def test_the_schema_is_created_on_an_empty_database(pg_database: str) -> None:
    with psycopg.connect(pg_database) as conn:
        assert conn.execute(
            "SELECT count(*) FROM pg_extension WHERE extname = 'vector'"
        ).fetchone() == (0,)
        conn.rollback()
        assert migrate(conn, "memkeeper", now=NOW, where="test") == list(KNOWN_STEPS)
        assert tables_of(conn, "memkeeper") == {*TABLES, MIGRATIONS_TABLE}
        installed = conn.execute("SELECT extname FROM pg_extension").fetchall()
        assert set(EXTENSIONS) <= {name for (name,) in installed}
        stamped = conn.execute("SELECT applied_at FROM memkeeper.schema_migrations").fetchall()
        assert stamped == [("2026-12-01T12:00:00.000000+00:00",)] * len(KNOWN_STEPS)
        # The same rules as SQLite: at most one current entry per key, checked values.
        insert = (
            "INSERT INTO memkeeper.memories (id, user_id, kind, key, value, confidence, state,"
            " created_at, updated_at, state_since, last_used_at) VALUES"
            " (%s, 'u1', 'fact', 'city', 'Paris', %s, 'active', 't', 't', 't', 't')"
        )
        conn.execute(insert, ("m1", 0.9))
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(insert, ("m2", 0.9))
        conn.rollback()
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(insert, ("m3", 1.5))


def test_reopening_is_a_no_op(pg_schema: tuple[str, str]) -> None:
    url, schema = pg_schema
    with psycopg.connect(url) as conn:
        migrate(conn, schema, now=NOW, where="test")
        before = conn.execute(
            "SELECT c.relname, c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s ORDER BY 1",
            (schema,),
        ).fetchall()
        conn.rollback()
        assert migrate(conn, schema, now=datetime(2027, 1, 1, tzinfo=UTC), where="test") == []
        after = conn.execute(
            "SELECT c.relname, c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s ORDER BY 1",
            (schema,),
        ).fetchall()
        assert after == before  # nothing dropped and re-created
        assert applied_steps(conn, schema) == list(KNOWN_STEPS)


def test_two_processes_opening_at_once_migrate_once(pg_schema: tuple[str, str]) -> None:
    url, schema = pg_schema
    openers = 4
    barrier = threading.Barrier(openers)
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            with psycopg.connect(url) as conn:
                barrier.wait(10)
                results.append(migrate(conn, schema, now=NOW, where="test"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(openers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert sorted(results, key=len) == [[], [], [], list(KNOWN_STEPS)]
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            sql.SQL("SELECT name FROM {}.schema_migrations").format(sql.Identifier(schema))
        ).fetchall()
    assert sorted(name for (name,) in rows) == sorted(KNOWN_STEPS)


def test_a_newer_schema_is_refused_and_left_alone(pg_schema: tuple[str, str]) -> None:
    url, schema = pg_schema
    with psycopg.connect(url) as conn:
        migrate(conn, schema, now=NOW, where="test")
        conn.execute(
            sql.SQL("INSERT INTO {}.schema_migrations VALUES ('9999_from_the_future', 'x')").format(
                sql.Identifier(schema)
            )
        )
        conn.commit()
        masked = str(parse_url(url))
        with pytest.raises(DatabaseError) as caught:
            migrate(conn, schema, now=NOW, where=masked)
        assert caught.value.exit_code == EXIT_DATABASE  # as SQLite's newer file
        assert "newer memkeeper" in str(caught.value) and "9999_from_the_future" in str(
            caught.value
        )
        assert len(applied_steps(conn, schema)) == len(KNOWN_STEPS) + 1


def test_a_schema_holding_other_tables_is_refused(pg_schema: tuple[str, str]) -> None:
    url, schema = pg_schema
    with psycopg.connect(url) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("CREATE TABLE {}.orders (id int)").format(sql.Identifier(schema)))
        conn.commit()
        with pytest.raises(DatabaseError, match="not memkeeper's"):
            migrate(conn, schema, now=NOW, where="test")
        assert tables_of(conn, schema) == {"orders"}


def test_status_shows_server_schema_tables_and_the_masked_url(pg_schema: tuple[str, str]) -> None:
    url, schema = pg_schema
    with psycopg.connect(url) as conn:
        fresh = read_status(conn, parse_url(url), schema)
        assert fresh.schema_version is None and not fresh.schema_current and fresh.tables == ()
        migrate(conn, schema, now=NOW, where="test")
        name = sql.Identifier(schema)
        for i in range(3):
            conn.execute(
                sql.SQL(
                    "INSERT INTO {}.messages (user_id, session_id, role, content, created_at)"
                    " VALUES ('u1', 's1', 'user', %s, 't')"
                ).format(name),
                (f"message {i} " * 50,),
            )
        conn.commit()
        status = read_status(
            conn, parse_url(url.replace("postgres:@", "postgres:hunter2-pw@")), schema
        )
        server_number = conn.info.server_version
    assert status.schema == schema
    assert status.schema_version == KNOWN_STEPS[-1] and status.schema_current
    assert status.server_version.split(".")[0] == str(server_number // 10000)
    assert set(status.extensions) == set(EXTENSIONS)
    sizes = {t.name: t for t in status.tables}
    assert set(sizes) == set(TABLES)
    assert sizes["messages"].rows == 3 and sizes["memories"].rows == 0
    assert sizes["messages"].bytes > sizes["tombstones"].bytes > 0
    assert "hunter2-pw" not in str(status.as_dict()) and "***" in status.url


def test_a_pool_over_a_migrated_schema_resolves_its_tables_and_vector_type(
    pg_schema: tuple[str, str],
) -> None:
    url, schema = pg_schema
    with psycopg.connect(url) as conn:
        migrate(conn, schema, now=NOW, where="test")
        extension_homes = extension_schemas(conn)
    pool = Pool(parse_url(url), schema=schema, extension_schemas=extension_homes)
    with pool, pool.connection() as conn:
        # Unqualified names: memkeeper's schema and the extensions' are on the path.
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)
        (distance,) = conn.execute("SELECT '[1,2]'::vector <=> '[2,4]'::vector").fetchone()
    assert distance == pytest.approx(0)
