"""Loading many rows into a memkeeper table on PostgreSQL at once (the bench's database).

``COPY ... FROM STDIN`` with the table's secondary indexes dropped for the load and rebuilt
after (one sort each instead of a million index inserts, as the SQLite generator does), in
one transaction, then ``VACUUM (ANALYZE)``: the planner knows the new sizes, and the rows
are left as in a memory that has been live for a while, their hint bits and visibility map
set. Without the vacuum the first pass set the hint bits of every page it read (each a page
write) and the server's autovacuum of the million new rows could start in the middle of it,
so the bench's pass depended on when that started.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from psycopg import sql

from memkeeper.storage.postgres.storage import PostgresStorage


def bulk_load(
    storage: PostgresStorage, table: str, fields: Sequence[str], rows: Iterable[Sequence[Any]]
) -> int:
    """Insert ``rows`` (tuples in ``fields`` order) into ``table``; returns how many."""
    schema = storage.schema
    count = 0
    with storage.lock:  # the thread's connection, for the load and the VACUUM after it
        raw = storage.hot.raw  # type: ignore[attr-defined]
        count = _copy(raw, schema, table, fields, rows)
        raw.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(schema, table)))
    return count


def _copy(raw: Any, schema: str, table: str, fields: Sequence[str], rows: Iterable[Any]) -> int:
    """The COPY in one transaction, the table's secondary indexes dropped and rebuilt."""
    count = 0
    with raw.transaction():
        indexes = raw.execute(
            "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.schemaname = %s"
            " AND i.tablename = %s AND NOT EXISTS (SELECT 1 FROM pg_constraint c"
            " WHERE c.conname = i.indexname)",
            (schema, table),
        ).fetchall()
        for name, _definition in indexes:
            raw.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(schema, name)))
        statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
            sql.Identifier(schema, table), sql.SQL(", ").join(map(sql.Identifier, fields))
        )
        with raw.cursor().copy(statement) as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
        for _name, definition in indexes:
            raw.execute(definition)
    return count
