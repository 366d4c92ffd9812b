"""``memkeeper migrate-to postgresql://…``: a SQLite memory moves to PostgreSQL with nothing lost.

A SQLite memory with rows in every table (hot and cold entries, messages, episodes, the
change log, a tombstone, uses, job runs, vectors) is copied into a new database; the tables
then hold the same rows (ids included), the identity sequences continue past them, every
explanation reads the same on both, and the store on PostgreSQL keeps working. A target that
holds anything is refused, and nothing is written to it.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from freezegun import freeze_time
from helpers import T0, raw_rows

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.maintenance.runner import run_once
from memkeeper.storage.postgres.migrate_to import TABLES, copy_memory
from memkeeper.storage.vectors import store_vectors

DAY = timedelta(days=1)
# SQLite-only bookkeeping has no rows to compare; everything else must be identical.
COMPARED = [t for t in TABLES if t != "vectors"]


def filled_sqlite(path: Path) -> dict[str, str]:
    """A SQLite memory with rows in every table the migration copies; returns some ids."""
    with freeze_time(T0) as frozen, MemoryStore(path) as store:
        beijing = store.remember("alice", "city", "Beijing")
        frozen.tick(DAY)
        store.remember("alice", "city", "Shanghai", source="stated by the user")
        note = store.add_note("alice", "Met Bob about the Q3 report", namespace="work")
        store.remember("bob", "tone", "brief", kind="preference")
        gone = store.remember("bob", "secret", "the code is 1234")
        store.recall("alice", "city")
        store.append_message("alice", "s1", "user", "hello")
        store.append_message("alice", "s1", "assistant", "hi there")
        store.record_episode("alice", "weekly report", namespace="work")
        store.forget("bob", "secret")
        with store.storage.lock:
            store_vectors(store.storage.hot, [(note.id, "m", 2, "h", b"\x00" * 8)])
        grey = store.config.jobs.settle.grey_days
        run_once(store, ["settle"], now=T0 + (grey + 2) * DAY)
    return {"cold": beijing.id, "note": note.id, "erased": gone.id}


def source_rows(tmp_path: Path, table: str) -> list[dict[str, object]]:
    """A table of the SQLite memory (``uses`` has no rowid: by its key, as on PostgreSQL)."""
    if table != "uses":
        return raw_rows(
            tmp_path / ("memory-cold.db" if table == "cold_memories" else "memory.db"), table
        )
    conn = sqlite3.connect(tmp_path / "memory.db")
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM uses ORDER BY memory_id, day")]
    finally:
        conn.close()


def counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return {
            t: conn.execute(f"SELECT count(*) FROM memkeeper.{t}").fetchone()[0] for t in TABLES
        }


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_migrate_to_copies_every_table_with_its_ids_and_the_store_works_on(
    tmp_path: Path, pg_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "memory.db"
    ids = filled_sqlite(db)
    for table in COMPARED:
        assert source_rows(tmp_path, table), table

    code, out, err = run_cli(capsys, "--db", str(db), "migrate-to", pg_database, "--json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["explanations_compared"] >= 3
    for table in TABLES:
        pair = report["tables"][table]
        assert pair["sqlite"] == pair["postgresql"] > 0, table

    # The same rows, ids and all (raw_rows drops only what PostgreSQL alone has).
    for table in COMPARED:
        assert raw_rows(pg_database, table) == source_rows(tmp_path, table), table
    [vector] = raw_rows(pg_database, "vectors")
    assert (vector["memory_id"], bytes(vector["vector"])) == (ids["note"], b"\x00" * 8)

    with MemoryStore(db) as sqlite_store, MemoryStore(pg_database) as pg_store:
        for memory_id in (ids["cold"], ids["note"]):
            assert pg_store.explain(memory_id) == sqlite_store.explain(memory_id)
        assert pg_store.get(ids["cold"]).state == "cold"  # type: ignore[union-attr]
        assert pg_store.recall("alice", "city").value == "Shanghai"  # type: ignore[union-attr]
        assert [m.content for m in pg_store.history("alice", "s1")] == ["hello", "hi there"]
        # The identity sequences continue past the copied ids: new rows get new ids.
        last = max(row["id"] for row in raw_rows(pg_database, "changes"))
        message = pg_store.append_message("alice", "s1", "user", "again")
        assert message.id > max(m.id for m in sqlite_store.history("alice", "s1"))
        pg_store.remember("carol", "city", "Oslo")
        assert max(row["id"] for row in raw_rows(pg_database, "changes")) == last + 1


def test_a_target_with_rows_is_refused_and_nothing_is_written(
    tmp_path: Path, pg_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "memory.db"
    filled_sqlite(db)
    with MemoryStore(pg_database) as there:
        there.remember("zoe", "city", "Lima")
    before = counts(pg_database)
    held = what_the_database_holds(pg_database)

    code, out, err = run_cli(capsys, "--db", str(db), "migrate-to", pg_database)
    assert code == 73 and out == ""
    assert "is not empty (rows in memories, changes)" in err and "Nothing was written" in err
    assert len(err.strip().splitlines()) == 1
    assert counts(pg_database) == before
    assert what_the_database_holds(pg_database) == held  # its schema and rows kept
    assert counts(pg_database)["memories"] == 1


def test_a_failed_check_rolls_the_whole_copy_back(tmp_path: Path, pg_database: str) -> None:
    db = tmp_path / "memory.db"
    filled_sqlite(db)

    def refuse() -> None:
        raise RuntimeError("a check failed")

    with (
        MemoryStore(db) as source,
        MemoryStore(pg_database) as target,
        pytest.raises(RuntimeError, match="a check failed"),
    ):
        copy_memory(source.storage, target.storage, verify=refuse)
    # Nothing kept, and not even the schema that opening the target created.
    assert "memkeeper" not in what_the_database_holds(pg_database)["schemas"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            "ALTER TABLE episodes ADD COLUMN mood TEXT",
            "episodes has columns the PostgreSQL schema lacks (mood)",
        ),
        (
            "CREATE TABLE reminders (id INTEGER PRIMARY KEY, text TEXT)",
            "has tables this memkeeper does not copy (reminders)",
        ),
    ],
    ids=["column", "table"],
)
def test_what_the_target_has_no_place_for_is_refused_not_dropped(
    tmp_path: Path, pg_database: str, capsys: pytest.CaptureFixture[str], change: str, message: str
) -> None:
    db = tmp_path / "memory.db"
    filled_sqlite(db)
    conn = sqlite3.connect(db)
    conn.execute(change)  # as a newer memkeeper's schema might have
    conn.commit()
    conn.close()
    code, out, err = run_cli(capsys, "--db", str(db), "migrate-to", pg_database)
    assert code == 74 and out == ""
    assert message in err and "nothing was kept" in err
    assert "memkeeper" not in what_the_database_holds(pg_database)["schemas"]


def test_without_vectors_the_embeddings_stay_behind(
    tmp_path: Path, pg_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "memory.db"
    filled_sqlite(db)
    code, out, _ = run_cli(capsys, "--db", str(db), "migrate-to", pg_database, "--no-vectors")
    assert code == 0
    assert "verified: every table's row count" in out
    assert counts(pg_database)["vectors"] == 0 and counts(pg_database)["memories"] > 0


def test_the_url_must_be_postgresql_and_the_source_sqlite(
    tmp_path: Path, pg_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "memory.db"
    MemoryStore(db).close()
    code, _, err = run_cli(capsys, "--db", str(db), "migrate-to", str(tmp_path / "other.db"))
    assert code == 2 and "postgresql:// URL" in err
    MemoryStore(pg_database).close()
    code, _, err = run_cli(capsys, "--db", pg_database, "migrate-to", pg_database)
    assert code == 2 and "already on PostgreSQL" in err
    code, _, err = run_cli(capsys, "--db", str(tmp_path / "none.db"), "migrate-to", pg_database)
    assert code == 66


def what_the_database_holds(url: str) -> dict[str, list[str]]:
    """Its schemas, extensions and tables, as a failed migrate-to must leave them."""
    with psycopg.connect(url) as conn:
        return {
            "schemas": sorted(r[0] for r in conn.execute("SELECT nspname FROM pg_namespace")),
            "extensions": sorted(r[0] for r in conn.execute("SELECT extname FROM pg_extension")),
            "tables": sorted(
                f"{r[0]}.{r[1]}"
                for r in conn.execute(
                    "SELECT schemaname, tablename FROM pg_tables"
                    " WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
                )
            ),
        }


@pytest.mark.parametrize("failure", ["explanations", "table", "error"])
def test_a_migrate_to_that_rolls_back_leaves_the_target_as_it_found_it(
    tmp_path: Path,
    pg_database: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    failure: str,
) -> None:
    """Issue 22: opening the target created memkeeper's schema (and the extensions) before
    the copy; a copy that does not commit must take them away again."""
    from memkeeper.cli import migrate_cmd
    from memkeeper.storage.postgres import migrate_to

    db = tmp_path / "memory.db"
    filled_sqlite(db)
    before = what_the_database_holds(pg_database)
    assert "memkeeper" not in before["schemas"]
    if failure == "explanations":  # the sampled explanations differ: exit 74
        calls = iter(range(10_000))
        monkeypatch.setattr(migrate_cmd, "_explanation", lambda store, i: str(next(calls)))
        expected = 74
    elif failure == "table":  # the source has a table the copy has no place for: exit 74
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE reminders (id INTEGER PRIMARY KEY, text TEXT)")
        conn.commit()
        conn.close()
        expected = 74
    else:  # any other failure once the schema exists (here: the identities step)

        def broken(pg: object) -> None:
            raise psycopg.errors.QueryCanceled("canceling statement due to user request")

        monkeypatch.setattr(migrate_to, "_continue_identities", broken)
        expected = 74  # a statement PostgreSQL refused, with its SQLSTATE
    code, out, err = run_cli(capsys, "--db", str(db), "migrate-to", pg_database)
    assert (code, out) == (expected, ""), err
    assert what_the_database_holds(pg_database) == before
    # ...and it is still a target migrate-to accepts.
    monkeypatch.undo()
    if failure == "table":
        conn = sqlite3.connect(db)
        conn.execute("DROP TABLE reminders")
        conn.commit()
        conn.close()
    code, _, err = run_cli(capsys, "--db", str(db), "migrate-to", pg_database)
    assert (code, err) == (0, "")


@pytest.mark.parametrize("premade", [False, True], ids=["new-schema", "empty-schema"])
def test_a_library_copy_that_fails_midway_leaves_the_target_as_it_found_it(
    tmp_path: Path,
    pg_database: str,
    monkeypatch: pytest.MonkeyPatch,
    premade: bool,
) -> None:
    """Issue 22: copy_memory itself, not only the CLI, takes away what opening the target
    created (the schema or its tables, the extensions) when the copy fails after some tables
    went in; what else the database holds (another schema, a table of public) is untouched."""
    from memkeeper.storage.postgres import migrate_to

    db = tmp_path / "memory.db"
    filled_sqlite(db)
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA other_app")
        conn.execute("CREATE TABLE other_app.orders (id int PRIMARY KEY, item text)")
        conn.execute("INSERT INTO other_app.orders VALUES (1, 'tea'), (2, 'cake')")
        conn.execute("CREATE TABLE public.notes (body text)")
        conn.execute("INSERT INTO public.notes VALUES ('keep me')")
        if premade:  # made by its owner for memkeeper, empty: stays, emptied again
            conn.execute("CREATE SCHEMA memkeeper")
    before = what_the_database_holds(pg_database)
    copied: list[str] = []
    real_copy_table = migrate_to._copy_table

    def copy_then_fail(db_: object, pg: object, table: str) -> None:
        real_copy_table(db_, pg, table)  # type: ignore[arg-type]
        copied.append(table)
        if len(copied) == 3:
            raise psycopg.errors.QueryCanceled("canceling statement due to user request")

    monkeypatch.setattr(migrate_to, "_copy_table", copy_then_fail)
    with MemoryStore(db) as source, MemoryStore(pg_database) as target:
        assert "memkeeper.memories" in what_the_database_holds(pg_database)["tables"]
        with pytest.raises(psycopg.errors.QueryCanceled):
            migrate_to.copy_memory(source.storage, target.storage)
        assert len(copied) == 3  # rows of three tables were in when it failed
        assert what_the_database_holds(pg_database) == before
    assert what_the_database_holds(pg_database) == before
    assert ("memkeeper" in before["schemas"]) is premade
    with psycopg.connect(pg_database) as conn:
        assert conn.execute("SELECT id, item FROM other_app.orders ORDER BY id").fetchall() == [
            (1, "tea"),
            (2, "cake"),
        ]
        assert conn.execute("SELECT body FROM public.notes").fetchall() == [("keep me",)]
    # ...and the same target then takes the copy.
    monkeypatch.undo()
    with MemoryStore(db) as source, MemoryStore(pg_database) as target:
        result = migrate_to.copy_memory(source.storage, target.storage)
    assert all(a == b for a, b in result.values()) and result["memories"][0] > 0
