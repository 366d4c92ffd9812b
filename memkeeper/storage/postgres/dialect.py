"""memkeeper's own SQL, written once in SQLite's dialect, as PostgreSQL runs it.

The storage functions (``storage/*.py``) hold one statement each for what they do; most are
plain SQL both servers run alike. What the two dialects spell differently in those statements
is a short, closed list, and this module rewrites exactly that list:

- parameters: ``?`` becomes ``%s`` and ``:name`` becomes ``%(name)s`` (psycopg's style), a
  literal ``%`` becomes ``%%``; text inside quotes is left alone;
- ``INSERT OR IGNORE INTO t ...`` becomes ``INSERT INTO t ... ON CONFLICT DO NOTHING``, and
  ``INSERT OR REPLACE INTO t (columns) ...`` an upsert on ``t``'s primary key
  (:data:`PRIMARY_KEYS`) that sets every other column it names;
- ``json_extract(column, '$.field')`` becomes ``(column::jsonb ->> 'field')`` (memkeeper's
  JSON columns are text on both backends, and it compares the fields it reads as text);
- ``group_concat`` becomes ``string_agg``; ``CAST(... AS REAL)`` a double; the scalar
  ``min(a, b)`` / ``max(a, b)`` of two columns ``LEAST`` / ``GREATEST``.

``executemany`` of one ``INSERT`` is sent as one statement of many rows
(:func:`many_rows`): the server parses and plans it once, not once per row.

A statement only one backend has (``PRAGMA``, ``sqlite_master``, FTS5's ``MATCH``, ``ATTACH``)
is not rewritten: it raises :class:`SqliteOnly`, so a code path that still assumes SQLite
fails loudly in the PostgreSQL test run instead of doing something else. The storage function
that needs such a statement has a PostgreSQL branch of its own. Translations are cached:
the store runs the same few hundred statements over and over.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "memories": ("id",),
    "cold_memories": ("id",),
    "moves_in_flight": ("id",),
    "uses": ("memory_id", "day"),
    "vectors": ("memory_id",),
    "job_runs": ("run_id",),
    "messages": ("id",),
    "episodes": ("id",),
    "changes": ("id",),
    "tombstones": ("id",),
}
"""Each table's primary key, for ``INSERT OR REPLACE`` (PostgreSQL names the conflict)."""


class SqliteOnly(RuntimeError):
    """A statement of SQLite's own reached the PostgreSQL backend (a bug: it needs a branch)."""


