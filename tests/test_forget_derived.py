"""A forget reaches everything memkeeper derived from what it erases, on both backends.

The stand-in LLM quotes what it reads (tests/quoting_llm.py): summaries repeat the user's
lines, extraction returns the city a message names, a note merge joins both notes. So after
the scenario the erased city really is in two summaries, an extracted fact, a merged note,
messages, change-log images and agent-written notes. After the forget, no byte of it is left
in any file (SQLite: both files and their WALs) or table (PostgreSQL), in any case; search,
context, history, explain and the MCP tools find nothing; and talking and summarizing again
does not bring it back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_embeddings import DIMS
from fake_llm import FakeLLM, add_session
from helpers.erasure import places_holding
from helpers.logs import capture_logs
from quoting_llm import quoting
from test_mcp_tools import calls, data
from test_merge import index_all
from test_merge_llm import NEWER, OLDER

from memkeeper import MemoryStore
from memkeeper.config import Config
from memkeeper.errors import InvalidInput
from memkeeper.maintenance.runner import run_once
from memkeeper.maintenance.undo import undo_run

pytestmark = [pytest.mark.both_backends, pytest.mark.usefixtures("api_key")]

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
CITY = "Beijing"
FORMS = [b"Beijing", b"beijing", b"BEIJING"]


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM(quoting) as server:
        yield server


def line(i: int) -> str:
    if i == 4:
        return f"I live in {CITY} and I like tea."
    if i == 10:
        return f"The weather in {CITY.upper()} was cold, I drink green tea daily."
    return f"Chat line {i} about the report format."


def open_store(db_path: Path | str, fake: FakeLLM) -> MemoryStore:
    config = Config.model_validate(
        {
            "search": {"embedding_dimensions": DIMS},
            "llm": {"base_url": fake.url, "timeout_seconds": 2.0, "max_retries": 0},
            "jobs": {"summarize": {"max_messages": 20, "keep_recent": 4}},
        }
    )
    return MemoryStore(db_path, config=config)


def summarize(store: MemoryStore, now: datetime) -> Any:
    (result,) = run_once(store, ["summarize"], now=now).results
    assert result.status == "ok", result
    return result


def residue(db_path: Path | str) -> dict[bytes, list[str]]:
    return {form: found for form in FORMS if (found := places_holding(db_path, form))}


@pytest.fixture
def scenario(db_path: Path | str, fake: FakeLLM) -> Iterator[MemoryStore]:
    """alice's city is everywhere memkeeper puts texts: two summaries (the first settled
    into cold storage), an extracted fact, a note the LLM merged from two notes (both in cold
    storage), an agent's note, messages, change-log images."""
    store = open_store(db_path, fake)
    store.remember("alice", "city", CITY)
    store.add_note("alice", f"Trip plan: fly to {CITY} in May, then Shanghai.")
    store.add_note("alice", "Prefers short reports on Fridays.")
    add_session(store, "s1", 24, user_id="alice", start=T0, text=line)
    summarize(store, T0 + timedelta(hours=1))
    add_session(store, "s1", 24, user_id="alice", start=T0 + timedelta(hours=2), text=line)
    summarize(store, T0 + timedelta(hours=3))
    store.add_note("alice", OLDER, confidence=0.7, source="session:a")
    store.add_note("alice", NEWER, confidence=0.9, source="session:b")
    index_all(store)
    (merged,) = run_once(store, ["merge"], now=T0 + timedelta(hours=4)).results
    assert merged.stats["notes_merged"] == 1, merged
    grey = store.config.jobs.settle.grey_days
    run_once(store, ["settle"], now=T0 + timedelta(days=grey + 1))
    yield store
    store.close()


def alice_values(store: MemoryStore) -> list[str]:
    return [m.value for m in store.list_memories("alice")]


def summaries(store: MemoryStore) -> list[Any]:
    return [m for m in store.list_memories("alice") if (m.key or "").startswith("summary:")]


