"""What ``memkeeper status`` shows of a PostgreSQL memory: server, schema, tables, URL.

Row counts are exact (``count(*)``: an operator comparing before and after a run wants the
true figure; on a million entries it takes a fraction of a second); bytes are each table's
total on disk, indexes and TOAST included (``pg_total_relation_size``). The URL is shown
masked; the server's version and the extensions' are read from the server itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from memkeeper.storage.postgres.ddl import EXTENSIONS, TABLES
from memkeeper.storage.postgres.schema import KNOWN_STEPS, applied_steps
from memkeeper.storage.postgres.url import DatabaseUrl

if TYPE_CHECKING:
    from memkeeper.storage.postgres.leases import PooledDatabase


@dataclass(frozen=True)
class TableSize:
    name: str
    rows: int
    bytes: int


@dataclass(frozen=True)
class PostgresStatus:
    url: str  # masked
    server_version: str
    extensions: dict[str, str]
    schema: str
    schema_version: str | None  # the last step applied; None before the first open
    schema_current: bool
    tables: tuple[TableSize, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "url": self.url,
            "server_version": self.server_version,
            "extensions": dict(self.extensions),
            "schema": self.schema,
            "schema_version": self.schema_version,
            "schema_current": self.schema_current,
            "tables": {t.name: {"rows": t.rows, "bytes": t.bytes} for t in self.tables},
        }


def read_status(conn: psycopg.Connection, url: DatabaseUrl, schema: str) -> PostgresStatus:
    """Read the figures in one read-only snapshot: on a connection in autocommit (a store's)
    in a transaction of its own, else in the caller's, rolled back."""
    if conn.autocommit:
        with conn.transaction(force_rollback=True):
            return _read(conn, url, schema)
    try:
        return _read(conn, url, schema)
    finally:
        conn.rollback()


def _read(conn: psycopg.Connection, url: DatabaseUrl, schema: str) -> PostgresStatus:
    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    (version,) = conn.execute("SHOW server_version").fetchone()  # type: ignore[misc]
    extensions = dict(
        conn.execute(
            "SELECT extname, extversion FROM pg_extension WHERE extname = ANY(%s)",
            (list(EXTENSIONS),),
        ).fetchall()
    )
    applied = applied_steps(conn, schema)
    tables = []
    if applied is not None:
        for table in TABLES:
            name = sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(table))
            (rows,) = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(name)).fetchone()  # type: ignore[misc]
            (size,) = conn.execute(
                "SELECT pg_total_relation_size(%s::regclass)",
                (f"{_quote(schema)}.{_quote(table)}",),
            ).fetchone()  # type: ignore[misc]
            tables.append(TableSize(table, int(rows), int(size)))
    return PostgresStatus(
        url=str(url),
        server_version=str(version),
        extensions=extensions,
        schema=schema,
        schema_version=applied[-1] if applied else None,
        schema_current=applied is not None and set(applied) == set(KNOWN_STEPS),
        tables=tuple(tables),
    )


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def store_status(db: PooledDatabase, url: DatabaseUrl) -> tuple[dict[str, Any], dict[str, Any]]:
    """``store.status()``'s parts on PostgreSQL: (``database``: server, extensions, schema
    and its version, the masked URL, the store's connection pool; ``files``: the one
    database as SQLite's hot file is shown, every table's rows and bytes, cold storage's
    table among them). The pool: ``size`` (its most, ``[database] pool_size``), ``open``,
    ``in_use`` (this read's own connection among them) and ``waiting`` threads."""
    status = read_status(db.raw, url, db.schema)
    database = status.as_dict()
    database["pool"] = db.pool_status()
    tables = database.pop("tables")
    files = {
        "hot": {
            "path": status.url,
            "bytes": {"db": sum(t.bytes for t in status.tables), "wal": None},
            "pages": None,
            "tables": tables,
        }
    }
    return database, files
