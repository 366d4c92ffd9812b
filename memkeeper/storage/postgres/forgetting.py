"""Erasure on PostgreSQL: every row in one transaction, then VACUUM of the tables it touched.

The rows are the same as on SQLite (:func:`memkeeper.storage.forgetting.remove_rows`: hot
and cold entries, their change-log rows, uses, vectors, an owner's messages and episodes,
with the content-free ``forget`` row and the tombstones), deleted in ONE transaction under
memkeeper's write lock: cold storage is a table of the same database, so there is no
in-between state to recover from and no ``pending_scrubs`` row.

SQLite's byte scrub (:mod:`memkeeper.storage.scrub`) does not apply: the server owns the
files. What memkeeper can do is ask the server to reclaim the deleted row versions right
away: after the commit, ``VACUUM (INDEX_CLEANUP ON)`` of each table the erasure deleted from
(its TOAST table included). ``INDEX_CLEANUP ON`` because since PostgreSQL 14 a VACUUM may skip
the indexes when few rows died, and the indexes (key, keyword trigrams and words) hold
what was erased too. VACUUM cannot run inside a transaction: it runs on the store's
connection, which is in autocommit, once the erasure committed.

What VACUUM cannot promise (the README's "Erasure on PostgreSQL" says what an operator does):
a row version still visible to another open transaction is kept until that transaction
ends (the next VACUUM or autovacuum removes it); freed space in a page is reused, not
zeroed; the write-ahead log, its archives, base backups and replicas keep what they hold.
A VACUUM that fails (a lock it waited on, the connection lost) does not undo the erasure,
which is committed: it is logged as a warning, and autovacuum reclaims the rows later.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from memkeeper import logs
from memkeeper.storage import transitions

if TYPE_CHECKING:
    from memkeeper.storage.files import Storage
    from memkeeper.storage.forgetting import Selection
    from memkeeper.storage.postgres.database import PostgresDatabase

log = logs.get_logger(__name__)

# The tables every erasure deletes from (besides an owner's messages and episodes).
ENTRY_TABLES = ("memories", "cold_memories", "changes", "uses", "vectors")


def erase(
    storage: Storage, selection: Selection, *, actor: str, now: datetime, reason: str
) -> dict[str, int]:
    """Erase ``selection`` in one transaction, then vacuum what it deleted from; counts."""
    from memkeeper.storage.forgetting import remove_rows  # it dispatches here

    hot: PostgresDatabase = storage.hot  # type: ignore[assignment]
    with storage.lock:
        with hot.write_transaction():
            removed = remove_rows(storage, selection, actor=actor, now=now, reason=reason)
            transitions.step_hook("forget-hot-written")
        transitions.step_hook("forget-hot-committed")
        if removed.anything:
            owner_tables = [t for t in ("messages", "episodes") if removed.counts.get(t)]
            vacuum(hot, [*ENTRY_TABLES, *owner_tables])
    return removed.counts


def vacuum(db: PostgresDatabase, tables: list[str]) -> bool:
    """``VACUUM (INDEX_CLEANUP ON)`` of ``tables`` of the store's schema, outside any
    transaction. True if it ran; a failure is a warning (see the module docstring)."""
    if db.conn.in_transaction:
        log.warning(
            "erased rows not vacuumed: the erasure ran inside a caller's transaction; "
            "autovacuum will reclaim them",
            tables=tables,
        )
        return False
    statement = sql.SQL("VACUUM (INDEX_CLEANUP ON) {}").format(
        sql.SQL(", ").join(sql.Identifier(db.schema, t) for t in tables)
    )
    try:
        db.raw.execute(statement)
    except psycopg.Error as exc:
        log.warning(
            "erased rows not vacuumed yet; autovacuum will reclaim them",
            tables=tables,
            error=type(exc).__name__,
        )
        return False
    transitions.step_hook("forget-vacuumed")
    return True
