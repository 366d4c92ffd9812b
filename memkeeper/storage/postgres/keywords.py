"""Keyword candidates on PostgreSQL: pg_trgm over the generated ``search_text``.

SQLite finds a large user's candidates through FTS5's trigram index
(:mod:`memkeeper.storage.sqlite.fts`): rows whose key or value contains a query pattern of
three characters or more, as a substring, case-insensitively. PostgreSQL has no FTS5; its
counterpart is pg_trgm: ``search_text ILIKE '%pattern%'`` over the GIN trigram index of
``search_text`` (``COALESCE(key, '') || ' ' || value``, a generated column, so it is in step
with the row in the same transaction by construction, with no trigger and no index to
purge). Like FTS5's trigrams it matches substrings of any script (CJK included), so the
same rows qualify on both backends and the same Python scorer (:mod:`memkeeper.store.bm25`)
ranks them: the same query gives the same hits.

There is no ``tsvector`` of whole words: the scorer needs substring candidates ("pd" of
"pdf", a stem's prefix, one CJK character inside a run), which only trigrams give exactly.

Matching is case-insensitive through ``ILIKE`` (PostgreSQL's ``LIKE`` is case-sensitive,
SQLite's folds ASCII): for letters outside ASCII PostgreSQL may find a candidate SQLite's
``LIKE`` does not; the scorer, which folds case itself, decides either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any

MIN_TRIGRAM_CHARS = 3

_WITHOUT_ROWID = itemgetter(slice(1, None))


def is_postgres(db: Any) -> bool:
    """Whether ``db`` is a PostgreSQL handle (a plain sqlite-utils one has no dialect)."""
    return getattr(db, "dialect", "sqlite") == "postgres"


def like_operator(db: Any) -> str:
    """The case-insensitive substring operator of ``db``'s backend."""
    return "ILIKE" if is_postgres(db) else "LIKE"


def ordered_rows(
    db: Any, table: str, where: str, params: list[object], columns: Sequence[str]
) -> list[tuple[Any, ...]]:
    """A small user's rows (``where``, then ``LIMIT ?`` in ``params``) in rowid order.

    SQLite reads them through its owner index in rowid order, whatever was written since;
    PostgreSQL returns equal index keys in the order of their tuples, which every update of
    an entry (a search marking its hits used) moves. Search keeps a small user's keyword
    postings by the exact sequence of its rows (:mod:`memkeeper.store.bm25_index`), so an
    order that changes with each search rebuilt them every time (3 ms of a search of 500
    entries). The rows are sorted here, not by the server: the same order, without a sort
    step in the statement (a third of its time on the server for 500 rows). The ``LIMIT``
    applies before the sort, as SQLite's does."""
    names = ", ".join(f"m.{c}" for c in columns)
    # A statement the session keeps prepared: a search sends it every time (its parsing and
    # planning were about 0.15 ms of the server's 1 ms for 500 rows).
    rows = db.conn.read_named(
        f"SELECT m.rowid, {names} FROM {table} AS m WHERE {where} LIMIT ?", params
    )
    rows.sort(key=itemgetter(0))
    return list(map(_WITHOUT_ROWID, rows))


def trigram_rows(
    db: Any,
    table: str,
    where: str,
    params: list[object],
    likes: Sequence[str],
    cap: int,
) -> list[tuple[str, str | None, str]]:
    """The user's rows (``where``) whose key or value matches one of the ``LIKE`` patterns
    ``likes`` (each of three characters or more), at most ``cap``, in rowid order.

    Each pattern is one arm of an ``OR`` that the planner turns into a bitmap scan of the
    trigram index per arm; the arm rechecks key and value apart, so that a pattern never
    matches across the space ``search_text`` puts between them (as on SQLite)."""
    arms = " OR ".join(
        "(m.search_text ILIKE ? ESCAPE '\\'"
        " AND (coalesce(m.key, '') ILIKE ? ESCAPE '\\' OR m.value ILIKE ? ESCAPE '\\'))"
        for _ in likes
    )
    values = [p for like in likes for p in (like,) * 3]
    rows = db.conn.execute(
        f"SELECT m.id, m.key, m.value FROM {table} AS m WHERE {where} AND ({arms})"
        " ORDER BY m.rowid LIMIT ?",
        [*params, *values, cap],
    ).fetchall()
    return [(row[0], row[1], row[2]) for row in rows]