def test_the_scenario_really_spreads_the_value(scenario: MemoryStore) -> None:
    values = alice_values(scenario)
    found = summaries(scenario)
    assert len(found) == 2 and all(CITY in s.value for s in found)
    assert {s.state for s in found} == {"active", "cold"}
    assert any(m.key == "home_city" and m.value == CITY for m in scenario.list_memories("alice"))
    merged = [m for m in scenario.list_memories("alice") if m.source.startswith("merge:")]
    assert len(merged) == 1 and CITY in merged[0].value
    assert sum(CITY in v for v in values) >= 6


def test_forget_of_the_key_reaches_every_derived_text(scenario: MemoryStore, db_path, fake) -> None:
    store = scenario
    preview = store.forget("alice", "city", dry_run=True)
    counts = preview["counts"]
    assert counts["memories"] == 1 and counts["derived_erased"] >= 3, preview
    assert counts["messages_redacted"] >= 4 and counts["entries_redacted"] == 1, preview
    kinds = {entry["kind"] for entry in preview["erase"]}
    assert kinds == {"fact", "note"} and preview["rebuild"], preview
    whys = {entry.get("why") for entry in preview["erase"]}
    assert "merged from an erased note" not in whys  # the merged note carries it itself
    assert CITY not in repr(preview)  # ids, kinds and counts: never a value
    assert residue(db_path)  # a preview changes nothing
    assert store.forget("alice", "city") == 1
    # home_city, extracted from the messages that said it, held the same value: erased too.
    assert store.recall("alice", "home_city") is None
    leftover = residue(db_path)
    assert leftover == {}, leftover
    for found in (store.search("alice", CITY), store.search("alice", "beijing")):
        assert found == [] or all(CITY.lower() not in m.value.lower() for m in found)
    context = store.context("alice", query=CITY)
    assert CITY.lower() not in str(context).lower()
    history = store.history("alice", "s1")
    assert all(CITY.lower() not in m.content.lower() for m in history)
    kept = [m for m in store.list_memories("alice") if "Trip plan" in m.value]
    assert kept and kept[0].value == "Trip plan: fly to [erased] in May, then Shanghai."
    explained = store.explain(kept[0].id)
    assert "redacted by a forget" in explained and CITY not in explained
    # Summaries are rebuilt from the redacted messages: the city does not come back.
    summarize(store, T0 + timedelta(hours=5))
    add_session(store, "s1", 24, user_id="alice", start=T0 + timedelta(hours=6), text=line)
    summarize(store, T0 + timedelta(hours=7))
    values = alice_values(store)
    assert any((m.key or "").startswith("summary:") for m in store.list_memories("alice"))
    assert all(CITY.lower() not in v.lower() for v in values), values
    assert "Prefers short reports" in " ".join(values)  # what did not carry it stays


def test_the_value_cannot_come_back_under_another_key(scenario: MemoryStore) -> None:
    store = scenario
    store.forget("alice", "city")
    with pytest.raises(InvalidInput, match="erased"):
        store.remember("alice", "residence", f"{CITY.lower()}")
    with pytest.raises(InvalidInput, match="erased"):
        store.add_note("alice", f"Lives in {CITY}")
    # Stating it again under the same key is a new fact: allowed, and lifts the block.
    store.remember("alice", "city", CITY)
    assert store.recall("alice", "city").value == CITY
    store.remember("alice", "residence", CITY)


def test_forget_of_a_summary_reaches_what_it_folded_in_and_keeps_the_facts(
    scenario: MemoryStore,
) -> None:
    store = scenario
    active = store.list_memories("alice", state="active")
    current = next(m for m in active if (m.key or "").startswith("summary:"))
    assert store.forget_memory(current.id) == 1
    notes = [m for m in store.list_memories("alice") if (m.key or "").startswith("summary:")]
    assert notes == []  # the earlier summary folded into it went too
    assert store.recall("alice", "city").value == CITY  # the facts stay
    assert store.recall("alice", "home_city").value == CITY
    # Its messages stay summarized: the summary is not written again.
    result = run_once(store, ["summarize"], now=T0 + timedelta(hours=5)).results[0]
    assert not any((m.key or "").startswith("summary:") for m in store.list_memories("alice"))
    del result


