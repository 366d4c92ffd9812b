"""Moving a SQLite memory into an empty memkeeper schema on PostgreSQL (``memkeeper migrate-to``).

:func:`copy_memory` copies every row of both SQLite files — hot and cold memories, messages,
episodes, the change log, tombstones, uses, job runs and (optionally) vectors — into the
PostgreSQL schema in ONE transaction, so the target holds either all of it or nothing:

- the source is read under its hot write lock (``BEGIN IMMEDIATE``): no agent or job changes
  either file while it is copied (every write to the cold file holds that lock too), and a
  move a crash interrupted is settled first (:func:`~memkeeper.storage.transitions.reconcile`),
  so no entry is copied both hot and cold;
- the target is written under memkeeper's write lock (``write_transaction``) and must be
  empty: a schema holding any row is refused (:class:`~memkeeper.errors.TargetNotEmpty`)
  before anything is written;
- ids are kept as they are: text ids of memories, and the integer ids of messages, episodes,
  changes and tombstones (and the rowids of memories and vectors, which order them as on
  SQLite); the identity sequences then continue past the highest id copied;
- rows go in through ``COPY`` (one round trip per table, not per row);
- the counts of every table are compared, source against target, inside the transaction,
  and ``verify`` (the CLI compares a sample of ``explain`` texts) runs there too: a mismatch
  rolls everything back.

Opening the target creates memkeeper's schema (and the extensions it needs) before the copy
begins, in a transaction of its own. When the copy does not commit (a refused source, a
mismatch, a failed check, any error), :func:`copy_memory` itself drops again what the target
did not hold when it was opened (the schema, its tables, the extensions:
:mod:`memkeeper.storage.postgres.as_found`), so a failed copy, called from the library or by
``migrate-to``, leaves the target as it found it; the target store is then of no further use
and is closed by its caller.

What is not copied is SQLite's own bookkeeping: ``pending_scrubs`` (byte-level erasure of
the file's free pages) and ``moves_in_flight`` (the two-file move protocol, settled first).
Vectors carry their entry's owner on PostgreSQL (``user_id``, ``namespace``), filled from
the entry; the pgvector column ``embedding`` is left empty (the float32 bytes are what the
ranking reads on both backends).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from psycopg import sql

from memkeeper.errors import MigrationMismatch, TargetNotEmpty
from memkeeper.logs import get_logger
from memkeeper.storage.base import Storage
from memkeeper.storage.postgres.as_found import drop_created
from memkeeper.storage.postgres.database import PostgresDatabase
from memkeeper.storage.postgres.pool import connect
from memkeeper.storage.transaction import immediate_transaction
from memkeeper.storage.transitions import reconcile

log = get_logger(__name__)

HOT_TABLES = (
    "memories",
    "messages",
    "episodes",
    "changes",
    "job_runs",
    "uses",
    "tombstones",
    "erasure_secret",
    "erased_values",
)
COLD_TABLE = "cold_memories"
VECTORS = "vectors"
TABLES = (*HOT_TABLES[:1], COLD_TABLE, *HOT_TABLES[1:], VECTORS)
"""Every table copied, in the order copied and reported."""

_SQLITE_OWN = (
    "_sqlite_migrations",
    "sqlite_sequence",
    "pending_scrubs",
    "pending_index_purges",
    "moves_in_flight",
)
"""SQLite's bookkeeping, not copied (with the FTS5 index tables, ``<table>_fts*``)."""
_ORDER = {"uses": "memory_id, day"}
_WITH_ROWID = frozenset({"memories", COLD_TABLE, VECTORS})
# A vector's owner: columns of the entry on SQLite, of the vector on PostgreSQL.
_VECTOR_OWNER = ("user_id", "namespace")
_OWNER_OF_VECTOR = ("m.user_id AS user_id", "m.namespace AS namespace")


