"""The keyword index on SQLite: FTS5 over each memory's key and value, trigram-tokenized.

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
The shared candidate search (:mod:`memkeeper.storage.keywords`) asks it through
:func:`trigram_rows` for a large user; the ranking never uses FTS5's ``bm25``, whose
statistics are of every user's rows in the file.

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

import sqlite3
from collections.abc import Sequence

from memkeeper.storage.sqlite.connection import Database

TABLES = ("memories", "cold_memories")
"""The memory tables, each with its FTS5 table."""

MIN_TRIGRAM_CHARS = 3


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
    """Rewrite ``table``'s index without any deleted row's trigrams (inside the caller's
    write transaction; a rewrite of the whole index of that file)."""
    fts = fts_table(table)
    db.conn.execute(f"INSERT INTO {fts} ({fts}) VALUES ('{purge_command()}')")


def _phrase(token: str) -> str:
    """One FTS5 string (a phrase): any text, double quotes doubled, is never a syntax error."""
    return '"' + token.replace('"', '""') + '"'


def trigram_rows(
    db: Database,
    table: str,
    where: str,
    params: list[object],
    patterns: Sequence[str],
    user_id: str,
    cap: int,
) -> list[tuple[str, str | None, str]]:
    """(id, key, value) of at most ``cap`` rows of ``where`` whose key or value contains one
    of ``patterns`` (each of :data:`MIN_TRIGRAM_CHARS` or more), through the FTS5 index."""
    fts = fts_table(table)
    match = "{key value} : (" + " OR ".join(_phrase(t) for t in patterns) + ")"
    if len(user_id) >= MIN_TRIGRAM_CHARS:
        # Only rows whose user id contains this one (the join below keeps the exact user).
        match = f"user_id : {_phrase(user_id)} AND ({match})"
    return list(
        db.conn.execute(
            f"SELECT m.id, m.key, m.value FROM {fts} JOIN {table} AS m"
            f" ON m.rowid = {fts}.rowid WHERE {fts} MATCH ? AND {where} LIMIT ?",
            [match, *params, cap],
        )
    )