def test_another_users_same_value_is_left_alone(scenario: MemoryStore) -> None:
    store = scenario
    store.remember("bob", "city", CITY)
    store.add_note("bob", f"Bob also lives in {CITY}.")
    store.forget("alice", "city")
    bobs = sorted(m.value for m in store.list_memories("bob"))
    assert bobs == [CITY, f"Bob also lives in {CITY}."]
    store.remember("bob", "hometown", CITY)  # bob's values are not blocked by alice's forget


def test_forget_of_a_merged_note_reaches_the_notes_folded_into_it(
    scenario: MemoryStore, db_path: Path | str
) -> None:
    store = scenario
    (merged,) = [m for m in store.list_memories("alice") if m.source.startswith("merge:")]
    preview = store.forget_memory(merged.id, dry_run=True)
    assert {e["why"] for e in preview["erase"] if "why" in e} == {
        "a note merged into the erased one"
    }
    assert store.forget_memory(merged.id) == 1
    assert places_holding(db_path, b"near the river") == []
    assert store.recall("alice", "city").value == CITY  # the facts stay


def test_the_mcp_tools_preview_then_find_nothing(scenario: MemoryStore) -> None:
    store = scenario
    before = calls(store, [("forget", {"key": "city", "dry_run": True})])
    preview = data(before[0])
    assert preview["forgotten"] == 0 and preview["preview"]["counts"]["memories"] == 1
    assert CITY not in repr(preview)
    results = calls(
        store,
        [
            ("forget", {"key": "city"}),
            ("forget", {"key": "home_city"}),
            ("search", {"query": CITY}),
            ("context", {"query": CITY}),
            ("history", {"session_id": "s1"}),
            ("list_memories", {}),
        ],
    )
    assert data(results[0]) == {"forgotten": 1}
    assert data(results[1]) == {"forgotten": 0}  # it held the same value: erased with it
    for result in results[2:]:
        assert CITY.lower() not in repr(data(result)).lower()
    for memory in data(results[5])["memories"]:
        explained = data(calls(store, [("explain", {"memory_id": memory["id"]})])[0])
        assert CITY.lower() not in repr(explained).lower()


def test_forget_of_a_namespace_and_of_the_user_leave_nothing(
    scenario: MemoryStore, db_path: Path | str
) -> None:
    store = scenario
    add_session(
        store, "p1", 24, user_id="alice", namespace="proj", start=T0, text=lambda i: "Hangzhou"
    )
    store.remember("alice", "office", "Hangzhou West Lake", namespace="proj")
    summarize(store, T0 + timedelta(days=30))
    assert places_holding(db_path, b"Hangzhou")
    counts = store.forget_namespace("alice", "proj")
    assert counts["messages"] == 24 and counts["memories"] >= 2
    assert places_holding(db_path, b"Hangzhou") == []
    assert residue(db_path)  # the profile is another scope: its city stays
    store.forget_user("alice")
    assert residue(db_path) == {}
    assert places_holding(db_path, b"Prefers short reports") == []


@pytest.mark.sqlite_only
def test_backups_are_pruned_of_what_the_forget_reached(
    scenario: MemoryStore, db_path: Path, tmp_path: Path, cli
) -> None:
    backup = tmp_path / "backup"
    assert cli("backup", str(backup))[0] == 0
    assert scenario.forget("alice", "city") == 1
    assert cli("backup", "--prune-forgotten", str(backup))[0] == 0
    for path in backup.iterdir():
        data_ = path.read_bytes()
        for form in FORMS:
            assert form not in data_, (path.name, form)
    # Restored, the copy refuses the value under another key too.
    scenario.close()  # restore-backup waits for no open store
    assert cli("restore-backup", "--yes", str(backup))[0] == 0
    with MemoryStore(db_path) as restored, pytest.raises(InvalidInput, match="erased"):
        restored.remember("alice", "residence", CITY)


