"""Create and migrate memkeeper's schema on PostgreSQL when a store opens.

memkeeper's tables live in one PostgreSQL schema of their own (``memkeeper`` by default), so
they sit beside an application's tables in the same database and ``pg_dump --schema`` takes
exactly them. The steps (``ddl.STEPS``) applied are recorded in ``schema_migrations``.

Opening is cheap when nothing is due: one read of ``schema_migrations``. When steps are due,
they are applied in ONE transaction under a transaction-scoped advisory lock (one key per
database), so two processes opening a new database at once never both migrate: the second
waits for the first to commit, re-reads and finds nothing to do. A failing step rolls back
every step and the extensions with it.

A schema holding steps this version does not know was written by a newer memkeeper and is
refused with :class:`~memkeeper.errors.DatabaseError`, as SQLite refuses a newer file; so is a
non-empty schema that is not memkeeper's.
"""

from __future__ import annotations

from datetime import datetime

import psycopg
from psycopg import sql

from memkeeper.clock import to_db
from memkeeper.errors import DatabaseError
from memkeeper.logs import get_logger
from memkeeper.storage.postgres.ddl import EXTENSIONS, STEPS

log = get_logger(__name__)

DEFAULT_SCHEMA = "memkeeper"
MIGRATIONS_TABLE = "schema_migrations"
# pg_advisory_xact_lock(classid, objid): "MKHD" as SQLite's application id, then 1 = migrate.
LOCK_CLASS = 0x4D4B4844
LOCK_MIGRATE = 1
KNOWN_STEPS = tuple(name for name, _ in STEPS)


def applied_steps(conn: psycopg.Connection, schema: str) -> list[str] | None:
    """The step names recorded in ``schema``, in order; None when it has no memkeeper table."""
    exists = conn.execute(
        "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = %s",
        (schema, MIGRATIONS_TABLE),
    ).fetchone()
    if exists is None:
        return None
    rows = conn.execute(
        sql.SQL("SELECT name FROM {}.{} ORDER BY applied_at, name").format(
            sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE)
        )
    ).fetchall()
    return [name for (name,) in rows]


def pending_steps(applied: list[str] | None) -> list[str]:
    """The known steps not yet applied, in order."""
    done = set(applied or ())
    return [name for name in KNOWN_STEPS if name not in done]


def migrate(conn: psycopg.Connection, schema: str, *, now: datetime, where: str) -> list[str]:
    """Bring ``schema`` up to this version; returns the steps applied (empty: nothing due).

    ``conn`` is a dedicated connection outside any transaction (its own commit is used);
    ``where`` names the database in messages (the masked URL). ``now`` stamps the steps.
    """
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise DatabaseError(f"{where}: migrate needs a connection outside a transaction")
    applied = applied_steps(conn, schema)
    conn.rollback()  # end the read's transaction before deciding to lock
    _check_not_newer(applied, schema, where)
    if applied is not None and not pending_steps(applied):
        return []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, LOCK_MIGRATE))
        applied = applied_steps(conn, schema)  # another process may have migrated meanwhile
        _check_not_newer(applied, schema, where)
        due = pending_steps(applied)
        if not due:
            return []
        if applied is None:
            _create_schema(conn, schema, where)
        # Types and operators of the extensions resolve through the search path in the DDL.
        path = [schema, *extension_schemas(conn)]
        conn.execute(
            sql.SQL("SET LOCAL search_path TO {}").format(
                sql.SQL(", ").join(sql.Identifier(s) for s in path)
            )
        )
        steps = dict(STEPS)
        for name in due:
            conn.execute(sql.SQL(steps[name]).format(schema=sql.Identifier(schema)))
            conn.execute(
                sql.SQL("INSERT INTO {}.{} (name, applied_at) VALUES (%s, %s)").format(
                    sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE)
                ),
                (name, to_db(now)),
            )
    log.info("postgres schema migrated", schema=schema, steps=",".join(due))
    return due


def extension_schemas(conn: psycopg.Connection) -> tuple[str, ...]:
    """The schemas holding the extensions memkeeper uses (their types and operators must be
    on every connection's ``search_path``), ``public`` included."""
    rows = conn.execute(
        "SELECT DISTINCT n.nspname FROM pg_extension e "
        "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = ANY(%s)",
        (list(EXTENSIONS),),
    ).fetchall()
    return tuple(sorted({name for (name,) in rows} | {"public"}))


def _create_schema(conn: psycopg.Connection, schema: str, where: str) -> None:
    tables = conn.execute(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm')",
        (schema,),
    ).fetchone()
    if tables and tables[0]:
        raise DatabaseError(
            f"{where}: schema {schema!r} holds {tables[0]} tables that are not memkeeper's; "
            "name another schema or an empty database"
        )
    for extension in EXTENSIONS:
        try:
            with conn.transaction():
                conn.execute(
                    sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(extension))
                )
        except psycopg.errors.InsufficientPrivilege:
            raise DatabaseError(
                f"{where}: the {extension!r} extension is not installed and this user may not "
                f"create it; ask the database owner to run CREATE EXTENSION {extension}"
            ) from None
        except (psycopg.errors.FeatureNotSupported, psycopg.errors.UndefinedFile):
            raise DatabaseError(
                f"{where}: the server does not offer the {extension!r} extension"
            ) from None
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    conn.execute(
        sql.SQL("CREATE TABLE {}.{} (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)").format(
            sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE)
        )
    )


def _check_not_newer(applied: list[str] | None, schema: str, where: str) -> None:
    unknown = [name for name in applied or () if name not in KNOWN_STEPS]
    if unknown:
        raise DatabaseError(
            f"{where} (schema {schema!r}) was written by a newer memkeeper (schema steps "
            f"{', '.join(unknown)} are unknown to this version); upgrade memkeeper to open it"
        )
