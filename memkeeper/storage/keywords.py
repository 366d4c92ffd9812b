"""The keyword index: SQLite FTS5 over each memory's key and value, trigram-tokenized.

Each memory table has an external-content FTS5 table beside it (``memories_fts`` in the hot
file, ``cold_memories_fts`` in cold storage): it keeps the index, not a copy of the text, and
reads the text back from the memory table by rowid. Triggers keep it in step in the same
transaction as the row, whatever code writes the row: AFTER INSERT indexes the new row,
AFTER DELETE and AFTER UPDATE OF key, value remove the old text. A row that ``INSERT OR
REPLACE`` replaces (moves re-run after a crash) fires the delete trigger only with
``recursive_triggers`` on, which sqlite-utils' ``Database`` sets on every connection
memkeeper opens; a connection without it would leave a stale index entry.

The ``trigram`` tokenizer (SQLite 3.34+) indexes every run of three characters, so text
without spaces (Chinese) matches any substring of three characters or more, case-insensitively.
The index finds *candidates* (:func:`candidate_rows`) for a large user; the ranking is BM25
over the user's own rows (:mod:`memkeeper.store.bm25`, with :func:`user_rows_stats`), never
FTS5's ``bm25``, whose statistics are of every user's rows in the file.

Deleting from FTS5 (before SQLite 3.42's ``secure-delete`` option) only appends a delete
marker: the erased row's trigrams stay in the older segments of the shadow table
``*_data`` until a merge reaches them. :func:`purge_deleted` rewrites the index without
them; erasure calls it before its scrub. It uses ``optimize`` (every segment merged into one)
only on SQLite versions where that is safe beside other connections: on SQLite 3.40.1 an
``optimize`` or ``merge`` while other connections write through the triggers corrupts the
index ("database disk image is malformed", then "vtable constructor failed" for every
connection, so no memory can be written any more), which SQLite 3.51.1 does not do (both
checked with three threads writing, searching and purging). Elsewhere it uses ``rebuild``,
which re-indexes every row from the memory table: about 2.5 times as long (1.3 s against
0.5 s at 100,000 memories), and safe on both.

PostgreSQL has no FTS5: its candidates come from pg_trgm over a generated column
(:mod:`memkeeper.storage.postgres.keywords`), chosen here by the handle's ``dialect``; the
same rows qualify on both backends, so the same scorer gives the same hits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from memkeeper.storage.postgres.keywords import (
    is_postgres,
    like_operator,
    ordered_rows,
    trigram_rows,
)
from memkeeper.storage.sqlite.connection import Database
from memkeeper.storage.transaction import immediate_transaction

TABLES = ("memories", "cold_memories")

SHORT_SCAN_ROWS = 5000
"""At most this many of the user's rows are read by the substring scan."""

SCAN_BELOW_ROWS = 2000
"""Below this many rows in the namespaces searched, the user's rows are scanned (substring
matches) instead of asking the FTS5 index, whose cost follows how common the words are
across every user, not how many entries this user has."""


MIN_TRIGRAM_CHARS = 3

MAX_CANDIDATES = 5000
"""Most keyword candidates one search scores."""


def fts_table(table: str) -> str:
    """The FTS5 table indexing ``table``."""
    if table not in TABLES:
        raise ValueError(f"no keyword index for table {table!r}")
    return f"{table}_fts"


def create_index(db: Database, table: str) -> None:
    """Create the FTS5 table and its triggers for ``table``, and index its existing rows."""
    fts = fts_table(table)
    # user_id is indexed too: a query ANDs the user's id with its words, so FTS5 intersects
    # that user's rows with the words' rows instead of ranking every user's matches.
    delete_old = (
        f"INSERT INTO {fts} ({fts}, rowid, key, value, user_id)"
        " VALUES ('delete', old.rowid, old.key, old.value, old.user_id);"
    )
    insert_new = (
        f"INSERT INTO {fts} (rowid, key, value, user_id)"
        " VALUES (new.rowid, new.key, new.value, new.user_id);"
    )
    db.executescript(
        f"""
        CREATE VIRTUAL TABLE {fts} USING fts5(
            key, value, user_id, content='{table}', content_rowid='rowid', tokenize='trigram'
        );
        CREATE TRIGGER {table}_fts_insert AFTER INSERT ON {table} BEGIN
            {insert_new}
        END;
        CREATE TRIGGER {table}_fts_delete AFTER DELETE ON {table} BEGIN
            {delete_old}
        END;
        CREATE TRIGGER {table}_fts_update AFTER UPDATE OF key, value, user_id ON {table} BEGIN
            {delete_old}
            {insert_new}
        END;
        INSERT INTO {fts} ({fts}) VALUES ('rebuild');
        """
    )


