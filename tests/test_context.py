"""context(): the small ranked prompt prefill (seed 003 §3.3, §4.1) — at most 10 active,
high-confidence entries, ranked by the retention score written down in the README, rendered
as prompt text, without marking anything as used."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta

import pytest
from freezegun import freeze_time
from helpers import T0, dump_databases
from helpers.databases import is_postgres

from memkeeper import Context, Memory, MemoryStore
from memkeeper.config import Config, ContextSection
from memkeeper.errors import InvalidInput
from memkeeper.storage.transitions import Transition, apply, cold_image, hot_image

pytestmark = pytest.mark.both_backends

DAY = timedelta(days=1)


@pytest.fixture
def frozen() -> Iterator:
    with freeze_time(T0) as clock:
        yield clock


def readme_score(memory: Memory, now) -> float:
    """The README's formula, written out independently of memkeeper.scoring."""
    confirmed_days = (now - memory.updated_at) / DAY
    score = 0.4 * memory.confidence + 0.2 * 0.5 ** (confirmed_days / 90)
    if memory.last_accessed_at is not None:
        score += 0.25 * 0.5 ** (((now - memory.last_accessed_at) / DAY) / 30)
    score += 0.15 * min(1.0, math.log(1 + memory.access_count) / math.log(1 + 20))
    return score


def test_an_empty_context(store: MemoryStore) -> None:
    context = store.context("alice")
    assert isinstance(context, Context)
    assert (context.memories, context.text) == ([], "")


def test_only_active_confident_entries_of_the_user_and_namespace(
    store: MemoryStore, frozen
) -> None:
    keep = {
        store.remember("alice", "city", "Shanghai", confidence=0.95).id,
        store.remember("alice", "tone", "brief", kind="preference", confidence=0.7).id,
        store.add_note("alice", "call the client", confidence=0.8).id,
    }
    store.remember("alice", "guess", "maybe", confidence=0.69)  # below min_confidence
    store.remember("alice", "city", "Beijing")  # supersedes Shanghai...
    store.remember("alice", "city", "Shanghai", confidence=0.95)  # ...which is revived
    store.remember("alice", "project", "acme only", namespace="acme")
    store.remember("bob", "city", "Lisbon")
    pending = store.remember("alice", "pending", "under review")
    retired = store.remember("alice", "retired", "in cold storage")
    now = store.now()
    images = store.storage.hot_images([pending.id, retired.id])
    apply(
        store.storage,
        [
            Transition(pending.id, images[pending.id],
                       hot_image(images[pending.id], "pending_review", now), "expire", "test"),
            Transition(retired.id, images[retired.id],
                       cold_image(images[retired.id], "expired", now), "retire", "test"),
        ],
        actor="test",
        now=now,
    )  # fmt: skip
    assert store.get(pending.id).state == "pending_review"
    assert store.get(retired.id).state == "cold"

    context = store.context("alice")
    assert {m.id for m in context.memories} == keep
    assert all(m.state == "active" for m in context.memories)
    acme = store.context("alice", namespace="acme").memories
    assert {m.id for m in acme} == keep | {m.id for m in acme if m.value == "acme only"}
    assert len(acme) == 4  # the project's entry and the profile's three
    assert [m.value for m in store.context("bob").memories] == ["Lisbon"]


def test_ranking_follows_the_readme_score_and_the_limit(store: MemoryStore, frozen) -> None:
    created = []
    for index in range(14):
        created.append(
            store.remember(
                "alice", f"fact{index:02}", f"value {index}", confidence=0.7 + 0.02 * (index % 7)
            )
        )
        frozen.tick(3 * DAY)
    for index in (1, 4, 4, 9, 9, 9, 12):  # some are used, some more often
        store.recall("alice", f"fact{index:02}")
        frozen.tick(DAY)
    now = store.now()

    context = store.context("alice")

    assert len(context.memories) == 10
    everything = store.list("alice", state="active")
    expected = sorted(everything, key=lambda m: (readme_score(m, now), m.updated_at), reverse=True)
    assert [m.id for m in context.memories] == [m.id for m in expected[:10]]
    assert [m.id for m in store.context("alice", limit=3).memories] == [m.id for m in expected[:3]]
    with pytest.raises(InvalidInput):
        store.context("alice", limit=0)


def test_confidence_weighs_most_and_recent_use_earns_a_bonus(store: MemoryStore, frozen) -> None:
    low = store.remember("alice", "low", "x", confidence=0.75)
    high = store.remember("alice", "high", "y", confidence=0.95)
    assert [m.id for m in store.context("alice").memories] == [high.id, low.id]
    frozen.tick(DAY)
    for _ in range(5):
        store.recall("alice", "low")
    assert [m.id for m in store.context("alice").memories] == [low.id, high.id]


