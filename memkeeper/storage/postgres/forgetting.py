"""Erasure on PostgreSQL: every row in one transaction, then VACUUM of the tables it touched.

The rows are the same as on SQLite (:func:`memkeeper.storage.forgetting.remove_rows`: hot
and cold entries, their change-log rows, uses, vectors, an owner's messages and episodes,
what the erasure reaches beyond them (derived entries, redacted texts), with the
content-free ``forget`` row and the tombstones), deleted in ONE transaction under
memkeeper's write lock: cold storage is a table of the same database, so there is no
in-between state to recover from and no ``pending_scrubs`` row.

SQLite's byte scrub (:mod:`memkeeper.storage.sqlite.scrub`) does not apply: the server owns the
files. What memkeeper can do is ask the server to reclaim the deleted row versions right
away: after the commit, ``VACUUM (INDEX_CLEANUP ON)`` of each table the erasure deleted from
(its TOAST table included). ``INDEX_CLEANUP ON`` because since PostgreSQL 14 a VACUUM may skip
the indexes when few rows died, and the indexes (keys, keyword trigrams) hold
what was erased too. VACUUM cannot run inside a transaction: it runs once the erasure
committed, on a connection of its own in autocommit (the store's connection and lock stay
free for this process's agents; VACUUM itself blocks no reader or writer). The erasure's
commit waits for its WAL flush whatever ``database.synchronous`` says: a crash must not
bring back what the user was told is gone.

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
from memkeeper.errors import MemkeeperError
from memkeeper.storage import transitions
from memkeeper.storage.postgres.pool import connect

if TYPE_CHECKING:
    from memkeeper.storage.base import Storage
    from memkeeper.storage.forgetting import Selection
    from memkeeper.storage.postgres.database import PostgresDatabase

log = logs.get_logger(__name__)

# The tables every erasure deletes from (besides an owner's messages and episodes).
ENTRY_TABLES = ("memories", "cold_memories", "changes", "uses", "vectors")
# How long each table's VACUUM waits for its lock before it is left to autovacuum.
LOCK_TIMEOUT = "10s"


def erase(
    storage: Storage, selection: Selection, *, actor: str, now: datetime, reason: str
) -> dict[str, int]:
    """Erase ``selection`` in one transaction, then vacuum what it deleted from; counts."""
    from memkeeper.storage.forgetting import remove_rows  # it dispatches here

    hot: PostgresDatabase = storage.hot  # type: ignore[assignment]
    with storage.lock:
        with hot.write_transaction():
            # Acknowledged means on disk, whatever database.synchronous says: a crash must
            # not bring back what the user was told is gone.
            hot.raw.execute("SET LOCAL synchronous_commit = on")
            removed = remove_rows(storage, selection, actor=actor, now=now, reason=reason)
            transitions.step_hook("forget-hot-written")
        transitions.step_hook("forget-hot-committed")
        in_transaction = hot.conn.in_transaction
    if removed.anything:
        owner_tables = [
            table
            for table in ("messages", "episodes")
            if removed.counts.get(table) or removed.counts.get(f"{table}_redacted")
        ]
        vacuum(storage, [*ENTRY_TABLES, *owner_tables], in_transaction=in_transaction)
    return removed.counts


def vacuum(storage: Storage, tables: list[str], *, in_transaction: bool = False) -> list[str]:
    """``VACUUM (INDEX_CLEANUP ON)`` of each of ``tables`` of the store's schema, on a
    connection of its own in autocommit: the store's connection and lock stay free for this
    process's agents meanwhile (about a second at a million entries: the indexes' scan).

    Each table waits at most :data:`LOCK_TIMEOUT` for its lock (an autovacuum gives way at
    once; a long index build would not): a table left is a warning, the others are still
    vacuumed. Nothing runs when the erasure ran inside a caller's transaction
    (``in_transaction``): its deletes are not committed yet. Returns the tables vacuumed.
    """
    if in_transaction:
        log.warning(
            "erased rows not vacuumed: the erasure ran inside a caller's transaction; "
            "autovacuum will reclaim them",
            tables=tables,
        )
        return []
    schema = storage.hot.schema  # type: ignore[attr-defined]
    timeout = storage.connect_timeout  # type: ignore[attr-defined]
    done: list[str] = []
    try:
        with connect(storage.url, connect_timeout=timeout, autocommit=True) as conn:  # type: ignore[attr-defined]
            conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT)))
            for table in tables:
                try:
                    conn.execute(
                        sql.SQL("VACUUM (INDEX_CLEANUP ON) {}").format(
                            sql.Identifier(schema, table)
                        )
                    )
                    done.append(table)
                except psycopg.errors.LockNotAvailable:
                    continue
    except (psycopg.Error, MemkeeperError) as exc:
        log.warning(
            "erased rows not vacuumed yet; autovacuum will reclaim them",
            tables=[t for t in tables if t not in done],
            error=type(exc).__name__,
        )
        return done
    if len(done) < len(tables):
        log.warning(
            f"erased rows not vacuumed yet: a table stayed locked past {LOCK_TIMEOUT}; "
            "autovacuum will reclaim them",
            tables=[t for t in tables if t not in done],
        )
    transitions.step_hook("forget-vacuumed")
    return done
