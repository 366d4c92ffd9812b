"""memkeeper's own database handle (memkeeper.storage.sqlite.connection.Database): the calls it took
from sqlite-utils behave as they did — rows as dicts, a RETURNING write done at once,
``atomic()`` a transaction or a savepoint, a script kept inside a transaction — and opening an
up-to-date file leaves sqlite-utils unimported."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memkeeper import MemoryStore
from memkeeper.storage.sqlite.connection import Database, utils_database


@pytest.fixture
def db(tmp_path: Path) -> Database:
    conn = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
    handle = Database(conn)
    yield handle
    handle.close()


def _names(db: Database) -> list[str]:
    return [row["name"] for row in db.query("SELECT name FROM t ORDER BY id")]


def test_query_gives_dicts_and_renames_a_repeated_column(db: Database) -> None:
    db.execute("INSERT INTO t (name) VALUES (?)", ["a"])
    assert list(db.query("SELECT id, name FROM t")) == [{"id": 1, "name": "a"}]
    assert list(db.query("SELECT name, name FROM t WHERE id = :id", {"id": 1})) == [
        {"name": "a", "name_2": "a"}
    ]
    with pytest.raises(ValueError, match="returns rows"):
        db.query("UPDATE t SET name = 'b'")


def test_a_returning_write_is_done_when_query_returns(db: Database, tmp_path: Path) -> None:
    db.query("INSERT INTO t (name) VALUES ('r') RETURNING id")  # rows never read
    other = sqlite3.connect(tmp_path / "t.db")
    assert other.execute("SELECT name FROM t").fetchall() == [("r",)]  # committed
    other.close()


def test_atomic_commits_rolls_back_and_nests_as_savepoints(db: Database) -> None:
    with db.atomic():
        db.execute("INSERT INTO t (name) VALUES ('kept')")
        with pytest.raises(RuntimeError), db.atomic():
            db.execute("INSERT INTO t (name) VALUES ('inner')")
            raise RuntimeError
        assert db.conn.in_transaction
    assert not db.conn.in_transaction
    with pytest.raises(RuntimeError), db.atomic():
        db.execute("INSERT INTO t (name) VALUES ('gone')")
        raise RuntimeError
    assert _names(db) == ["kept"]


def test_a_script_inside_a_transaction_stays_in_it(db: Database) -> None:
    script = """
        CREATE TABLE log (name TEXT);
        CREATE TRIGGER t_log AFTER INSERT ON t BEGIN INSERT INTO log VALUES (new.name); END;
        INSERT INTO t (name) VALUES ('x; y')
    """
    with pytest.raises(RuntimeError), db.atomic():
        db.executescript(script)
        assert _names(db) == ["x; y"]
        raise RuntimeError
    assert _names(db) == [] and not list(
        db.query("SELECT name FROM sqlite_master WHERE name = 'log'")
    )
    db.executescript(script)  # outside a transaction: sqlite3's own
    assert list(db.query("SELECT name FROM log")) == [{"name": "x; y"}]


def test_the_migrations_get_sqlite_utils_on_the_same_connection(db: Database) -> None:
    full = utils_database(db)
    assert full.conn is db.conn and utils_database(full) is full
    assert "t" in full.table_names()


def test_opening_an_up_to_date_store_imports_no_sqlite_utils(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with MemoryStore(path) as store:  # created: the migrations ran through sqlite-utils
        store.remember("bob", "city", "Paris")
    script = (
        "import sys\n"
        "from memkeeper import MemoryStore\n"
        "with MemoryStore(sys.argv[1]) as store:\n"
        "    print(store.recall('bob', 'city').value, 'sqlite_utils' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["Paris", "False"]