SAFE_OPTIMIZE_FROM = (3, 51, 1)
"""The oldest SQLite on which ``optimize`` beside other writing connections was checked
safe; older versions rebuild instead (see the module's docstring)."""


def purge_command(version: tuple[int, int, int] = sqlite3.sqlite_version_info) -> str:
    """The FTS5 command that rewrites the index without deleted rows on this SQLite."""
    return "optimize" if version >= SAFE_OPTIMIZE_FROM else "rebuild"


def purge_deleted(db: Database, table: str) -> None:
    """Rewrite the index without any deleted row's trigrams.

    Call inside a write transaction. Costs a rewrite of the whole index of that file. On
    PostgreSQL nothing to do: the keyword data are generated columns of the row itself, gone
    with it (their dead tuples are VACUUM's, as the row's are).
    """
    fts = fts_table(table)
    if is_postgres(db):
        return
    db.conn.execute(f"INSERT INTO {fts} ({fts}) VALUES ('{purge_command()}')")


def compact(db: Database, table: str) -> None:
    """Rewrite the index without the rows deleted since (FTS5 ``optimize``), in its own
    write transaction on that file, so their pages come free.

    Used by retention after a cold purge. It holds the cold file's write lock for as long as
    the rewrite takes; agents touch the cold file only to bring an entry back. Nothing to
    rewrite on PostgreSQL (see :func:`purge_deleted`).
    """
    if is_postgres(db):
        return
    with immediate_transaction(db):
        purge_deleted(db, table)


def _phrase(token: str) -> str:
    """One FTS5 string (a phrase): any text, double quotes doubled, is never a syntax error."""
    return '"' + token.replace('"', '""') + '"'


def _like_pattern(token: str) -> str:
    escaped = token.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _filters(
    user_id: str, namespaces: Sequence[str], kinds: Sequence[str] | None, states: Sequence[str]
) -> tuple[str, list[object]]:
    sql = (
        f"m.user_id = ? AND m.namespace IN ({', '.join('?' * len(namespaces))})"
        f" AND m.state IN ({', '.join('?' * len(states))})"
    )
    params: list[object] = [user_id, *namespaces, *states]
    if kinds is not None:
        sql += f" AND m.kind IN ({', '.join('?' * len(kinds))})"
        params.extend(kinds)
    return sql, params


Row = tuple[str, str | None, str]
"""(id, key, value) of a candidate."""


def _selection(
    table: str,
    user_id: str,
    namespaces: Sequence[str],
    kinds: Sequence[str] | None,
    states: Sequence[str],
) -> tuple[str, list[object]] | None:
    """The WHERE clause and parameters of the user's rows these filters select, or None when
    they select nothing (no namespace, no state, an empty list of kinds). Checks ``table``."""
    fts_table(table)
    if not namespaces or not states or (kinds is not None and not kinds):
        return None
    return _filters(user_id, namespaces, kinds, states)


def small_user_rows(
    db: Database,
    *,
    table: str,
    user_id: str,
    namespaces: Sequence[str],
    kinds: Sequence[str] | None,
    states: Sequence[str],
    columns: Sequence[str],
) -> list[tuple[object, ...]] | None:
    """Every row of the user these filters select (``columns`` of each, through the owner
    index), or None when there are :data:`SCAN_BELOW_ROWS` or more: a small user's whole
    set, read once for both the statistics and the candidates."""
    selection = _selection(table, user_id, namespaces, kinds, states)
    if selection is None:
        return []
    where, params = selection
    names = ", ".join(f"m.{c}" for c in columns)
    select = f"SELECT {names} FROM {table} AS m WHERE {where} LIMIT ?"
    if is_postgres(db):  # in rowid order, as SQLite reads them (the postings' cache key)
        rows = ordered_rows(db, table, where, [*params, SCAN_BELOW_ROWS], columns)
    else:
        rows = db.conn.execute(select, [*params, SCAN_BELOW_ROWS]).fetchall()
    return None if len(rows) >= SCAN_BELOW_ROWS else rows


