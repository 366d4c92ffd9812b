"""The two SQLite files: created safely, reopened without a write, and refused — untouched —
when they are not memkeeper's (not SQLite, corrupt, another program's, from a newer memkeeper).
"""

from __future__ import annotations

import os
import random
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import raw_rows

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.errors import (
    EXIT_CANT_CREATE,
    EXIT_DATABASE,
    EXIT_USAGE,
    DatabaseError,
    StorageUnwritable,
)
from memkeeper.storage.sqlite.schema import (
    COLD_APPLICATION_ID,
    HOT_APPLICATION_ID,
    cold_migrations,
    hot_migrations,
)
from memkeeper.storage.transitions import Transition, apply, cold_image

# -- what bad files look like ---------------------------------------------------------------


def _real_database(path: Path) -> bytes:
    with MemoryStore(path) as store:
        for index in range(200):
            store.remember("alice", f"key {index}", "some value " * 40)
    return path.read_bytes()


def _text_file(path: Path) -> None:
    path.write_text("city = Beijing\nthis is a note, not a database\n" * 20)


def _truncated(path: Path) -> None:
    data = _real_database(path.with_name("whole.db"))
    path.write_bytes(data[: len(data) // 2])


def _truncated_header(path: Path) -> None:
    data = _real_database(path.with_name("whole.db"))
    path.write_bytes(data[:60])


def _random_bytes(path: Path) -> None:
    path.write_bytes(random.Random(4711).randbytes(16384))


def _foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);"
        "INSERT INTO users (name) VALUES ('someone');"
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER);"
    )
    conn.commit()
    conn.close()