def test_forget_of_one_of_a_group_of_duplicates_reaches_the_group(
    db_path: Path | str, fake: FakeLLM
) -> None:
    a = "meeting with Zhang San every Friday at 10 about the budget"
    b = "weekly meeting with Zhang San on Fridays about the budget review"
    with open_store(db_path, fake) as store:
        first = store.add_note("u", a, confidence=0.9)
        second = store.add_note("u", b, confidence=0.6)
        index_all(store)
        (merged,) = run_once(store, ["merge"], now=T0).results
        assert merged.counts == {"merge": 1, "supersede": 1}
        preview = store.forget_memory(second.id, dry_run=True)
        assert [e["why"] for e in preview["erase"] if "why" in e] == [
            "merged with an erased duplicate"
        ]
        store.forget_memory(second.id)
        assert store.get(first.id) is None and store.list_memories("u") == []
        assert places_holding(db_path, b"Zhang San") == []


def test_a_projects_value_is_followed_in_that_project_only(store_plain: MemoryStore) -> None:
    store = store_plain
    store.remember("zhou", "tone", "formal", namespace="cobalt", kind="preference")
    store.remember("zhou", "tone", "formal", namespace="atlas", kind="preference")
    store.add_note("zhou", "Keep the formal register", namespace="cobalt")
    store.add_note("zhou", "Use the formal register", namespace="atlas")
    store.forget("zhou", "tone", namespace="cobalt")
    assert store.recall("zhou", "tone", namespace="atlas").value == "formal"
    notes = {m.namespace: m.value for m in store.list_memories("zhou") if m.kind == "note"}
    assert notes == {"cobalt": "Keep the [erased] register", "atlas": "Use the formal register"}
    store.add_note("zhou", "formal again", namespace="atlas")  # another project: not blocked
    with pytest.raises(InvalidInput, match="erased"):
        store.add_note("zhou", "formal again", namespace="cobalt")


@pytest.fixture
def store_plain(db_path: Path | str, fake: FakeLLM) -> Iterator[MemoryStore]:
    with open_store(db_path, fake) as store:
        yield store


def test_the_commands_preview_with_dry_run_and_change_nothing(scenario: MemoryStore, cli) -> None:
    store = scenario
    before = alice_values(store)
    code, out, _ = cli("forget", "alice", "city", "--dry-run")
    assert code == 0 and out.startswith("dry run: nothing was changed; a forget would")
    assert "a summary of messages that carried an erased value" in out
    assert "redact" in out and CITY not in out
    code, out, _ = cli("forget", "alice", "city", "--dry-run", "--json")
    assert code == 0 and json.loads(out)["counts"]["memories"] == 1
    code, out, _ = cli("forget-user", "alice", "--dry-run")  # no question asked
    assert code == 0 and "erase 48 messages" in out and "?" not in out
    assert cli("forget", "alice", "nothing-here", "--dry-run")[0] == 3
    assert alice_values(store) == before


def test_undo_of_any_earlier_run_cannot_bring_it_back(
    scenario: MemoryStore, db_path: Path | str
) -> None:
    store = scenario
    runs = [run.run_id for run in store.job_runs(limit=100)]
    assert len(runs) >= 4  # the summaries, the merge, the settle
    store.forget("alice", "city")
    now = T0 + timedelta(days=40)
    for run_id in runs:
        undo_run(store, run_id, now=now)
    assert residue(db_path) == {}
    assert all(CITY.lower() not in v.lower() for v in alice_values(store))


def test_forget_of_a_summary_leaves_no_byte_of_it(scenario: MemoryStore, db_path) -> None:
    store = scenario
    joined = b"format. / Chat line"  # only the quoting summaries join lines with " / "
    assert places_holding(db_path, joined)
    (current,) = [m for m in summaries(store) if m.state == "active"]
    store.forget_memory(current.id)
    assert places_holding(db_path, joined) == []