def test_ties_go_against_the_entry_confirmed_longest_ago(store: MemoryStore, frozen) -> None:
    older = store.remember("alice", "a", "x", confidence=0.8)
    frozen.tick(DAY)
    newer = store.remember("alice", "b", "y", confidence=0.8)
    config = Config(context=ContextSection(limit=1))
    with MemoryStore(store.path, config=config) as limited:
        assert [m.id for m in limited.context("alice").memories] == [newer.id]
    # Same update time: both score the same; the result is still deterministic.
    store.storage.hot.conn.execute(
        "UPDATE memories SET updated_at = ?, last_used_at = ?", [older.updated_at.isoformat()] * 2
    )
    first = [m.id for m in store.context("alice").memories]
    assert first == [m.id for m in store.context("alice").memories]


def test_context_does_not_mark_anything_used(store: MemoryStore, frozen) -> None:
    store.remember("alice", "city", "Shanghai")
    store.add_note("alice", "a note")
    before = dump_databases(store.path)
    frozen.tick(DAY)
    for _ in range(3):
        store.context("alice")
    assert dump_databases(store.path) == before
    assert all(m.access_count == 0 for m in store.list("alice"))


def test_the_prompt_text(store: MemoryStore, frozen) -> None:
    store.remember("alice", "name", "小明", confidence=0.95)
    store.remember("alice", "city", "Shanghai", confidence=0.95)
    store.remember("alice", "report_format", "PDF", kind="preference")
    frozen.tick(timedelta(hours=2, minutes=30))
    store.add_note("alice", "Deliver the report before Wednesday")
    frozen.tick(DAY)
    store.add_note("alice", "Prefers morning meetings")

    text = store.context("alice").text
    sections = text.split("\n\n")
    assert len(sections) == 3
    facts = sections[0].splitlines()
    assert facts[0] == "Known facts:"
    assert sorted(facts[1:]) == ["- city: Shanghai", "- name: 小明"]
    assert sections[1] == "Preferences:\n- report_format: PDF"
    assert sections[2] == (
        "Notes:\n"
        "- [2026-01-01 11:30] Deliver the report before Wednesday\n"
        "- [2026-01-02 11:30] Prefers morning meetings"
    )
    # Another memory on SQLite; on PostgreSQL the same one (bob has nothing in it but this).
    other = store.path if is_postgres(store.path) else store.path.with_name("other.db")
    only_notes = MemoryStore(other)
    try:
        only_notes.add_note("bob", "just a note")
        assert only_notes.context("bob").text == "Notes:\n- [2026-01-02 11:30] just a note"
    finally:
        only_notes.close()


def test_the_limit_and_threshold_come_from_the_config(db_path, frozen) -> None:
    config = Config(context=ContextSection(limit=2, min_confidence=0.9))
    with MemoryStore(db_path, config=config) as store:
        for index, confidence in enumerate([0.95, 0.91, 0.92, 0.89]):
            store.remember("alice", f"k{index}", "v", confidence=confidence)
        assert [m.confidence for m in store.context("alice").memories] == [0.95, 0.92]
        assert len(store.context("alice", limit=5).memories) == 3


def test_a_projects_context_includes_the_profile_ranked_with_its_own(
    store: MemoryStore, frozen
) -> None:
    """The profile (the default namespace) applies to every project (issue 20 item 2)."""
    store.remember("bob", "city", "Paris")
    store.remember("bob", "name", "Bob", confidence=0.75)
    store.remember("bob", "report_format", "Word", kind="preference")
    store.remember("bob", "report_format", "PDF", kind="preference", namespace="acme")
    store.remember("bob", "stack", "Rust", namespace="globex")

    context = store.context("bob", namespace="acme")
    text = context.text
    assert "- city: Paris" in text and "- report_format: PDF" in text and "- name: Bob" in text
    # The project's own entry shadows the profile's of the same key; no other project leaks.
    assert "Word" not in text and "Rust" not in text
    assert [(m.namespace, m.key) for m in context.memories][-1] == ("", "name")  # lowest score
    assert {(m.namespace, m.key) for m in context.memories} == {
        ("", "city"),
        ("", "name"),
        ("acme", "report_format"),
    }
    # Ranked together, one limit: the project does not get its own extra slots.
    assert [m.key for m in store.context("bob", namespace="acme", limit=1).memories] in (
        ["city"],
        ["report_format"],
    )
    # The profile's own context is unchanged.
    assert {m.value for m in store.context("bob").memories} == {"Paris", "Bob", "Word"}


def test_the_relevant_section_keeps_the_confidence_threshold(db_path, frozen) -> None:
    """Entries below ``[context] min_confidence`` are kept out of the slots and out of the
    "Relevant to this message" section alike; the search's limit is of the others."""
    config = Config(context=ContextSection(limit=1, min_confidence=0.8))
    with MemoryStore(db_path, config=config) as store:
        store.remember("alice", "slot", "the only slot", confidence=0.99)
        sure = store.remember("alice", "zoo", "quokka sighting at the zoo", confidence=0.85)
        doubtful = store.remember("alice", "photo", "quokka photo", confidence=0.6)
        ctx = store.context("alice", query="quokka")
        assert [h.memory.id for h in ctx.relevant] == [sure.id]
        assert "quokka photo" not in ctx.text and "quokka sighting" in ctx.text
        # search itself still finds both
        assert {h.memory.id for h in store.search("alice", "quokka")} == {sure.id, doubtful.id}