def copy_memory(
    source: Storage,
    target: Any,
    *,
    vectors: bool = True,
    verify: Callable[[], None] | None = None,
) -> dict[str, tuple[int, int]]:
    """Copy the SQLite memory ``source`` into the empty PostgreSQL storage ``target``.

    Returns ``{table: (rows in SQLite, rows on PostgreSQL)}`` (equal, or it raised). Raises
    :class:`TargetNotEmpty` when any memkeeper table of the target holds a row, and
    :class:`MigrationMismatch` when the counts differ; ``verify`` runs before the commit and
    may raise to roll everything back. Without ``vectors`` the vectors table stays empty
    (the index job embeds the entries again). Whatever fails, what opening ``target``
    created there (memkeeper's schema, the extensions) is dropped again before it raises.
    """
    if source.one_database or not target.one_database:
        raise TypeError("copy_memory copies a SQLite storage into a PostgreSQL one")
    try:
        return _copy(source, target, vectors=vectors, verify=verify)
    except BaseException:
        _leave_as_found(target)
        raise


def _copy(
    source: Storage, target: Any, *, vectors: bool, verify: Callable[[], None] | None
) -> dict[str, tuple[int, int]]:
    pg: PostgresDatabase = target.hot
    tables = TABLES if vectors else tuple(t for t in TABLES if t != VECTORS)
    with source.lock, immediate_transaction(source.hot), target.lock, pg.write_transaction():
        settled = reconcile(source)
        if settled:
            log.info("settled interrupted moves before copying", entries=settled)
        _require_empty(pg, target)
        cold = source.cold(create=False)
        _require_known_tables([source.hot, cold])
        counts: dict[str, tuple[int, int]] = {}
        for table in tables:
            db = cold if table == COLD_TABLE else source.hot
            expected = 0 if db is None else _count(db, table)
            if db is not None and expected:
                _copy_table(db, pg, table)
            counts[table] = (expected, _count(pg, table))
        wrong = {table: pair for table, pair in counts.items() if pair[0] != pair[1]}
        if wrong:
            raise MigrationMismatch(
                "the copy's row counts differ from the source's, nothing was kept: "
                + ", ".join(f"{t} {a} in SQLite, {b} on PostgreSQL" for t, (a, b) in wrong.items())
            )
        _continue_identities(pg)
        if verify is not None:
            verify()
    log.info("memory copied to postgresql", target=str(target.hot_path), tables=len(counts))
    return counts