def user_rows_stats(
    db: Database,
    *,
    table: str,
    user_id: str,
    namespaces: Sequence[str],
    kinds: Sequence[str] | None,
    states: Sequence[str],
) -> tuple[int, float]:
    """How many of the user's rows these filters select, and their mean length in
    characters (key + value; over the first :data:`SHORT_SCAN_ROWS` of them) — the ``N``
    and ``avgdl`` of BM25, of this user's rows only."""
    selection = _selection(table, user_id, namespaces, kinds, states)
    if selection is None:
        return 0, 0.0
    where, params = selection
    count, mean = db.conn.execute(
        "SELECT count(*), avg(length(coalesce(key, '')) + length(value)) FROM"
        f" (SELECT m.key, m.value FROM {table} AS m WHERE {where} LIMIT ?)",
        [*params, SHORT_SCAN_ROWS],
    ).fetchone()
    if count >= SHORT_SCAN_ROWS:
        count = db.conn.execute(
            f"SELECT count(*) FROM {table} AS m WHERE {where}", params
        ).fetchone()[0]
    return int(count), float(mean or 0.0)


def candidate_rows(
    db: Database,
    *,
    table: str,
    user_id: str,
    namespaces: Sequence[str],
    kinds: Sequence[str] | None,
    states: Sequence[str],
    patterns: Sequence[str],
    user_rows: int,
    cap: int = MAX_CANDIDATES,
) -> list[Row]:
    """The user's rows whose key or value contains one of ``patterns`` (case-insensitive
    for ASCII), at most ``cap``: the keyword candidates, scored by the caller.

    A user with fewer than :data:`SCAN_BELOW_ROWS` rows (``user_rows``) in the filters — the
    usual case — is read through the owner index and matched with ``LIKE``. A larger user
    asks the FTS5 trigram index for the patterns of three characters or more (ANDed with
    the user's id), and ``LIKE`` over at most :data:`SHORT_SCAN_ROWS` of its rows for the
    shorter ones (trigrams cannot match fewer). Either way the same rows qualify (up to the
    caps), so the same scorer ranks them whatever the user's size.
    """
    fts = fts_table(table)
    patterns = list(dict.fromkeys(p for p in patterns if p))
    selection = _selection(table, user_id, namespaces, kinds, states)
    if not patterns or cap <= 0 or selection is None:
        return []
    where, params = selection
    if user_rows < SCAN_BELOW_ROWS:
        return _like_rows(db, table, where, params, patterns, cap, SCAN_BELOW_ROWS)
    long = [p for p in patterns if len(p) >= MIN_TRIGRAM_CHARS]
    short = [p for p in patterns if len(p) < MIN_TRIGRAM_CHARS]
    found: dict[str, Row] = {}
    if long and is_postgres(db):  # pg_trgm, not FTS5: storage/postgres/keywords.py
        likes = [_like_pattern(p) for p in long]
        found = {row[0]: row for row in trigram_rows(db, table, where, params, likes, cap)}
    elif long:
        match = "{key value} : (" + " OR ".join(_phrase(t) for t in long) + ")"
        if len(user_id) >= MIN_TRIGRAM_CHARS:
            # Only rows whose user id contains this one (the join below keeps the exact user).
            match = f"user_id : {_phrase(user_id)} AND ({match})"
        for row in db.conn.execute(
            f"SELECT m.id, m.key, m.value FROM {fts} JOIN {table} AS m"
            f" ON m.rowid = {fts}.rowid WHERE {fts} MATCH ? AND {where} LIMIT ?",
            [match, *params, cap],
        ):
            found[row[0]] = row
    if short and len(found) < cap:
        for row in _like_rows(db, table, where, params, short, cap, SHORT_SCAN_ROWS):
            found.setdefault(row[0], row)
    return list(found.values())[:cap]


def _like_rows(
    db: Database,
    table: str,
    where: str,
    params: list[object],
    patterns: Sequence[str],
    cap: int,
    scan: int,
) -> list[Row]:
    """Rows among the first ``scan`` of the filters' whose key or value contains a pattern
    (case-insensitively: ``ILIKE`` on PostgreSQL, whose ``LIKE`` is case-sensitive)."""
    like = like_operator(db)
    any_hit = " OR ".join(
        f"coalesce(key, '') {like} ? ESCAPE '\\' OR value {like} ? ESCAPE '\\'" for _ in patterns
    )
    likes = [p for t in patterns for p in (_like_pattern(t),) * 2]
    return [
        tuple(row)  # type: ignore[misc]
        for row in db.conn.execute(
            f"SELECT id, key, value FROM (SELECT m.id, m.key, m.value FROM {table} AS m"
            f" WHERE {where} LIMIT ?) WHERE {any_hit} LIMIT ?",
            [*params, scan, *likes, cap],
        )
    ]
