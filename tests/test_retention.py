"""Retention (issue 10, "the database is bounded"): the retain job, undo's window, cold purge,
free pages returned, the auto-vacuum migration and what status says about size.

Every test freezes the clock and jumps: a year is a ``move_to``.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time
from helpers import current_images, locations, raw_rows, replay
from test_migrations import build_at_step, fill_0001

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.config import Config, parse_config
from memkeeper.errors import InvalidInput
from memkeeper.maintenance.runner import run_once
from memkeeper.maintenance.undo import undo_run
from memkeeper.paths import cold_path_for
from memkeeper.storage import job_runs, transitions
from memkeeper.storage.forgetting import purge_pending_indexes
from memkeeper.storage.retention import KEPT_FIELDS
from memkeeper.storage.sqlite.schema import COLD, HOT, cold_migrations, hot_migrations
from memkeeper.storage.transitions import reconcile_now

pytestmark = pytest.mark.both_backends

START = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def config_with(**retain: Any) -> Config:
    return parse_config({"jobs": {"retain": retain}}, Path("config.toml"))


def retain(store: MemoryStore, **options: Any) -> dict[str, Any]:
    result = run_once(store, ["retain"], **options).results[0]
    assert result.status == "ok", result.error
    return {"counts": result.counts, "stats": result.stats, "run_id": result.run_id}


def images_of(db_path: Path) -> list[tuple[str, Any, Any]]:
    """(action, before, after) of every change-log row, images decoded."""
    return [
        (
            row["action"],
            json.loads(row["before"]) if row["before"] else None,
            json.loads(row["after"]) if row["after"] else None,
        )
        for row in raw_rows(db_path, "changes")
    ]


def pages(path: Path) -> tuple[int, int]:
    """(page_count, freelist_count) of a file, read from outside."""
    conn = sqlite3.connect(path)
    try:
        return (
            conn.execute("PRAGMA page_count").fetchone()[0],
            conn.execute("PRAGMA freelist_count").fetchone()[0],
        )
    finally:
        conn.close()


# -- thinning -------------------------------------------------------------------------------


def test_thinning_keeps_explain_and_log_working_and_tombstones_whole(db_path: Path) -> None:
    with freeze_time(START) as clock:
        store = MemoryStore(db_path)
        city = store.remember("alice", "city", "Beijing", source="chat", confidence=0.95).id
        clock.move_to(START + DAY)
        store.recall("alice", "city")
        store.recall("alice", "city")
        clock.move_to(START + 2 * DAY)
        store.remember("alice", "city", "Beijing", confidence=0.99)  # re-confirmed
        store.remember("alice", "drink", "tea")
        store.forget("alice", "drink")
        clock.move_to(START + 200 * DAY)
        run_once(store, ["expire"])  # city expires: a row of a run
        explained = store.explain(city)
        logged = [c.to_dict() for c in store.changes()]
        tombstone = raw_rows(db_path, "changes")[-2]
        assert tombstone["action"] == "forget"

        clock.move_to(START + 300 * DAY)
        assert retain(store)["stats"]["thinned_rows"] == 0  # nothing is a year old yet

        clock.move_to(START + 200 * DAY + 366 * DAY)
        done = retain(store)
        assert done["stats"]["thinned_rows"] == 3  # create, reconfirm, expire
        for action, before, after in images_of(db_path):
            for image in (before, after):
                if image is not None:
                    assert image["thinned"] is True
                    assert "created_at" not in image and "last_used_at" not in image
            if action == "create":
                assert after["value"] == "Beijing" and after["confidence"] == 0.95
            elif before is not None:
                assert "value" not in before and "value" not in (after or {})
        # Explain reads the same; the log still names each entry; the tombstone is untouched.
        assert store.explain(city) == explained
        assert "value 'Beijing', confidence 0.95" in explained
        assert "confidence 0.95 → 0.99" in explained and "expired" in explained
        assert "recalled 2 times" in explained
        after = [c.to_dict() for c in store.changes()]
        assert [(c["id"], c["action"], c["reason"], c["run_id"]) for c in after] == [
            (c["id"], c["action"], c["reason"], c["run_id"]) for c in logged
        ]
        assert raw_rows(db_path, "changes")[-2] == tombstone
        # A second run starts where the first stopped and finds nothing to do.
        again = retain(store)
        assert again["stats"]["thinned_rows"] == 0
        assert again["stats"]["thinned_through"] >= done["stats"]["thinned_through"] > 0
        store.close()


def test_a_dry_run_counts_what_it_would_thin_and_writes_nothing(db_path: Path) -> None:
    with freeze_time(START) as clock:
        store = MemoryStore(db_path)
        store.remember("alice", "city", "Beijing")
        clock.move_to(START + 400 * DAY)
        before = raw_rows(db_path, "changes")
        result = run_once(store, ["retain"], dry_run=True).results[0]
        assert result.stats["thinned_rows"] == 1
        assert raw_rows(db_path, "changes") == before
        store.close()


def test_the_next_run_starts_past_the_highest_watermark_compared_as_a_number(
    db_path: Path,
) -> None:
    """``thinned_through`` is read back as a number: 10 is past 9 (as text, "9" > "10")."""
    with MemoryStore(db_path) as store:
        for index, mark in enumerate((9, 10, 2)):
            run_id = f"20260101T00000{index}Z-retain-000{index}"
            job_runs.record_start(store.storage, run_id, "retain", "manual", None, START)
            job_runs.record_end(
                store.storage,
                run_id,
                finished_at=START,
                status="ok",
                counts={"stats": {"thinned_through": mark, "thinned_rows": 0}},
                error=None,
            )
        assert job_runs.retain_thinned_through(store.storage.hot) == 10


def test_a_thinned_image_keeps_the_kept_fields_with_their_types(db_path: Path) -> None:
    with freeze_time(START) as clock:
        store = MemoryStore(db_path)
        store.remember("alice", "city", "Beijing", source="chat", confidence=0.95)
        store.remember("alice", "city", "Shanghai", confidence=0.6)  # supersedes
        clock.move_to(START + 400 * DAY)
        assert retain(store)["stats"]["thinned_rows"] == 3  # two creations, one supersede
        images = images_of(db_path)
        store.close()
    created = [after for action, _before, after in images if action == "create"]
    assert [(a["value"], a["confidence"], a["thinned"]) for a in created] == [
        ("Beijing", 0.95, True),
        ("Shanghai", 0.6, True),
    ]
    (before, after) = next((b, a) for action, b, a in images if action == "supersede")
    assert before["state"] == "active" and after["state"] == "superseded"
    assert before["access_count"] == 0 and before["cold_reason"] is None
    assert "value" not in before and "value" not in after
    assert set(before) == {*KEPT_FIELDS, "thinned"}


# -- undo and its window --------------------------------------------------------------------


def test_undo_of_a_thinned_run_refuses_clearly_while_a_recent_one_works(db_path: Path) -> None:
    with freeze_time(START) as clock:
        store = MemoryStore(db_path)
        store.remember("alice", "old", "x")
        clock.move_to(START + 100 * DAY)
        store.remember("alice", "new", "y")
        clock.move_to(START + 200 * DAY)
        old_run = run_once(store, ["expire"]).results[0].run_id  # expires "old"
        clock.move_to(START + 200 * DAY + 300 * DAY)
        store.recall("alice", "old")  # renewed: active again
        recent_run = run_once(store, ["expire"]).results[0].run_id
        clock.move_to(START + 200 * DAY + 370 * DAY)
        retain(store)

        with pytest.raises(InvalidInput, match="older than the undo window of 365 days") as err:
            undo_run(store, old_run)
        assert "thinned" in str(err.value) and old_run in str(err.value)
        with pytest.raises(InvalidInput, match="undo window"):
            undo_run(store, old_run, dry_run=True)
        report = undo_run(store, recent_run)
        assert report.reverted and not report.conflicts
        store.close()


def test_undo_days_keeps_a_runs_rows_whole_longer_than_other_rows(db_path: Path) -> None:
    config = config_with(full_images_days=100, undo_days=300)
    with freeze_time(START) as clock:
        store = MemoryStore(db_path, config=config)
        store.remember("alice", "city", "Beijing")
        clock.move_to(START + 200 * DAY)
        run_id = run_once(store, ["expire"]).results[0].run_id
        clock.move_to(START + 200 * DAY + 150 * DAY)
        retain(store)
        actions = {action: after for action, _before, after in images_of(db_path)}
        assert actions["create"]["thinned"] is True  # an agent's row: 100 days
        assert "thinned" not in actions["expire"]  # a run's row: 300 days
        before = current_images(store)
        assert undo_run(store, run_id).reverted
        assert current_images(store) != before

        clock.move_to(START + 200 * DAY + 301 * DAY)
        retain(store)
        with pytest.raises(InvalidInput, match="undo window of 300 days"):
            undo_run(store, run_id)
        store.close()


def test_the_cli_says_why_an_old_run_cannot_be_undone(db_path: Path, capsys) -> None:
    with freeze_time(START) as clock:
        with MemoryStore(db_path) as store:
            store.remember("alice", "city", "Beijing")
            clock.move_to(START + 200 * DAY)
            run_id = run_once(store, ["expire"]).results[0].run_id
            clock.move_to(START + 600 * DAY)
            retain(store)
        assert main(["--db", str(db_path), "undo", run_id]) == 65
        err = capsys.readouterr().err
        assert "can no longer be undone" in err and "undo window" in err


# -- cold purge -----------------------------------------------------------------------------


def _superseded(db_path: Path, config: Config | None = None) -> tuple[MemoryStore, list[str]]:
    """A store with three superseded values (settle retires them 14 days later)."""
    store = MemoryStore(db_path, config=config)
    for key in ("a", "b", "c"):
        store.remember("alice", key, "v1")
        store.remember("alice", key, "v2")  # v1 superseded
    return store, [m.id for m in store.list(state="superseded")]


def test_cold_purge_is_off_by_default(db_path: Path) -> None:
    with freeze_time(START) as clock:
        store, ids = _superseded(db_path)
        clock.move_to(START + 15 * DAY)
        run_once(store, ["settle"])
        clock.move_to(START + 3000 * DAY)
        done = retain(store)
        assert done["counts"] == {}
        assert all(locations(db_path)[i] == ["cold"] for i in ids)
        store.close()


def test_cold_purge_removes_old_cold_entries_each_one_logged(db_path: Path) -> None:
    config = config_with(cold_purge_days=30)
    with freeze_time(START) as clock:
        store, ids = _superseded(db_path, config)
        clock.move_to(START + 15 * DAY)
        run_once(store, ["settle"])
        store.recall("alice", "a")  # a use of the current value, not of the retired ones
        clock.move_to(START + 40 * DAY)
        assert retain(store)["counts"] == {}  # retired 25 days ago: not yet
        clock.move_to(START + 15 * DAY + 31 * DAY)
        preview = run_once(store, ["retain"], dry_run=True).results[0]
        assert preview.counts == {"purge": 3} and all(locations(db_path)[i] for i in ids)

        done = retain(store)
        assert done["counts"] == {"purge": 3}
        assert not any(i in locations(db_path) for i in ids)
        purges = store.changes(action="purge")
        assert {c.memory_id for c in purges} == set(ids)
        assert {c.actor for c in purges} == {"job:retain"}
        assert {c.reason for c in purges} == {"retired 31 days ago; cold purge after 30 days"}
        assert all(c.after is None and c.before["state"] == "cold" for c in purges)
        assert "purged from cold storage" in store.explain(ids[0])
        assert replay(store) == current_images(store)
        # Undone like any run, within its window: back in cold storage.
        undo_run(store, done["run_id"])
        assert all(locations(db_path)[i] == ["cold"] for i in ids)
        assert replay(store) == current_images(store)
        store.close()


@pytest.mark.sqlite_only  # the two-file protocol (test_transitions crashes both backends)
def test_a_purge_interrupted_after_its_commit_is_finished_by_the_next_reconcile(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_with(cold_purge_days=30)
    with freeze_time(START) as clock:
        store, ids = _superseded(db_path, config)
        clock.move_to(START + 15 * DAY)
        run_once(store, ["settle"])
        clock.move_to(START + 60 * DAY)

        def crash(step: str) -> None:
            if step == "hot-committed":
                raise KeyboardInterrupt(step)

        monkeypatch.setattr(transitions, "step_hook", crash)
        with pytest.raises(KeyboardInterrupt):
            retain(store)
        monkeypatch.setattr(transitions, "step_hook", lambda step: None)
        # The purge is logged; the cold copies are still there, marked in flight...
        assert len(store.changes(action="purge")) == 3
        assert all(locations(db_path)[i] == ["cold"] for i in ids)
        # ...and the next reconcile (every job run starts with one) removes them.
        reconcile_now(store.storage)
        assert not any(i in locations(db_path) for i in ids)
        assert replay(store) == current_images(store)
        store.close()


# -- free space -----------------------------------------------------------------------------


@pytest.mark.sqlite_only  # pages of the files
def test_fill_and_forget_cycles_do_not_grow_the_files(db_path: Path) -> None:
    big = "x" * 3000
    sizes = []
    with freeze_time(START) as clock:
        store = MemoryStore(db_path)
        for cycle in range(6):
            clock.move_to(START + cycle * DAY)
            user = f"user{cycle}"
            for index in range(150):
                store.remember(user, f"k{index}", f"{big}{cycle}-{index}")
            store.forget_user(user)
            run_once(store, ["settle"])  # the night's settle rewrites the keyword index
            retain(store)
            store.storage.checkpoint()
            count, free = pages(db_path)
            sizes.append((count, free, db_path.stat().st_size))
        store.close()
    assert all(free <= 2 for _count, free, _size in sizes), sizes
    assert max(count for count, _, _ in sizes[2:]) <= sizes[1][0] + 8, sizes


@pytest.mark.sqlite_only  # SQLite's freelist and file sizes
def test_retain_returns_the_pages_thinning_and_purging_freed(db_path: Path) -> None:
    config = config_with(cold_purge_days=30, full_images_days=30)
    cold = cold_path_for(db_path)
    with freeze_time(START) as clock:
        store = MemoryStore(db_path, config=config)
        for index in range(200):
            store.remember("alice", f"k{index}", "v" * 2000)
            store.remember("alice", f"k{index}", "w" * 2000)
        clock.move_to(START + 15 * DAY)
        run_once(store, ["settle"])  # 200 values retired to cold storage
        store.storage.checkpoint()
        hot_before, cold_before = pages(db_path)[0], pages(cold)[0]
        cold_bytes = cold.stat().st_size
        clock.move_to(START + 100 * DAY)
        done = retain(store)
        assert done["counts"] == {"purge": 200}
        assert done["stats"]["released_pages_hot"] > 0 and done["stats"]["free_pages_hot"] == 0
        assert done["stats"]["released_pages_cold"] > 0
        assert done["stats"]["free_pages_cold"] == 0
        store.storage.checkpoint()
        assert cold.stat().st_size < cold_bytes / 4  # the job run's checkpoint cut the file
        store.close()
    assert pages(db_path) == (pages(db_path)[0], 0) and pages(db_path)[0] < hot_before
    assert pages(cold)[1] == 0 and pages(cold)[0] < cold_before / 4


@pytest.mark.sqlite_only  # PRAGMA incremental_vacuum
def test_vacuum_pages_bounds_what_one_run_returns(db_path: Path) -> None:
    config = config_with(vacuum_pages=10)
    with freeze_time(START):
        store = MemoryStore(db_path, config=config)
        for index in range(100):
            store.remember("alice", f"k{index}", "v" * 3000)
        store.forget_user("alice")
        # The keyword index's rewrite that the forget leaves to the next job run, done now:
        # the pages it frees would be counted below as well.
        purge_pending_indexes(store.storage)
        conn = store.storage.hot.conn
        conn.execute("CREATE TABLE filler (x)")  # free pages that survive a scrub's rebuild
        conn.executemany("INSERT INTO filler VALUES (?)", [("f" * 3000,)] * 100)
        conn.execute("DROP TABLE filler")
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        assert free > 20
        done = retain(store)
        assert done["stats"]["released_pages_hot"] == 10
        assert done["stats"]["free_pages_hot"] == free - 10
        store.close()


# -- migration ------------------------------------------------------------------------------


def _auto_vacuum(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA auto_vacuum").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.sqlite_only  # PRAGMA auto_vacuum of the files
def test_new_files_are_incremental_from_the_start(db_path: Path) -> None:
    with MemoryStore(db_path) as store:
        store.storage.cold(create=True)
    assert _auto_vacuum(db_path) == 2
    assert _auto_vacuum(cold_path_for(db_path)) == 2


@pytest.mark.sqlite_only  # a SQLite migration step (auto_vacuum)
def test_the_migration_converts_an_old_file_keeping_its_rows(db_path: Path) -> None:
    before_step = HOT.steps[HOT.steps.index("0004_incremental_vacuum") - 1]
    db = build_at_step(db_path, HOT, before_step)
    ids = fill_0001(db)
    db.conn.close()
    cold = cold_path_for(db_path)
    cold_db = build_at_step(cold, COLD, "0001_initial")
    cold_db["cold_memories"].insert(
        {**raw_rows(db_path, "memories")[0], "id": "c000000000000001", "state": "cold",
         "cold_reason": "expired", "retired_at": "2026-01-01T09:00:00+00:00"}
    )  # fmt: skip
    cold_db.conn.close()
    assert _auto_vacuum(db_path) == 0 and _auto_vacuum(cold) == 0
    rows = raw_rows(db_path, "memories")

    with MemoryStore(db_path) as store:
        assert hot_migrations.pending(store.storage.hot) == []
        assert cold_migrations.pending(store.storage.cold(create=False)) == []
        assert store.get(ids["active"]).value == "Beijing"
        assert store.get("c000000000000001").state == "cold"
    assert _auto_vacuum(db_path) == 2 and _auto_vacuum(cold) == 2
    assert raw_rows(db_path, "memories") == rows
    names = [row["name"] for row in raw_rows(db_path, "_sqlite_migrations")]
    assert names == list(HOT.steps)


@pytest.mark.sqlite_only  # a SQLite migration step (auto_vacuum)
def test_a_conversion_done_but_not_recorded_is_finished_as_a_no_op(db_path: Path) -> None:
    """A crash between the VACUUM and the record of its step: the next open records it."""
    before_step = HOT.steps[HOT.steps.index("0004_incremental_vacuum") - 1]
    db = build_at_step(db_path, HOT, before_step)
    fill_0001(db)
    db.conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    db.conn.execute("VACUUM")
    db.conn.close()
    with MemoryStore(db_path) as store:
        assert hot_migrations.pending(store.storage.hot) == []
        assert len(store.list()) == 3
    assert _auto_vacuum(db_path) == 2


# -- status ---------------------------------------------------------------------------------


@pytest.mark.sqlite_only  # pages, WAL file and file sizes
def test_status_shows_sizes_row_counts_and_warns_past_its_limits(
    db_path: Path, tmp_path: Path, capsys
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[status]\nwarn_changes_rows = 100\nwarn_changes_mb = 1\nwarn_wal_mb = 1\n")
    base = ["--db", str(db_path), "--config", str(config), "--now", "2026-01-01T09:00:00Z"]
    with freeze_time(START), MemoryStore(db_path) as store:
        store.remember("alice", "city", "Beijing")
        data = store.status()
        hot = data["files"]["hot"]
        assert hot["bytes"]["db"] > 0 and hot["pages"]["auto_vacuum"] == 2
        assert hot["tables"]["memories"] == {"rows": 1, "bytes": hot["tables"]["memories"]["bytes"]}
        assert hot["tables"]["changes"]["rows"] == 1 and hot["tables"]["changes"]["bytes"] > 0
        assert data["files"]["cold"]["tables"] == {} and data["warnings"] == []

        for index in range(300):  # ~2.5 MiB of notes: past every limit of the config above
            store.add_note("alice", f"note {index} " + "n" * 8000)
        # This store's open connection keeps the write-ahead log from being removed.
        assert Path(f"{db_path}-wal").stat().st_size > 1024 * 1024
        assert main([*base, "status"]) == 0
        out = capsys.readouterr().out
        assert main([*base, "status", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
    assert f"database:  {db_path} (" in out and ", WAL " in out
    assert re.search(r"^  changes +301 rows ", out, re.M)
    assert re.search(r"^  memories +301 rows ", out, re.M)
    assert "warning:   the change log holds 301 rows, more than [status] warn_changes_rows" in out
    assert "warning:   the change log takes" in out and "warn_changes_mb (1 MiB)" in out
    assert f"warning:   the write-ahead log of {db_path} is" in out
    # --json: today's keys, and the new ones.
    assert {"counts", "messages", "episodes", "files", "last_runs", "jobs", "service"} <= set(data)
    assert data["files"]["hot"]["path"] == str(db_path) and data["files"]["hot"]["bytes"]["db"]
    assert data["files"]["hot"]["tables"]["changes"]["rows"] == 301
    assert len(data["warnings"]) == 3


@pytest.mark.sqlite_only  # SQLite's query plans (EXPLAIN QUERY PLAN of traced statements)
def test_retain_finds_its_rows_through_indexes(db_path: Path) -> None:
    config = config_with(cold_purge_days=30, full_images_days=30)
    with freeze_time(START) as clock:
        store, _ids = _superseded(db_path, config)
        clock.move_to(START + 15 * DAY)
        run_once(store, ["settle"])
        clock.move_to(START + 100 * DAY)
        traced: dict[str, list[str]] = {"hot": [], "cold": []}
        files = {"hot": store.storage.hot.conn, "cold": store.storage.cold(create=False).conn}
        for name, conn in files.items():
            conn.set_trace_callback(traced[name].append)
        assert retain(store)["counts"] == {"purge": 3}
        for conn in files.values():
            conn.set_trace_callback(None)
        scans = []
        for name, conn in files.items():
            for sql in traced[name]:
                if not sql.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE")):
                    continue
                for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"):
                    if re.match(r"SCAN (changes|memories|cold_memories|uses)\b", row[3]):
                        scans.append((sql, row[3]))
        assert any("cold_by_retired" in sql or "retired_at" in sql for sql in traced["cold"])
        assert scans == []
        store.close()