_SQLITE_ONLY = re.compile(
    r"\b(PRAGMA|sqlite_master|sqlite_schema|ATTACH|DETACH|MATCH|fts5|GLOB|julianday|printf"
    r"|json_each|json_object|json_set|randomblob|BEGIN\s+IMMEDIATE|INDEXED\s+BY)\b",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")
_PARAMETER = re.compile(r"\?|(?<![:\w]):([A-Za-z_]\w*)|%")
_OR_VERB = re.compile(r"^\s*INSERT\s+OR\s+(IGNORE|REPLACE)\s+INTO\s+(\w+)", re.IGNORECASE)
_COLUMNS = re.compile(r"^\s*INSERT\s+INTO\s+\w+\s*\(([^)]*)\)", re.IGNORECASE)
_RETURNING = re.compile(r"\bRETURNING\b", re.IGNORECASE)
_JSON_EXTRACT = re.compile(r"json_extract\(\s*(\w+)\s*,\s*'\$\.(\w+)'\s*\)", re.IGNORECASE)
_GROUP_CONCAT = re.compile(r"\bgroup_concat\(", re.IGNORECASE)
_AS_REAL = re.compile(r"\bAS\s+REAL\b", re.IGNORECASE)
# SQLite's min/max of two values (scalar, not the aggregate): simple arguments only.
_SCALAR = re.compile(r"\b(min|max)\(\s*([\w.]+)\s*,\s*([\w.]+)\s*\)", re.IGNORECASE)


def _outside_quotes(
    sql: str, rewrite: Callable[[str], str], quoted: Callable[[str], str] = str
) -> str:
    """``rewrite`` applied to every stretch of ``sql`` outside quoted text, ``quoted`` to
    each quoted stretch."""
    out, last = [], 0
    for match in _QUOTED.finditer(sql):
        out.append(rewrite(sql[last : match.start()]))
        out.append(quoted(match.group(0)))
        last = match.end()
    out.append(rewrite(sql[last:]))
    return "".join(out)


def _percent(text: str) -> str:
    """psycopg reads ``%`` everywhere, quoted text included: a literal one is doubled."""
    return text.replace("%", "%%")


def _parameters(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        found = match.group(0)
        if found == "?":
            return "%s"
        if found == "%":
            return "%%"
        return f"%({match.group(1)})s"

    return _PARAMETER.sub(one, text)


def _functions(text: str) -> str:
    text = _JSON_EXTRACT.sub(r"(\1::jsonb ->> '\2')", text)
    text = _GROUP_CONCAT.sub("string_agg(", text)
    text = _SCALAR.sub(
        lambda m: (
            f"{'LEAST' if m.group(1).lower() == 'min' else 'GREATEST'}({m.group(2)}, {m.group(3)})"
        ),
        text,
    )
    return _AS_REAL.sub("AS DOUBLE PRECISION", text)


def _conflict_clause(sql: str, verb: str, table: str) -> str:
    if verb.upper() == "IGNORE":
        return " ON CONFLICT DO NOTHING"
    key = PRIMARY_KEYS.get(table)
    columns = _COLUMNS.match(sql)
    if key is None or columns is None:
        raise SqliteOnly(f"INSERT OR REPLACE into {table} needs its columns and a known key")
    names = [name.strip() for name in columns.group(1).split(",")]
    updates = ", ".join(f"{name} = EXCLUDED.{name}" for name in names if name not in key)
    action = f"DO UPDATE SET {updates}" if updates else "DO NOTHING"
    return f" ON CONFLICT ({', '.join(key)}) {action}"


@functools.lru_cache(maxsize=2048)
def translate(sql: str, with_parameters: bool = True) -> str:
    """``sql`` (memkeeper's SQLite dialect) as PostgreSQL runs it; see the module docstring.

    ``with_parameters`` false: the statement is run without parameters, so its ``%`` stays
    as it is (psycopg reads placeholders only when parameters are given).
    """
    if _SQLITE_ONLY.search(_QUOTED.sub("''", sql)):
        raise SqliteOnly(f"a SQLite-only statement reached PostgreSQL: {sql.strip()[:120]}")
    conflict = ""
    verb = _OR_VERB.match(sql)
    if verb is not None:
        sql = sql[: verb.start()] + f"INSERT INTO {verb.group(2)}" + sql[verb.end() :]
        conflict = _conflict_clause(sql, verb.group(1), verb.group(2))
    sql = _functions(sql)  # its patterns hold their own quoted text ('$.field')
    if with_parameters:
        sql = _outside_quotes(sql, _parameters, _percent)
    if conflict:
        returning = _RETURNING.search(sql)
        if returning is not None:
            sql = sql[: returning.start()].rstrip() + conflict + " " + sql[returning.start() :]
        else:
            sql = sql.rstrip().rstrip(";") + conflict
    return sql


_ONE_ROW = re.compile(
    r"^(?P<head>\s*INSERT\s+INTO\s+\w+\s*\((?P<columns>[^)]*)\)\s*VALUES\s*)"
    r"\((?P<values>\s*%(?:\(\w+\))?s\s*(?:,\s*%(?:\(\w+\))?s\s*)*)\)(?P<tail>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_PLACEHOLDER = re.compile(r"%(?:\((\w+)\))?s")
_UPDATES_ON = re.compile(r"ON\s+CONFLICT\s*\(([^)]*)\)\s*DO\s+UPDATE", re.IGNORECASE)
ROWS_PER_STATEMENT = 1000
"""Most rows :func:`many_rows` puts in one statement (a long text is parsed in one piece):
a bulk copy of more is sent as before, one statement a row (in one pipeline, or in the
string sent with the next statement: :mod:`~memkeeper.storage.postgres.round_trips`)."""


def many_rows(text: str, rows: Sequence[Any]) -> tuple[str, list[Any]] | None:
    """``executemany(text, rows)`` of a translated one-row ``INSERT ... VALUES (...)`` as one
    statement of all the rows, with its parameters; None when ``text`` is not such an insert
    or there are more than :data:`ROWS_PER_STATEMENT` rows (the rows are then sent one
    statement each). Its ``rowcount`` is theirs added up, as ``executemany``'s.

    The same rows go in, in the same order, so the same rows come out: ``ON CONFLICT DO
    NOTHING`` skips a row whose key an earlier row of the statement took, as it would have
    one statement later. ``DO UPDATE`` cannot touch one row twice in a statement: rows that
    repeat a key are sent one by one (None) so that the last one wins, as in SQLite.
    """
    found = _ONE_ROW.match(text)
    if found is None or not rows or len(rows) > ROWS_PER_STATEMENT:
        return None
    names = [m.group(1) for m in _PLACEHOLDER.finditer(found.group("values"))]
    named = all(names)
    if not named and any(names):
        return None
    width = len(names)
    if named:
        flat = [[row[name] for name in names] for row in rows]
    else:
        flat = [list(row) for row in rows]
        if any(len(row) != width for row in flat):
            return None
    updates = _UPDATES_ON.search(found.group("tail"))
    if updates is not None:
        columns = [c.strip() for c in found.group("columns").split(",")]
        key = [c.strip() for c in updates.group(1).split(",")]
        if not all(k in columns for k in key) or (not named and width != len(columns)):
            return None
        at = [names.index(k) if named else columns.index(k) for k in key]
        keys = [tuple(row[i] for i in at) for row in flat]
        if len(set(keys)) != len(keys):
            return None
    as_json = _json_rows(found, flat, width)
    if as_json is not None:
        return as_json
    group = "(" + ", ".join(["%s"] * width) + ")"
    sql = found.group("head") + ", ".join([group] * len(flat)) + found.group("tail")
    return sql, [value for row in flat for value in row]


_PLAIN_TYPES = frozenset({str, int, float, type(None)})
_TABLE = re.compile(r"INSERT\s+INTO\s+(\w+)", re.IGNORECASE)
_NAME = re.compile(r"^\w+$")


def _json_rows(
    found: re.Match[str], flat: list[list[Any]], width: int
) -> tuple[str, list[Any]] | None:
    """The insert of ``flat`` rows as ``INSERT ... SELECT`` from one JSON array read back as
    the table's own row type (``jsonb_populate_recordset``, each value taking its column's
    type, as :func:`many_updates` does), when every value is a plain JSON scalar and every
    column a plain name; else None (the rows go as ``VALUES`` groups).

    Why: the client quotes parameters into the statement (``ClientCursor``), and psycopg
    splits a long statement at each of its placeholders anew (it caches only short ones):
    for a job's batch of change-log rows and cold copies, thousands of placeholders, that
    split was the largest part of the pass's own CPU. One parameter, encoded by ``json``'s
    C encoder, costs a small part of it; the same rows go in, in the same order."""
    columns = [c.strip() for c in found.group("columns").split(",")]
    if len(columns) != width or not all(_NAME.match(c) for c in columns):
        return None
    # Exact types: a bool (JSON's true is no integer to PostgreSQL) or a subclass falls back.
    if not {type(v) for row in flat for v in row} <= _PLAIN_TYPES:
        return None
    table = _TABLE.match(found.group("head").strip())
    if table is None:
        return None
    keys = [c.lower() for c in columns]  # the names PostgreSQL folds unquoted ones to
    objects = [dict(zip(keys, row, strict=True)) for row in flat]
    try:
        text = json.dumps(objects, ensure_ascii=False, allow_nan=False)
    except ValueError:  # a NaN or an infinity
        return None
    picked = ", ".join(f"v.{c}" for c in keys)
    head = found.group("head")
    into = head[: head.upper().rindex("VALUES")]
    sql = (
        f"{into}SELECT {picked} FROM jsonb_populate_recordset(NULL::{table.group(1)}, %s::jsonb)"
        f" AS v{found.group('tail')}"
    )
    return sql, [text]


def one_statement(text: str, rows: Sequence[Any]) -> tuple[str, list[Any]] | None:
    """``executemany(text, rows)`` of two rows or more as one statement, with its parameters:
    an ``INSERT`` (:func:`many_rows`), an ``UPDATE`` (:func:`many_updates`) or a ``DELETE``
    by key (:func:`many_deletes`); None when it cannot be one."""
    if len(rows) < 2:
        return None
    return many_rows(text, rows) or many_updates(text, rows) or many_deletes(text, rows)


_ONE_DELETE = re.compile(
    r"^\s*DELETE\s+FROM\s+(?P<table>\w+)\s+WHERE\s+(?P<key>\w+)\s*=\s*%s\s*$", re.IGNORECASE
)


def many_deletes(text: str, rows: Sequence[Any]) -> tuple[str, list[Any]] | None:
    """``executemany(text, rows)`` of a translated ``DELETE FROM t WHERE key = %s`` as one
    ``DELETE ... WHERE key IN (...)`` of every row's key (a move to cold storage deletes
    each moved row: a statement each was parsed and planned once a row). None when ``text``
    is not such a delete or a row is not one value. Its ``rowcount`` is the rows deleted,
    as ``executemany``'s (a key given twice deletes its row once either way)."""
    found = _ONE_DELETE.match(text)
    if found is None or not rows or len(rows) > ROWS_PER_STATEMENT:
        return None
    if any(isinstance(row, Mapping) or len(row) != 1 for row in rows):
        return None
    keys = [row[0] for row in rows]  # a None key deletes nothing in either form
    marks = ", ".join(["%s"] * len(keys))
    return f"DELETE FROM {found.group('table')} WHERE {found.group('key')} IN ({marks})", keys


_ONE_UPDATE = re.compile(
    r"^\s*UPDATE\s+(?P<table>\w+)\s+SET\s+(?P<sets>\w+\s*=\s*%(?:\(\w+\))?s"
    r"(?:\s*,\s*\w+\s*=\s*%(?:\(\w+\))?s)*)\s+WHERE\s+(?P<key>\w+)\s*=\s*(?P<at>%(?:\(\w+\))?s)\s*$",
    re.IGNORECASE,
)
_ASSIGNMENT = re.compile(r"(\w+)\s*=\s*%(?:\((\w+)\))?s")
_JSON_SCALARS = (str, int, float, type(None))


def many_updates(text: str, rows: Sequence[Any]) -> tuple[str, list[Any]] | None:
    """``executemany(text, rows)`` of a translated ``UPDATE t SET a = %s, ... WHERE key = %s``
    (every value a parameter) as one statement for every row: the rows as one JSON array
    read back as ``t``'s own row type (``jsonb_populate_recordset``, so each value has its
    column's type), joined on the key. None when ``text`` is not such an update, a key
    repeats (an ``UPDATE ... FROM`` changes a row once: sent one by one, the last wins), or
    a value is not a plain JSON scalar. Its ``rowcount`` is the rows updated, as
    ``executemany``'s."""
    found = _ONE_UPDATE.match(text)
    if found is None or not rows or len(rows) > ROWS_PER_STATEMENT:
        return None
    pairs = _ASSIGNMENT.findall(found.group("sets"))
    columns = [column for column, _ in pairs]
    key, at = found.group("key"), found.group("at")
    named = all(name for _, name in pairs) and at != "%s"
    if not named and (any(name for _, name in pairs) or at != "%s"):
        return None
    if named:
        key_name = at[2:-2]
        objects = [{key: row[key_name], **{c: row[name] for c, name in pairs}} for row in rows]
    else:
        if any(len(row) != len(columns) + 1 for row in rows):
            return None
        objects = [{key: row[-1], **dict(zip(columns, row[:-1], strict=True))} for row in rows]
    values = [value for item in objects for value in item.values()]
    if len({item[key] for item in objects}) != len(objects) or not all(
        isinstance(v, _JSON_SCALARS) and (not isinstance(v, float) or math.isfinite(v))
        for v in values
    ):
        return None
    table = found.group("table")
    sets = ", ".join(f"{column} = v.{column}" for column in columns)
    sql = (
        f"UPDATE {table} AS t SET {sets} FROM jsonb_populate_recordset(NULL::{table}, %s::jsonb)"
        f" AS v WHERE t.{key} = v.{key}"
    )
    return sql, [json.dumps(objects, ensure_ascii=False)]