def sample_ids(source: Storage, size: int) -> list[str]:
    """Up to ``size`` memory ids spread over the source: hot entries, cold entries, and ids
    only the change log still names (erased ones), for comparing explanations."""
    found: list[str] = []
    if size <= 0:
        return found
    share = max(1, size // 3)
    with source.lock:
        found += _spread(source.hot, "SELECT id FROM memories ORDER BY rowid", share)
        cold = source.cold(create=False)
        if cold is not None:
            found += _spread(cold, "SELECT id FROM cold_memories ORDER BY rowid", share)
        logged = "SELECT DISTINCT memory_id AS id FROM changes WHERE memory_id IS NOT NULL"
        found += [i for i in _spread(source.hot, logged, size) if i not in found]
    return found[:size]


def _spread(db: Any, statement: str, size: int) -> list[str]:
    """Up to ``size`` ids of ``statement``'s, evenly spaced (read as a stream, never all
    held: a memory of a million entries)."""
    total = db.execute(f"SELECT count(*) FROM ({statement})").fetchone()[0]
    step = max(1, total // max(size, 1))
    picked: list[str] = []
    for n, row in enumerate(db.conn.execute(statement)):
        if n % step == 0:
            picked.append(row[0])
            if len(picked) >= size:
                break
    return picked


def _count(db: Any, table: str) -> int:
    return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def _require_empty(pg: PostgresDatabase, target: Any) -> None:
    """Refuse a target with any row in a memkeeper table (nothing written yet)."""
    filled = [table for table in TABLES if _count(pg, table)]
    if filled:
        raise TargetNotEmpty(
            f"{target.hot_path} (schema {pg.schema!r}) is not empty (rows in "
            f"{', '.join(filled)}); migrate-to copies into an empty memkeeper schema only. "
            "Nothing was written; name another database or schema"
        )


def _require_known_tables(handles: Sequence[Any]) -> None:
    """Refuse a source with a table this copy does not know (a newer memkeeper's): it would
    be left behind."""
    for db in handles:
        if db is None:
            continue
        names = [
            row[0] for row in db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        unknown = [
            name
            for name in names
            if name not in TABLES and name not in _SQLITE_OWN and "_fts" not in name
        ]
        if unknown:
            raise MigrationMismatch(
                f"the SQLite memory has tables this memkeeper does not copy "
                f"({', '.join(sorted(unknown))}); nothing was kept. Upgrade memkeeper and run "
                "it again"
            )


def _target_columns(pg: PostgresDatabase, table: str) -> list[str]:
    """The target table's columns a copy fills: every column PostgreSQL does not generate."""
    rows = pg.raw.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s"
        " AND table_name = %s AND is_generated = 'NEVER' ORDER BY ordinal_position",
        (pg.schema, table),
    ).fetchall()
    return [row[0] for row in rows if row[0] != "embedding"]


def _source_select(db: Any, table: str, columns: Sequence[str]) -> tuple[list[str], str]:
    """(the columns read, the SELECT reading them) of one source table, in the source's order.

    The target's columns the source lacks stay out (their defaults apply); the rowid of a
    table that has one on both is carried; vectors take their entry's owner from it.
    """
    present = {d[0] for d in db.execute(f"SELECT * FROM {table} LIMIT 0").description}
    lost = sorted(present - set(columns))
    if lost:  # a column this version's PostgreSQL schema has no place for: refuse, not drop
        raise MigrationMismatch(
            f"the SQLite table {table} has columns the PostgreSQL schema lacks "
            f"({', '.join(lost)}); nothing was kept. Upgrade memkeeper and run it again"
        )
    if table == VECTORS:
        plain = [c for c in columns if c not in (*_VECTOR_OWNER, "rowid")]
        select = ", ".join(["v.rowid AS rowid", *(f"v.{c}" for c in plain), *_OWNER_OF_VECTOR])
        statement = (
            f"SELECT {select} FROM vectors AS v LEFT JOIN memories AS m ON m.id = v.memory_id"
            " ORDER BY v.rowid"
        )
        return ["rowid", *plain, *_VECTOR_OWNER], statement
    names = [c for c in columns if c in present or (c == "rowid" and table in _WITH_ROWID)]
    select = ", ".join("rowid AS rowid" if c == "rowid" else c for c in names)
    return names, f"SELECT {select} FROM {table} ORDER BY {_ORDER.get(table, 'rowid')}"


def _copy_table(db: Any, pg: PostgresDatabase, table: str) -> None:
    """Every row of ``table`` from the SQLite handle ``db`` into the target, through COPY."""
    names, statement = _source_select(db, table, _target_columns(pg, table))
    copy_sql = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(pg.schema, table), sql.SQL(", ").join(map(sql.Identifier, names))
    )
    with pg.raw.cursor() as cursor, cursor.copy(copy_sql) as copy:
        for row in db.conn.execute(statement):
            copy.write_row(tuple(_value(value) for value in row))


def _value(value: Any) -> Any:
    # SQLite may hand back a memoryview for a blob in some builds; COPY wants bytes.
    return bytes(value) if isinstance(value, memoryview) else value


def _continue_identities(pg: PostgresDatabase) -> None:
    """Every identity sequence of the schema continues past the highest value copied."""
    identities = pg.raw.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = %s AND is_identity = 'YES'",
        (pg.schema,),
    ).fetchall()
    for table, column in identities:
        name = sql.Identifier(pg.schema, table)
        pg.raw.execute(
            sql.SQL(
                "SELECT setval(pg_get_serial_sequence(%s, %s), COALESCE(max({c}), 1),"
                " max({c}) IS NOT NULL) FROM {t}"
            ).format(c=sql.Identifier(column), t=name),
            (name.as_string(pg.raw), column),
        )


def _leave_as_found(target: Any) -> None:
    """Drop what opening ``target`` created, on a connection of its own (the copy's rolled
    back). A drop that fails is logged: the copy's own error is what the caller hears."""
    found = getattr(target, "found_on_opening", None)
    if found is None:
        return
    try:
        with connect(target.url, connect_timeout=target.connect_timeout, autocommit=True) as conn:
            dropped = drop_created(conn, target.schema, found)
        if dropped:
            log.info("the failed copy's schema was dropped", schema=target.schema, dropped=dropped)
    except Exception as exc:
        log.warning(
            "could not drop what the failed copy created", schema=target.schema, cause=str(exc)
        )