def test_an_import_of_an_earlier_export_brings_nothing_back(
    scenario: MemoryStore, db_path: Path | str, tmp_path: Path, cli
) -> None:
    store = scenario
    export = tmp_path / "alice.jsonl"
    assert cli("export", "--user", "alice", "--output", str(export))[0] == 0
    assert CITY.encode() in export.read_bytes()
    store.forget("alice", "city")
    code, out, _ = cli("import", str(export), "--json")
    assert code in (0, 65), out
    assert all(CITY.lower() not in v.lower() for v in alice_values(store))
    assert residue(db_path) == {}


def test_a_rebuilt_summary_folds_in_the_earlier_one_that_never_held_the_value(
    store_plain: MemoryStore, db_path: Path | str
) -> None:
    """The city is said only after the first summary: that one stays, becomes current again,
    and the rebuild folds it in with what remains of the later messages."""
    store = store_plain
    store.remember("alice", "city", CITY)
    add_session(store, "s2", 24, user_id="alice", start=T0, text=lambda i: f"Early line {i}.")
    summarize(store, T0 + timedelta(hours=1))
    later = T0 + timedelta(hours=2)
    add_session(store, "s2", 24, user_id="alice", start=later, text=line)
    summarize(store, T0 + timedelta(hours=3))
    first, current = sorted(summaries(store), key=lambda m: m.created_at)
    assert first.state == "superseded" and CITY not in first.value and CITY in current.value
    preview = store.forget("alice", "city", dry_run=True)
    assert preview["counts"]["summaries_current_again"] == 1
    store.forget("alice", "city")
    assert store.get(first.id).state == "active"
    assert "current again" in store.explain(first.id)
    summarize(store, T0 + timedelta(hours=5))
    rebuilt = [m for m in summaries(store) if m.state == "active"]
    assert len(rebuilt) == 1 and rebuilt[0].id != first.id
    assert "Early line 0" in rebuilt[0].value and "Chat line 0" in rebuilt[0].value
    assert CITY.lower() not in rebuilt[0].value.lower()
    assert residue(db_path) == {}


def test_a_cold_note_and_an_episode_are_redacted_and_no_log_line_holds_the_value(
    store_plain: MemoryStore, db_path: Path | str
) -> None:
    store = store_plain
    store.remember("alice", "city", CITY)
    note = store.add_note("alice", f"Old plan: a week in {CITY} in spring.")
    store.record_episode("alice", "plan a trip", input_summary=f"trip to {CITY}")
    jobs = store.config.jobs
    expired = datetime.now(UTC) + timedelta(days=jobs.expire.ttl_days.note + 1)
    run_once(store, ["expire"], now=expired)
    run_once(store, ["expire"], now=expired + timedelta(days=jobs.expire.review_grace_days + 1))
    assert store.get(note.id).state == "cold"
    with capture_logs() as lines:
        store.forget("alice", "city")
    assert CITY.lower() not in repr(lines).lower()
    assert store.get(note.id).value == "Old plan: a week in [erased] in spring."
    (episode,) = store.episodes("alice")
    assert episode.input_summary == "trip to [erased]"
    assert residue(db_path) == {}


def test_an_agents_memory_file_brings_no_erased_value_back(
    store_plain: MemoryStore, tmp_path: Path, cli
) -> None:
    store = store_plain
    store.remember("alice", "city", CITY)
    store.forget("alice", "city")
    agent_file = tmp_path / "agent_memory.json"
    agent_file.write_text(
        json.dumps(
            {
                "facts": {"hometown": CITY, "drink": "green tea"},
                "notes": [{"time": "2026-07-01 10:00", "note": f"Flew to {CITY}"}],
            }
        )
    )
    cli("import", str(agent_file), "--user", "alice", "--json")
    assert [m.value for m in store.list_memories("alice")] == ["green tea"]
