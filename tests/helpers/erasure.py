"""Where an erased value could still be, on either backend, seen from outside memkeeper.

On SQLite the places are the files (main, WAL, shm of both databases), searched byte for
byte after a checkpoint; on PostgreSQL the server owns the files, so the places are the
tables of memkeeper's schema, every row of every one of them searched as text (the row
cast to text: every column, generated keyword columns and JSON images included).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.databases import checkpoint_files, dump_databases, files_containing, is_postgres
from memkeeper.storage.postgres.schema import DEFAULT_SCHEMA


def hot_place(path: Path | str) -> str:
    """Where hot entries live: the hot file's name, or the table."""
    return "memories" if is_postgres(path) else "memory.db"


def cold_place(path: Path | str) -> str:
    """Where cold entries live: the cold file's name, or the table."""
    return "cold_memories" if is_postgres(path) else "memory-cold.db"


def _pg_connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=10)


def schema_tables(url: str) -> list[str]:
    """Every table of memkeeper's schema on the server (not only those memkeeper lists)."""
    with _pg_connect(url) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename",
            (DEFAULT_SCHEMA,),
        ).fetchall()
    return [name for (name,) in rows]


def tables_containing(url: str, needle: str) -> list[str]:
    """The tables of memkeeper's schema with a row whose text holds ``needle`` (any case)."""
    from psycopg import sql

    found = []
    with _pg_connect(url) as conn:
        for table in schema_tables(url):
            (hits,) = conn.execute(
                sql.SQL("SELECT count(*) FROM {} AS r WHERE strpos(lower(r::text), %s) > 0").format(
                    sql.Identifier(DEFAULT_SCHEMA, table)
                ),
                (needle.lower(),),
            ).fetchone()
            if hits:
                found.append(table)
    return found


def places_holding(path: Path | str, needle: bytes) -> list[str]:
    """The files (SQLite, after a checkpoint) or tables (PostgreSQL) that hold ``needle``."""
    if is_postgres(path):
        return tables_containing(str(path), needle.decode())
    checkpoint_files(Path(path))
    return files_containing(Path(path), needle)


def dump_memory(path: Path | str) -> dict[str, list[str]]:
    """Everything stored, comparable before and after an operation that must write
    nothing: SQLite's dump of both files, or every row of every table of the schema."""
    if not is_postgres(path):
        return dump_databases(Path(path))
    from psycopg import sql

    dump: dict[str, list[str]] = {}
    with _pg_connect(str(path)) as conn:
        for table in schema_tables(str(path)):
            rows = conn.execute(
                sql.SQL("SELECT r::text FROM {} AS r ORDER BY 1").format(
                    sql.Identifier(DEFAULT_SCHEMA, table)
                )
            ).fetchall()
            dump[table] = [text for (text,) in rows]
    return dump


def vacuum_counts(url: str) -> dict[str, int]:
    """How many times each table of memkeeper's schema was vacuumed by hand (not autovacuum)."""
    with _pg_connect(url) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        rows = conn.execute(
            "SELECT relname, vacuum_count FROM pg_stat_user_tables WHERE schemaname = %s",
            (DEFAULT_SCHEMA,),
        ).fetchall()
    return {name: int(count) for name, count in rows}
