"""What a PostgreSQL target held before memkeeper opened it, and taking away what it added.

Opening a store creates memkeeper's schema on a database that has none (and the extensions
it needs), committed before anything is copied into it. :func:`memkeeper.storage.postgres.
migrate_to.copy_memory` must leave a target as it found it when its copy does not commit, for
a library caller as for the CLI: so :class:`~memkeeper.storage.postgres.storage.
PostgresStorage` records, as it opens, what was there (:func:`found_in`, one query), and
a failed copy drops what is there now and was not then (:func:`drop_created`): memkeeper's
schema if it did not exist, its tables if it existed without any, the extensions that were
not installed. A schema that held memkeeper's tables already is left alone, and so is
anything else in the database (other schemas, their tables, the extensions it had).
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg import sql

from memkeeper.logs import get_logger
from memkeeper.storage.postgres.ddl import EXTENSIONS

log = get_logger(__name__)

_TABLES_OF = (
    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = %s AND c.relkind IN ('r', 'p')"
)


@dataclass(frozen=True)
class Found:
    """What the target held before memkeeper opened it."""

    schema: bool
    """Whether the schema existed (perhaps empty: made by its owner for memkeeper)."""
    tables: frozenset[str]
    extensions: frozenset[str]


def found_in(conn: psycopg.Connection, schema: str) -> Found:
    """What the database of ``conn`` holds now of what opening ``schema`` may create."""
    exists, tables, extensions = conn.execute(
        f"SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %s), ARRAY({_TABLES_OF}),"
        " ARRAY(SELECT extname FROM pg_extension WHERE extname = ANY(%s))",
        (schema, schema, list(EXTENSIONS)),
    ).fetchone()
    return Found(schema=bool(exists), tables=frozenset(tables), extensions=frozenset(extensions))


def _tables(conn: psycopg.Connection, schema: str) -> list[str]:
    return [name for (name,) in conn.execute(_TABLES_OF, (schema,))]


def drop_created(conn: psycopg.Connection, schema: str, found: Found) -> list[str]:
    """Drop what is in the database now and was not in ``found``; what was dropped.

    ``conn`` is in autocommit.
    """
    dropped: list[str] = []
    if found.schema and found.tables:  # memkeeper's schema already: not this opening's
        return dropped
    if not found.schema:
        if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone():
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
            dropped.append(f"schema {schema}")
    else:  # an empty schema made for memkeeper: emptied again
        for table in sorted(set(_tables(conn, schema)) - found.tables):
            conn.execute(
                sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(schema, table))
            )
            dropped.append(f"table {table}")
    for extension in EXTENSIONS:
        if extension in found.extensions:
            continue
        try:  # not CASCADE: another schema's objects may use it by now
            conn.execute(sql.SQL("DROP EXTENSION IF EXISTS {}").format(sql.Identifier(extension)))
            dropped.append(f"extension {extension}")
        except psycopg.Error as exc:
            log.info("an extension the copy created stays", extension=extension, cause=str(exc))
    return dropped
