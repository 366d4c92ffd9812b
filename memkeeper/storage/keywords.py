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
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence

from sqlite_utils import Database

from memkeeper.storage.sqlite import immediate_transaction

TABLES = ("memories", "cold_memories")

SHORT_SCAN_ROWS = 5000
"""At most this many of the user's rows are read by the substring scan."""

SCAN_BELOW_ROWS = 2000
"""Below this many rows in the namespaces searched, the user's rows are scanned (substring
matches) instead of asking the FTS5 index, whose cost follows how common the words are
across every user, not how many entries this user has."""


def _rows_of(db: Database, table: str, where: str, params: Sequence[object], cap: int) -> int:
    """How many rows match ``where``, counting no further than ``cap``."""
    return db.conn.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM {table} AS m WHERE {where} LIMIT ?)",
        [*params, cap],
    ).fetchone()[0]


MIN_TRIGRAM_CHARS = 3

_KEY_WEIGHT, _VALUE_WEIGHT, _USER_WEIGHT = 2.0, 1.0, 0.0
_TOKENS = re.compile(r"\w+")


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

    Call inside a write transaction. Costs a rewrite of the whole index of that file.
    """
    fts = fts_table(table)
    db.conn.execute(f"INSERT INTO {fts} ({fts}) VALUES ('{purge_command()}')")


def compact(db: Database, table: str) -> None:
    """Rewrite the index without the rows deleted since (FTS5 ``optimize``), in its own
    write transaction on that file, so their pages come free.

    Used by retention after a cold purge. It holds the cold file's write lock for as long as
    the rewrite takes; agents touch the cold file only to bring an entry back.
    """
    with immediate_transaction(db):
        purge_deleted(db, table)


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def _tokens(query: str) -> list[str]:
    """The query's words; a word in a script written without spaces (Chinese, Japanese,
    Korean) longer than a trigram becomes its overlapping trigrams, so "报告用什么格式" finds
    "报告用PDF格式" through "报告用" rather than needing the whole sentence verbatim."""
    words = _TOKENS.findall(query) or ([query.strip()] if query.strip() else [])
    tokens: list[str] = []
    for word in words:
        if len(word) > MIN_TRIGRAM_CHARS and _CJK.search(word):
            tokens += [word[i : i + MIN_TRIGRAM_CHARS] for i in range(len(word) - 2)]
        else:
            tokens.append(word)
    return tokens


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


def keyword_scores(
    db: Database,
    *,
    table: str,
    user_id: str,
    namespaces: Sequence[str],
    query: str,
    kinds: Sequence[str] | None,
    states: Sequence[str],
    limit: int,
) -> list[tuple[str, float]]:
    """Ids of ``user_id``'s entries in ``table`` matching ``query``, best first, scored 0..1.

    The query is split into words (runs of letters, digits and ``_``; a query with none is
    taken whole); each word of three characters or more is one quoted FTS5 phrase, and the
    phrases are OR-ed, so no user text is FTS5 syntax. Matches are ranked by ``bm25`` (a key
    match weighs twice a value match) and scored relative to the best hit: the best is 1.0.

    When the user has fewer than :data:`SCAN_BELOW_ROWS` rows in those namespaces — the usual
    case — or when no word has three characters (trigrams cannot match fewer), the words are
    looked for as substrings (``LIKE``, case-insensitive for ASCII) in the key and value of
    at most :data:`SHORT_SCAN_ROWS` of the user's rows (through the owner index), and the
    score is the number of words found relative to the best hit.

    Only rows of ``user_id`` in ``namespaces`` with a state in ``states`` (and a kind in
    ``kinds`` unless None) are returned. ``table`` is ``"memories"`` or ``"cold_memories"``.
    """
    fts = fts_table(table)
    tokens = _tokens(query)
    if not tokens or not namespaces or not states or limit <= 0 or kinds == []:
        return []
    where, params = _filters(user_id, namespaces, kinds, states)
    long_tokens = list(dict.fromkeys(t for t in tokens if len(t) >= MIN_TRIGRAM_CHARS))
    if long_tokens and _rows_of(db, table, where, params, SCAN_BELOW_ROWS) >= SCAN_BELOW_ROWS:
        match = "{key value} : (" + " OR ".join(_phrase(t) for t in long_tokens) + ")"
        if len(user_id) >= MIN_TRIGRAM_CHARS:
            # Only rows whose user id contains this one (the join below keeps the exact user).
            match = f"user_id : {_phrase(user_id)} AND ({match})"
        rows = db.conn.execute(
            f"SELECT m.id, bm25({fts}, {_KEY_WEIGHT}, {_VALUE_WEIGHT}, {_USER_WEIGHT}) AS rank"
            f" FROM {fts} JOIN {table} AS m ON m.rowid = {fts}.rowid"
            f" WHERE {fts} MATCH ? AND {where} ORDER BY rank, m.id LIMIT ?",
            [match, *params, limit],
        ).fetchall()
        if not rows:
            return []
        best = rows[0][1]
        return [(mid, rank / best if best < 0 else 1.0) for mid, rank in rows]
    # A user's few hundred rows: reading them through the owner index costs less than FTS5
    # reading the posting lists of words every user writes (measured at 1,000,000 rows:
    # p99 81 ms through the index, a few ms by the scan).
    # As in FTS5 matching, words under three characters count only when there is no other.
    tokens = long_tokens or list(dict.fromkeys(tokens))
    hits = " + ".join(
        "(coalesce(key, '') LIKE ? ESCAPE '\\' OR value LIKE ? ESCAPE '\\')" for _ in tokens
    )
    patterns = [p for t in tokens for p in (_like_pattern(t),) * 2]
    rows = db.conn.execute(
        f"SELECT id, hits FROM ("
        f" SELECT m.id, {hits} AS hits FROM {table} AS m WHERE {where} LIMIT ?"
        f") WHERE hits > 0 ORDER BY hits DESC, id LIMIT ?",
        [*patterns, *params, SHORT_SCAN_ROWS, limit],
    ).fetchall()
    if not rows:
        return []
    best = rows[0][1]
    return [(mid, count / best) for mid, count in rows]  # relative to the best hit, as above
