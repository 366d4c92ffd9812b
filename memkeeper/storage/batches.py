"""Lists of ids in SQL: chunks that stay under a driver's parameter limit, and batches.

Shared by both backends' storage functions (SQLite caps a statement's variables; PostgreSQL
takes more, and the same chunks keep statements short there too).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

SQL_CHUNK = 500  # ids per IN (...) list: well under SQLite's variable limit


def chunks(items: Sequence[Any], size: int = SQL_CHUNK) -> Iterator[Sequence[Any]]:
    """Split a sequence into slices of at most ``size`` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def batched(rows: Iterator[Any] | Sequence[Any], size: int) -> Iterator[list[Any]]:
    """Group an iterable into lists of at most ``size``."""
    batch: list[Any] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def placeholders(count: int) -> str:
    """``?, ?, ?`` for an IN list of ``count`` parameters."""
    return ", ".join("?" * count)


def delete_in(conn: Any, table: str, column: str, values: Sequence[Any]) -> int:
    """``DELETE FROM table WHERE column IN (values)``, in chunks; returns rows deleted.

    The caller holds the transaction. ``table`` and ``column`` are memkeeper's own names.
    """
    count = 0
    for part in chunks(list(values)):
        count += conn.execute(
            f"DELETE FROM {table} WHERE {column} IN ({placeholders(len(part))})", list(part)
        ).rowcount
    return count
