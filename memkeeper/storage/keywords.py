"""The keyword candidates of a search, on both backends: the rows that contain a query's words.

The index finds *candidates* (:func:`candidate_rows`) for a large user; the ranking is BM25
over the user's own rows (:mod:`memkeeper.store.bm25`, with :func:`user_rows_stats`), the
same code on both backends. A small user's rows are scanned with ``LIKE`` (the same SQL on
both). A large user's long patterns go to the backend's trigram index, chosen here by the
handle's ``dialect``: SQLite's FTS5 tables and their triggers
(:mod:`memkeeper.storage.sqlite.fts`), or pg_trgm over a generated column on PostgreSQL
(:mod:`memkeeper.storage.postgres.keywords`). The same rows qualify on both backends, so the
same scorer gives the same hits.

Erasure purges the FTS5 index of deleted rows' trigrams (:func:`purge_deleted`); on
PostgreSQL the keyword data are the row's own generated column, gone with it.
"""

from __future__ import annotations

from collections.abc import Sequence

from memkeeper.storage.handle import Handle
from memkeeper.storage.postgres.keywords import (
    is_postgres,
    like_operator,
    ordered_rows,
    trigram_rows,
)
from memkeeper.storage.sqlite import fts
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


def _check_table(table: str) -> None:
    if table not in TABLES:
        raise ValueError(f"no keyword index for table {table!r}")


def purge_deleted(db: Handle, table: str) -> None:
    """Rewrite the index without any deleted row's trigrams.

    Call inside a write transaction. Costs a rewrite of the whole index of that file. On
    PostgreSQL nothing to do: the keyword data are generated columns of the row itself, gone
    with it (their dead tuples are VACUUM's, as the row's are).
    """
    _check_table(table)
    if is_postgres(db):
        return
    fts.purge_deleted(db, table)


def compact(db: Handle, table: str) -> None:
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
    _check_table(table)
    if not namespaces or not states or (kinds is not None and not kinds):
        return None
    return _filters(user_id, namespaces, kinds, states)


def small_user_rows(
    db: Handle,
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
    db: Handle,
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
    db: Handle,
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
    _check_table(table)
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
    elif long:  # FTS5: storage/sqlite/fts.py
        found = {
            row[0]: row for row in fts.trigram_rows(db, table, where, params, long, user_id, cap)
        }
    if short and len(found) < cap:
        for row in _like_rows(db, table, where, params, short, cap, SHORT_SCAN_ROWS):
            found.setdefault(row[0], row)
    return list(found.values())[:cap]


def _like_rows(
    db: Handle,
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
