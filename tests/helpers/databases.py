"""Looking at memkeeper's two SQLite files from the outside, without going through memkeeper.

Tests use these to assert what is really stored: every row of both files (to prove that a
rejected operation wrote nothing), the raw bytes of every file (to prove that a forgotten
value left no residue), and the change log as plain rows.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memkeeper.paths import cold_path_for

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
"""The tests' usual "now" (the same as conftest's)."""

_SUFFIXES = ("", "-wal", "-shm", "-journal")


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    return conn


def database_files(hot_path: Path) -> list[Path]:
    """Every file that exists on disk for the hot and cold database (with -wal, -shm...)."""
    found = []
    for base in (Path(hot_path), cold_path_for(Path(hot_path))):
        for suffix in _SUFFIXES:
            candidate = Path(f"{base}{suffix}")
            if candidate.exists():
                found.append(candidate)
    return found


def checkpoint_files(hot_path: Path) -> None:
    """``PRAGMA wal_checkpoint(TRUNCATE)`` on both files (those that exist)."""
    for base in (Path(hot_path), cold_path_for(Path(hot_path))):
        if base.exists():
            conn = sqlite3.connect(base)
            try:
                busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                assert busy == 0, f"checkpoint of {base} was blocked by another connection"
            finally:
                conn.close()


_FIND_NEEDLES = """
import sys
needles = [bytes.fromhex(h) for h in sys.argv[1].split(",")]
for path in sys.argv[2:]:
    data = open(path, "rb").read()
    for number, needle in enumerate(needles):
        if needle in data:
            print(number, path)
"""


def needles_in_files(hot_path: Path, needles: Sequence[bytes]) -> dict[bytes, list[str]]:
    """For each needle, the names of the database files (main, WAL, shm, both databases)
    whose bytes hold it ([] for none).

    The bytes are read by a child process: a ``close()`` of any descriptor of a database file
    in this process would cancel the POSIX locks of the test's own open stores (the bug of
    issue 18, item 1), and a test that keeps writing afterwards would then run unlocked.
    """
    found: dict[bytes, list[str]] = {needle: [] for needle in needles}
    paths = database_files(hot_path)
    if not paths or not needles:
        return found
    out = subprocess.run(
        [sys.executable, "-c", _FIND_NEEDLES, ",".join(n.hex() for n in needles), *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in out.splitlines():
        number, path = line.split(" ", 1)
        found[needles[int(number)]].append(Path(path).name)
    return found


def files_containing(hot_path: Path, needle: bytes) -> list[str]:
    """Names of the database files (main, WAL, shm, both databases) whose bytes hold needle
    (read by a child process: see :func:`needles_in_files`)."""
    return needles_in_files(hot_path, [needle])[needle]


def dump_databases(hot_path: Path) -> dict[str, list[str]]:
    """Every table and row of both files as SQL text, by file name ([] when absent).

    Two dumps compare equal exactly when both databases hold the same schema and rows, so a
    test takes one before and one after an operation that must write nothing.
    """
    if is_postgres(hot_path):
        return _pg_dump(str(hot_path))
    result: dict[str, list[str]] = {}
    for path in (Path(hot_path), cold_path_for(Path(hot_path))):
        if not path.exists():
            result[path.name] = []
            continue
        conn = sqlite3.connect(path)
        try:
            result[path.name] = list(conn.iterdump())
        finally:
            conn.close()
    return result


_PG_ORDER = {"uses": "memory_id, day", "job_runs": "started_at, run_id"}
_PG_ONLY_COLUMNS = ("rowid", "search_text", "search_words", "embedding", "host")
"""Columns only PostgreSQL has (``host``: job_runs of a fleet, step 0003_fleet)."""


def _pg_dump(url: str) -> dict[str, list[str]]:
    """:func:`dump_databases` of the PostgreSQL test database: every memkeeper table's rows."""
    import psycopg

    from memkeeper.storage.postgres.ddl import TABLES

    with psycopg.connect(url, connect_timeout=10) as conn:  # one connection: 9 tables
        return {
            table: [
                row[0]
                for row in conn.execute(f"SELECT t::text FROM memkeeper.{table} AS t ORDER BY 1")
            ]
            for table in TABLES
        }


def _pg_rows(url: str, table: str) -> list[dict[str, Any]]:
    """A table of the PostgreSQL test database as SQLite's file would hold it: without the
    columns only PostgreSQL has, in insertion order (rowid or id)."""
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(url, row_factory=dict_row, connect_timeout=10) as conn:
        names = [
            row["column_name"]
            for row in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema ="
                " 'memkeeper' AND table_name = %s ORDER BY ordinal_position",
                (table,),
            )
        ]
        order = _PG_ORDER.get(table) or ("rowid" if "rowid" in names else "id")
        rows = conn.execute(f"SELECT * FROM memkeeper.{table} ORDER BY {order}").fetchall()
    dropped = (
        *_PG_ONLY_COLUMNS,
        *(("user_id", "namespace") if table == "vectors" else ()),
        *(("host",) if table == "job_runs" else ()),  # the fleet's: which host ran it
    )
    return [{k: v for k, v in row.items() if k not in dropped} for row in rows]


def is_postgres(path: object) -> bool:
    """Whether a test's ``db_path`` (or a store's ``path``) is the PostgreSQL test database."""
    return str(path).startswith(("postgresql://", "postgres://"))


def raw_rows(path: Path | str, table: str) -> list[dict[str, Any]]:
    """Every row of one table of one file, in rowid order, as plain dicts."""
    if is_postgres(path):
        return _pg_rows(str(path), table)
    conn = _connect(Path(path))
    try:
        return [dict(row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY rowid")]
    finally:
        conn.close()


def change_rows(hot_path: Path) -> list[dict[str, Any]]:
    """The change log as stored, oldest first, with before/after/details parsed from JSON."""
    rows = raw_rows(hot_path, "changes")
    for row in rows:
        for column in ("before", "after", "details"):
            row[column] = json.loads(row[column]) if row[column] is not None else None
    return rows