def _foreign_wal(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('hello');")
    conn.commit()
    conn.close()


def _cold_file_as_hot(path: Path) -> None:
    with MemoryStore(path.with_name("other.db")) as store:
        store.storage.cold(create=True)
    path.write_bytes(path.with_name("other-cold.db").read_bytes())


BAD_FILES = {
    "text file": (_text_file, "not a usable SQLite database"),
    "truncated database": (_truncated, "not a usable SQLite database"),
    "truncated header": (_truncated_header, "not a usable SQLite database"),
    "random bytes": (_random_bytes, "not a usable SQLite database"),
    "another program's database": (_foreign, "another program"),
    "another program's WAL database": (_foreign_wal, "another program"),
    "memkeeper cold file given as the hot one": (_cold_file_as_hot, "cold-storage"),
}


def _files_in(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.fixture(params=sorted(BAD_FILES))
def bad_file(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str]:
    make, message = BAD_FILES[request.param]
    path = tmp_path / "bad" / "memory.db"
    path.parent.mkdir()
    make(path)
    return path, message


def test_a_bad_database_file_is_refused_and_left_untouched(bad_file: tuple[Path, str]) -> None:
    path, message = bad_file
    before = _files_in(path.parent)

    with pytest.raises(DatabaseError) as caught:
        MemoryStore(path)

    text = str(caught.value)
    assert str(path) in text
    assert message in text
    assert "\n" not in text
    assert _files_in(path.parent) == before  # byte-identical, and no -wal/-shm left behind


def test_the_cli_exits_74_on_a_bad_database_file(
    bad_file: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path, message = bad_file
    before = _files_in(path.parent)

    for argv in (["status"], ["remember", "alice", "city", "Beijing"], ["list", "--json"]):
        code = main(["--db", str(path), *argv])
        captured = capsys.readouterr()
        assert code == EXIT_DATABASE, argv
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1
        assert lines[0].startswith("memkeeper: error: ")
        assert message in lines[0]
        assert "Traceback" not in captured.err
        assert captured.out == ""
    assert _files_in(path.parent) == before


def test_a_directory_is_not_a_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(DatabaseError, match="is a directory"):
        MemoryStore(tmp_path)
    # On the command line, click refuses it before memkeeper sees it: a usage error.
    assert main(["--db", str(tmp_path), "status"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "is a directory" in err
    assert "Traceback" not in err


def test_a_corrupt_cold_file_is_refused_when_needed_and_left_untouched(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with MemoryStore(db_path) as store:
        store.remember("alice", "city", "Beijing")
    cold = db_path.with_name("memory-cold.db")
    cold.write_text("not a database at all")

    with MemoryStore(db_path) as store:
        assert store.recall("alice", "city").value == "Beijing"  # the hot file is fine
        with pytest.raises(DatabaseError, match=r"memory-cold\.db"):
            store.list()
    assert main(["--db", str(db_path), "list"]) == EXIT_DATABASE
    assert "memory-cold.db" in capsys.readouterr().err
    assert cold.read_text() == "not a database at all"


def test_a_hot_file_in_the_cold_files_place_is_refused(db_path: Path) -> None:
    with MemoryStore(db_path.with_name("other.db")) as other:
        other.remember("bob", "k", "v")
    cold = db_path.with_name("memory-cold.db")
    cold.write_bytes(db_path.with_name("other.db").read_bytes())
    before = cold.read_bytes()
    with MemoryStore(db_path) as store, pytest.raises(DatabaseError) as caught:
        store.list()
    assert "is a memkeeper hot (memory.db) file, not a cold-storage" in str(caught.value)
    assert cold.read_bytes() == before


# -- a newer memkeeper's file ---------------------------------------------------------------


def _mark_newer(path: Path, migration_set: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(
        "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES (?, ?, ?)",
        [migration_set, "0099_from_the_future", "2030-01-01 00:00:00+00:00"],
    )
    conn.commit()
    conn.close()


def test_a_database_from_a_newer_memkeeper_is_refused_untouched(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with MemoryStore(db_path) as store:
        store.remember("alice", "city", "Beijing")
    _mark_newer(db_path, "memkeeper")
    before = _files_in(db_path.parent)

    with pytest.raises(DatabaseError) as caught:
        MemoryStore(db_path)
    assert "newer memkeeper" in str(caught.value)
    assert "0099_from_the_future" in str(caught.value)
    assert str(db_path) in str(caught.value)

    assert main(["--db", str(db_path), "recall", "alice", "city"]) == EXIT_DATABASE
    err = capsys.readouterr().err
    assert "newer memkeeper" in err
    assert len(err.strip().splitlines()) == 1
    assert _files_in(db_path.parent) == before


def test_a_cold_file_from_a_newer_memkeeper_is_refused(db_path: Path) -> None:
    with MemoryStore(db_path) as store:
        store.storage.cold(create=True)
    _mark_newer(db_path.with_name("memory-cold.db"), "memkeeper-cold")
    with MemoryStore(db_path) as store, pytest.raises(DatabaseError, match="newer memkeeper"):
        store.list()


def test_another_migration_set_in_the_same_file_is_not_mistaken_for_a_newer_schema(
    db_path: Path,
) -> None:
    with MemoryStore(db_path):
        pass
    _mark_newer(db_path, "some-plugin")
    with MemoryStore(db_path) as store:
        assert store.list() == []


# -- creating and reopening -----------------------------------------------------------------


def test_new_files_are_private_and_marked_as_memkeeper_files(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "memory.db"
    with MemoryStore(path) as store:
        assert not store.cold_path.exists()  # cold storage is created when first needed
        memory = store.remember("alice", "city", "Beijing")
        # Retire it through the one mechanism the jobs use: cold storage gets created.
        image = store.storage.hot_images([memory.id])[memory.id]
        target = cold_image(image, "test", store.now())
        apply(
            store.storage,
            [Transition(memory.id, image, target, "retire", "test")],
            actor="test",
            now=store.now(),
        )
        assert store.cold_path.exists()
    for file in (path, path.with_name("memory-cold.db")):
        assert stat.S_IMODE(file.stat().st_mode) & 0o077 == 0, file
    assert stat.S_IMODE(path.parent.stat().st_mode) & 0o077 == 0
    hot = sqlite3.connect(path)
    assert hot.execute("PRAGMA application_id").fetchone()[0] == HOT_APPLICATION_ID
    assert hot.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    hot.close()
    cold = sqlite3.connect(path.with_name("memory-cold.db"))
    assert cold.execute("PRAGMA application_id").fetchone()[0] == COLD_APPLICATION_ID
    cold.close()


def test_an_empty_file_is_adopted_as_a_new_database(db_path: Path) -> None:
    db_path.touch()
    with MemoryStore(db_path) as store:
        store.remember("alice", "city", "Beijing")
    assert [row["value"] for row in raw_rows(db_path, "memories")] == ["Beijing"]


def test_a_current_database_reopens_without_a_single_write(db_path: Path) -> None:
    with MemoryStore(db_path) as store:
        memory = store.remember("alice", "city", "Beijing")
        store.remember("alice", "city", "Shanghai")
        store.storage.cold(create=True)
    files_before = _files_in(db_path.parent)
    assert set(files_before) == {"memory.db", "memory-cold.db"}
    migrations_before = raw_rows(db_path, "_sqlite_migrations")

    for _ in range(2):
        with MemoryStore(db_path) as store:
            # Reads only: none of these may write anything.
            assert store.get(memory.id).state == "superseded"
            assert len(store.list()) == 2
            store.status()
            store.changes()
            store.explain(memory.id)
            assert hot_migrations.pending(store.storage.hot) == []
            assert cold_migrations.pending(store.storage.cold(create=False)) == []

    assert _files_in(db_path.parent) == files_before
    assert raw_rows(db_path, "_sqlite_migrations") == migrations_before


def test_unwritable_location_is_a_clear_error_exit_73(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A path below a regular file can never be created, even by root.
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way")
    path = blocker / "sub" / "memory.db"
    with pytest.raises(StorageUnwritable, match="cannot create database file"):
        MemoryStore(path)
    assert main(["--db", str(path), "remember", "alice", "city", "Beijing"]) == EXIT_CANT_CREATE
    err = capsys.readouterr().err
    assert err.startswith("memkeeper: error: cannot create database file")
    assert len(err.strip().splitlines()) == 1
    assert blocker.read_text() == "in the way"


@pytest.mark.skipif(
    os.geteuid() == 0, reason="root ignores directory permissions; covered by the file case"
)
def test_a_read_only_directory_is_exit_73(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        argv = ["--db", str(locked / "memory.db"), "note", "alice", "n"]  # a command that creates
        assert main(argv) == EXIT_CANT_CREATE
        assert "cannot create database file" in capsys.readouterr().err
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o700)


@pytest.mark.slow
def test_several_processes_creating_one_new_database_at_once(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "memory.db"
    code = (
        "import sys; from memkeeper import MemoryStore\n"
        "with MemoryStore(sys.argv[1]) as s: s.remember('u', 'k' + sys.argv[2], 'v')\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(path), str(n)], stderr=subprocess.PIPE)
        for n in range(8)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    assert len(raw_rows(path, "memories")) == 8
    migrations = raw_rows(path, "_sqlite_migrations")
    assert [(row["migration_set"], row["name"]) for row in migrations] == [
        ("memkeeper", "0001_initial"),
        ("memkeeper", "0002_pending_scrubs"),
        ("memkeeper", "0003_uses"),
        ("memkeeper", "0004_incremental_vacuum"),
        ("memkeeper", "0005_fewer_indexes"),
        ("memkeeper", "0006_keywords"),
        ("memkeeper", "0007_vectors"),
        ("memkeeper", "0008_tombstones"),
        ("memkeeper", "0009_erased_values"),
    ]
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental from the start
    finally:
        conn.close()
