"""Import and export: the seed agent's agent_memory.json, and memkeeper's own JSON Lines.

Malformed files (rejected with nothing written) are in test_bad_input.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from freezegun import freeze_time
from helpers import T0, dump_databases, raw_rows

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.config import Config, ServiceSection
from memkeeper.errors import EXIT_CANT_CREATE, EXIT_DATA, InvalidInput
from memkeeper.maintenance.runner import run_once
from memkeeper.store.transfer import export_lines, import_file

DAY = timedelta(days=1)

AGENT_MEMORY = {
    "facts": {"name": "小明", "city": "Beijing", "age": 30, "ratio": 0.5},
    "notes": [
        {"time": "2026-07-01 10:00", "note": "Deliver the client report before Wednesday"},
        {"time": "2026-07-02T09:30:00+02:00", "note": "Prefers morning meetings"},
        {"note": "A note without a time"},
    ],
}


@pytest.fixture
def frozen() -> Iterator:
    with freeze_time(T0) as clock:
        yield clock


@pytest.fixture
def agent_file(tmp_path: Path) -> Path:
    path = tmp_path / "agent_memory.json"
    path.write_text(json.dumps(AGENT_MEMORY, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


def export_text(store: MemoryStore, **filters) -> str:
    return "".join(line + "\n" for line in export_lines(store, **filters))


# -- agent_memory.json ----------------------------------------------------------------------


def test_agent_memory_json_imports_facts_and_notes(
    store: MemoryStore, agent_file: Path, frozen
) -> None:
    report = import_file(store, agent_file, user_id="alice", timezone="Asia/Shanghai")

    assert report.to_dict() == {
        "format": "agent-json",
        "created": 7,
        "unchanged": 0,
        "superseded": 0,
        "conflicting": 0,
        "conflicts": [],
        "filtered_out": 0,
        "forgotten": 0,
        "restated": 0,
    }
    facts = {m.key: m for m in store.list("alice", kind="fact")}
    assert {key: m.value for key, m in facts.items()} == {
        "name": "小明",
        "city": "Beijing",
        "age": "30",
        "ratio": "0.5",
    }
    for memory in facts.values():
        assert (memory.state, memory.namespace, memory.confidence) == ("active", "", 0.9)
        assert memory.source == "import:agent_memory.json"
        assert memory.created_at == T0
    notes = {m.value: m for m in store.list("alice", kind="note")}
    # A time without a zone is read in --timezone (Shanghai, UTC+8); an offset is honoured.
    assert notes["Deliver the client report before Wednesday"].created_at == datetime(
        2026, 7, 1, 2, 0, tzinfo=UTC
    )
    assert notes["Prefers morning meetings"].created_at == datetime(2026, 7, 2, 7, 30, tzinfo=UTC)
    assert notes["A note without a time"].created_at == T0
    assert all(m.key is None and m.state == "active" for m in notes.values())
    assert {c.action for c in store.changes()} == {"create"}
    assert {c.actor for c in store.changes()} == {"cli:import"}
    assert len(store.changes()) == 7


def test_note_times_default_to_the_service_timezone(
    db_path: Path, agent_file: Path, frozen
) -> None:
    config = Config(service=ServiceSection(timezone="America/New_York"))
    with MemoryStore(db_path, config=config) as store:
        import_file(store, agent_file, user_id="alice")
        note = next(m for m in store.list("alice", kind="note") if m.value.startswith("Deliver"))
    assert note.created_at == datetime(2026, 7, 1, 14, 0, tzinfo=UTC)  # EDT is UTC-4 in July


def test_importing_the_same_agent_file_twice_changes_nothing(
    store: MemoryStore, agent_file: Path, frozen
) -> None:
    import_file(store, agent_file, user_id="alice", namespace="acme", timezone="UTC")
    before = dump_databases(store.path)
    frozen.tick(DAY)

    report = import_file(store, agent_file, user_id="alice", namespace="acme", timezone="UTC")

    assert (report.created, report.unchanged, report.superseded) == (0, 7, 0)
    assert dump_databases(store.path) == before  # not one row, not one timestamp


def test_an_agent_file_value_that_differs_supersedes_the_stored_one(
    store: MemoryStore, agent_file: Path, frozen
) -> None:
    old = store.remember("alice", "city", "Shanghai")
    frozen.tick(DAY)
    report = import_file(store, agent_file, user_id="alice")
    assert (report.created, report.superseded) == (7, 1)
    assert store.get(old.id).state == "superseded"
    assert store.recall("alice", "city").value == "Beijing"


def test_an_agent_file_needs_a_user(store: MemoryStore, agent_file: Path) -> None:
    with pytest.raises(InvalidInput, match="needs --user"):
        import_file(store, agent_file)
    assert raw_rows(store.path, "memories") == []


def test_import_command_for_an_agent_file(
    db_path: Path, agent_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--db", str(db_path), "import", str(agent_file), "--user", "alice"]
    assert main([*argv, "--timezone", "Asia/Shanghai"]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"imported {agent_file} (agent-json): 7 created, 0 already present, "
        "0 superseded an older value\n"
    )
    assert main([*argv, "--timezone", "Asia/Shanghai", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unchanged"] == 7
    assert main(["--db", str(db_path), "import", str(agent_file)]) == EXIT_DATA
    assert "needs --user" in capsys.readouterr().err


# -- JSON Lines -----------------------------------------------------------------------------


def build_varied_store(store: MemoryStore, frozen) -> None:
    """Entries in every state and with every field set: hot and cold, two users."""
    store.remember("alice", "city", "Beijing", source="chat", confidence=0.95)
    frozen.tick(DAY)
    store.remember("alice", "city", "Shanghai")  # Beijing superseded
    store.remember(
        "alice", "tone", "brief", kind="preference", namespace="acme", pinned=True, ttl_days=5
    )
    store.remember("alice", "name", '小明 "Xiao" 🐱')
    store.add_note("alice", "line one\nline two", namespace="acme")
    store.remember("bob", "city", "Lisbon", confidence=0.3)
    frozen.tick(DAY)
    store.recall("alice", "name")
    store.recall("alice", "name")
    store.remember("alice", "draft", "first")
    store.remember("alice", "draft", "second")  # first superseded, stays hot
    run_once(store, ["settle"], now=T0 + 20 * DAY)  # Beijing and "first" go cold
    frozen.move_to(T0 + 100 * DAY)
    store.recall("alice", "name")
    run_once(store, ["expire"], now=T0 + 100 * DAY)  # note: pending review
    run_once(store, ["expire"], now=T0 + 200 * DAY)  # note retired; facts pending review
    store.remember("alice", "fresh", "new")
    store.remember("alice", "draft", "third")  # "second" (pending review) superseded, hot


def test_jsonl_export_then_import_into_a_fresh_database_round_trips_every_field(
    store: MemoryStore, frozen, tmp_path: Path
) -> None:
    build_varied_store(store, frozen)
    exported = export_text(store)
    states = {json.loads(line)["state"] for line in exported.splitlines()}
    assert states == {"active", "pending_review", "superseded", "cold"}
    path = tmp_path / "export.jsonl"
    path.write_text(exported, encoding="utf-8")

    with MemoryStore(tmp_path / "fresh.db") as fresh:
        report = import_file(fresh, path)
        assert report.created == len(exported.splitlines())
        assert (report.unchanged, report.superseded, report.conflicts) == (0, 0, [])
        assert export_text(fresh) == exported
        assert fresh.list() == store.list()  # every field of every record, hot and cold
        for original in store.list():
            copy = fresh.get(original.id)
            assert copy == original
        assert {m.state for m in fresh.list(state="cold")} == {"cold"}
        assert len(fresh.list(state="cold")) == len(store.list(state="cold")) == 3


def test_the_export_has_every_field_and_nothing_else(store: MemoryStore, frozen) -> None:
    build_varied_store(store, frozen)
    for line in export_lines(store):
        record = json.loads(line)
        memory = store.get(record["id"])
        expected = memory.to_image()
        expected.pop("last_used_at")
        expected["pinned"] = bool(expected["pinned"])
        assert record == expected


def test_reimporting_an_export_into_the_same_database_changes_nothing(
    store: MemoryStore, frozen, tmp_path: Path
) -> None:
    build_varied_store(store, frozen)
    path = tmp_path / "export.jsonl"
    path.write_text(export_text(store), encoding="utf-8")
    before = dump_databases(store.path)

    report = import_file(store, path)
    assert report.created == 0
    assert report.unchanged == len(path.read_text().splitlines())
    assert report.conflicts == []
    assert dump_databases(store.path) == before


def test_jsonl_import_with_a_user_filter(store: MemoryStore, frozen, tmp_path: Path) -> None:
    build_varied_store(store, frozen)
    path = tmp_path / "export.jsonl"
    path.write_text(export_text(store), encoding="utf-8")
    bobs = len(store.list("bob"))

    with MemoryStore(tmp_path / "fresh.db") as fresh:
        report = import_file(fresh, path, user_id="alice")
        assert report.filtered_out == bobs
        assert {m.user_id for m in fresh.list()} == {"alice"}
        assert fresh.list() == store.list("alice")


def test_a_namespace_for_json_lines_is_refused(store: MemoryStore, frozen, tmp_path: Path) -> None:
    build_varied_store(store, frozen)
    path = tmp_path / "export.jsonl"
    path.write_text(export_text(store), encoding="utf-8")
    with MemoryStore(tmp_path / "fresh.db") as fresh:
        with pytest.raises(InvalidInput, match=r"--namespace applies to agent_memory\.json only"):
            import_file(fresh, path, namespace="acme")
        assert fresh.list() == []


def test_conflicting_ids_are_reported_and_left_alone(
    store: MemoryStore, frozen, tmp_path: Path
) -> None:
    build_varied_store(store, frozen)
    lines = export_text(store).splitlines()
    record = json.loads(lines[0])
    original = store.get(record["id"])
    record["value"] = "changed elsewhere"
    lines[0] = json.dumps(record)
    path = tmp_path / "changed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    before = dump_databases(store.path)

    report = import_file(store, path)

    assert report.conflicts == [
        f"line 1: id {record['id']} exists with different content; left as it is"
    ]
    assert report.created == 0
    assert report.unchanged == len(lines) - 1
    assert store.get(record["id"]) == original
    assert dump_databases(store.path) == before


def test_the_import_command_reports_conflicts_on_stderr(
    store: MemoryStore, frozen, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = store.remember("alice", "city", "Beijing")
    record = json.loads(next(export_lines(store)))
    record["confidence"] = 0.1
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(record) + "\n")
    store.close()
    assert main(["--db", str(store.path), "import", str(path)]) == 0
    captured = capsys.readouterr()
    assert "0 created, 0 already present" in captured.out
    assert f"conflict: line 1: id {memory.id} exists with different content" in captured.err


def test_an_imported_line_meets_a_different_current_value(
    store: MemoryStore, frozen, tmp_path: Path
) -> None:
    """A newer imported value supersedes the current one; an older one arrives superseded."""
    current = store.remember("alice", "city", "Shanghai")
    base = json.loads(next(export_lines(store)))

    newer = {
        **base,
        "id": "1111111111111111",
        "value": "Paris",
        "updated_at": (T0 + DAY).isoformat(),
    }
    older = {**base, "id": "2222222222222222", "key": "zone", "value": "UTC+8"}
    store.remember("alice", "zone", "UTC+1")
    older_than_current = {**older, "updated_at": (T0 - DAY).isoformat()}
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(newer) + "\n" + json.dumps(older_than_current) + "\n")
    frozen.tick(2 * DAY)

    report = import_file(store, path)

    assert (report.created, report.superseded) == (2, 2)
    assert store.get(current.id).state == "superseded"
    assert store.recall("alice", "city").value == "Paris"
    assert store.get("2222222222222222").state == "superseded"
    assert store.recall("alice", "zone").value == "UTC+1"


# -- the export command ---------------------------------------------------------------------


def test_export_command_to_stdout_and_to_a_file(
    store: MemoryStore, frozen, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_varied_store(store, frozen)
    everything = export_text(store)
    alice = export_text(store, user_id="alice")
    acme = export_text(store, namespace="acme")
    store.close()
    db = ["--db", str(store.path)]

    assert main([*db, "export"]) == 0
    assert capsys.readouterr().out == everything
    assert main([*db, "export", "--user", "alice"]) == 0
    assert capsys.readouterr().out == alice
    assert {json.loads(line)["user_id"] for line in alice.splitlines()} == {"alice"}
    assert main([*db, "export", "-n", "acme"]) == 0
    assert capsys.readouterr().out == acme
    assert {json.loads(line)["namespace"] for line in acme.splitlines()} == {"acme"}

    out = tmp_path / "alice.jsonl"
    assert main([*db, "export", "--user", "alice", "-o", str(out)]) == 0
    lines = len(alice.splitlines())
    assert capsys.readouterr().err == f"exported {lines} memories to {out}\n"
    assert out.read_text(encoding="utf-8") == alice

    out.write_text("precious")
    assert main([*db, "export", "-o", str(out)]) == EXIT_CANT_CREATE
    assert "already exists; export never overwrites" in capsys.readouterr().err
    assert out.read_text() == "precious"
    assert main([*db, "export", "-o", str(tmp_path / "no" / "dir" / "x.jsonl")]) == (
        EXIT_CANT_CREATE
    )
    assert "cannot write" in capsys.readouterr().err


@pytest.mark.both_backends  # tombstones on PostgreSQL too (issue 22, Erasure)
def test_an_old_export_or_agent_file_brings_nothing_forgotten_back(
    store: MemoryStore, agent_file: Path, tmp_path: Path, frozen
) -> None:
    """Forgets leave tombstones; an import skips what they cover, counted as forgotten:
    the erased entry's id, a key erased after the line was written, an erased user."""
    kept = store.remember("bob", "city", "Lisbon")
    note = store.add_note("bob", "the secret project is called Falcon")
    store.remember("carol", "pet", "a cat named Tofu")
    export = tmp_path / "old.jsonl"
    export.write_text(export_text(store), encoding="utf-8")
    import_file(store, agent_file, user_id="alice", timezone="Asia/Shanghai")
    frozen.tick(timedelta(days=1))
    store.forget_memory(note.id)
    store.forget_user("carol")
    store.forget("alice", "city")

    report = import_file(store, export)
    assert report.forgotten == 2 and report.created == 0 and report.unchanged == 1
    again = import_file(store, agent_file, user_id="alice", timezone="Asia/Shanghai")
    assert again.forgotten == 1 and again.created == 0  # the city, said before its forget
    assert store.recall("alice", "city") is None
    assert store.list_memories("carol") == []
    assert store.get(note.id) is None and store.get(kept.id) is not None
    # An explicit write after a forget is never blocked; a newer forget covers its line too.
    frozen.tick(timedelta(days=1))
    store.remember("alice", "city", "Shanghai")
    later = tmp_path / "later.jsonl"
    later.write_text(export_text(store, user_id="alice"), encoding="utf-8")
    store.forget("alice", "city")  # a newer forget covers that line too
    assert import_file(store, later).forgotten == 1
    assert main(["--db", str(store.path), "import", str(export)]) == 0
