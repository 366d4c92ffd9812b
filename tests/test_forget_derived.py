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

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM, add_session, summarize_config
from helpers.erasure import places_holding
from quoting_llm import quoting

from memkeeper import MemoryStore
from memkeeper.errors import InvalidInput
from memkeeper.maintenance.runner import run_once

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
    config = summarize_config(fake.url, job={"max_messages": 20, "keep_recent": 4})
    return MemoryStore(db_path, config=config)


def summarize(store: MemoryStore, now: datetime) -> Any:
    (result,) = run_once(store, ["summarize"], now=now).results
    assert result.status == "ok", result
    return result


def residue(db_path: Path | str) -> dict[bytes, list[str]]:
    return {form: found for form in FORMS if (found := places_holding(db_path, form))}


@pytest.fixture
def scenario(db_path: Path | str, fake: FakeLLM) -> Iterator[MemoryStore]:
    """alice's city is everywhere memkeeper puts texts."""
    store = open_store(db_path, fake)
    store.remember("alice", "city", CITY)
    store.add_note("alice", f"Trip plan: fly to {CITY} in May, then Shanghai.")
    store.add_note("alice", "Prefers short reports on Fridays.")
    add_session(store, "s1", 24, user_id="alice", start=T0, text=line)
    summarize(store, T0 + timedelta(hours=1))
    add_session(store, "s1", 24, user_id="alice", start=T0 + timedelta(hours=2), text=line)
    summarize(store, T0 + timedelta(hours=3))
    yield store
    store.close()


def alice_values(store: MemoryStore) -> list[str]:
    return [m.value for m in store.list_memories("alice")]


def test_the_scenario_really_spreads_the_value(scenario: MemoryStore) -> None:
    values = alice_values(scenario)
    summaries = [m for m in scenario.list_memories("alice") if (m.key or "").startswith("summary:")]
    assert len(summaries) == 2 and all(CITY in s.value for s in summaries)
    assert any(m.key == "home_city" and m.value == CITY for m in scenario.list_memories("alice"))
    assert sum(CITY in v for v in values) >= 4


def test_forget_of_the_key_reaches_every_derived_text(scenario: MemoryStore, db_path, fake) -> None:
    store = scenario
    preview = store.forget("alice", "city", dry_run=True)
    counts = preview["counts"]
    assert counts["memories"] == 1 and counts["derived_erased"] >= 3, preview
    assert counts["messages_redacted"] >= 4 and counts["entries_redacted"] == 1, preview
    kinds = {entry["kind"] for entry in preview["erase"]}
    assert kinds == {"fact", "note"} and preview["rebuild"], preview
    assert CITY not in repr(preview)  # ids, kinds and counts: never a value
    assert residue(db_path)  # a preview changes nothing
    assert store.forget("alice", "city") == 1
    # home_city was extracted from messages that said it; it carries the value too.
    store.forget("alice", "home_city")
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
