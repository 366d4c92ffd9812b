"""The merge job (issue 12 §1): normalization, near-duplicates by the fake embeddings, what is
never merged, the survivor, the watermark, settle, dry run, undo and explain."""

# Chinese values use fullwidth punctuation on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import T0
from fake_embeddings import DIMS, fake_vector
from freezegun import freeze_time

from memkeeper import MemoryStore
from memkeeper.config import Config
from memkeeper.consolidation.normalize import normalize
from memkeeper.maintenance.runner import JobResult, run_once
from memkeeper.maintenance.undo import undo_run
from memkeeper.storage.vectors import embedding_text, store_vectors, text_hash

pytestmark = pytest.mark.both_backends

THRESHOLD = 0.92


@pytest.fixture
def store(db_path: Path) -> Iterator[MemoryStore]:
    config = Config.model_validate({"search": {"embedding_dimensions": DIMS}})
    with freeze_time(T0) as frozen:
        memory = MemoryStore(db_path, config=config)
        memory.frozen = frozen  # type: ignore[attr-defined]
        yield memory
        memory.close()


def index_all(store: MemoryStore, model: str | None = None) -> None:
    """Give every current entry its fake vector (what the index job would store)."""
    rows = []
    for m in store.list_memories():
        if m.state in ("active", "pending_review"):
            text = embedding_text(m.kind, m.key, m.value)
            name = model or store.config.search.embedding_model
            rows.append((m.id, name, DIMS, text_hash(text), fake_vector(text, DIMS)))
    with store.storage.lock:
        store_vectors(store.storage.hot, rows)


def similarity(a: str, b: str) -> float:
    return float(np.dot(fake_vector(a, DIMS), fake_vector(b, DIMS)))


def merge(store: MemoryStore, *, dry_run: bool = False, **config: Any) -> JobResult:
    if config:
        store.config = store.config.model_copy(  # type: ignore[misc]
            update={"jobs": store.config.jobs.model_copy(update={"merge": _merge(config)})}
        )
    return run_once(store, ["merge"], dry_run=dry_run).results[0]


def _merge(options: dict[str, Any]) -> Any:
    from memkeeper.config.merge import MergeJob

    return MergeJob.model_validate(options)


def states(store: MemoryStore) -> dict[str, str]:
    return {m.id: m.state for m in store.list_memories()}


def rows(store: MemoryStore) -> list[dict[str, Any]]:
    with store.storage.lock:
        return [dict(r) for r in store.storage.hot.query("SELECT * FROM memories ORDER BY id")]


# -- normalization ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("ＰＤＦ", "pdf"),  # full-width letters
        ("Report Format", "report_format"),  # case, punctuation as a separator
        ("Hello,   World!!", "hello world"),  # punctuation and whitespace
        ("报告用PDF格式。", "报告用ＰＤＦ格式"),  # Chinese with full-width forms and 。
        ("报告 用 PDF 格式", "报告用pdf格式"),  # spaces next to CJK characters
        ("“张三”，周五交付！", "张三 周五交付"),  # Chinese quotes and punctuation
    ],
)
def test_normalization_folds_what_never_changes_meaning(a: str, b: str) -> None:
    assert normalize(a) == normalize(b)


@pytest.mark.parametrize(
    ("a", "b"), [("C++", "C"), ("$5", "5"), ("北京", "南京"), ("10%", "10"), ("-5 °C", "5 °C")]
)
def test_normalization_keeps_what_does(a: str, b: str) -> None:
    assert normalize(a) != normalize(b)


# -- duplicates ------------------------------------------------------------------------------


def test_identical_values_under_another_key_or_in_a_note_are_merged(store: MemoryStore) -> None:
    pref = store.remember("u", "report_format", "报告用PDF格式", kind="preference")
    note = store.add_note("u", "报告用ＰＤＦ格式。")
    fact = store.remember("u", "File Type", "报告 用 pdf 格式", kind="fact", confidence=0.6)
    result = merge(store)
    assert result.counts == {"merge": 1, "supersede": 2}
    assert (result.stats["groups"], result.stats["duplicates"]) == (1, 2)
    assert store.get(pref.id).state == "active"  # keyed, highest score: the survivor
    for loser in (note, fact):
        memory = store.get(loser.id)
        assert memory.state == "superseded"
        (change,) = store.changes(memory_id=loser.id, action="supersede")
        assert change.reason == (
            f"duplicate of {pref.id} (similarity 1.00, identical after normalization)"
        )
        assert change.details["superseded_by"] == pref.id


def test_short_identical_values_under_different_keys_are_not_merged(store: MemoryStore) -> None:
    store.remember("u", "vegetarian", "yes", kind="fact")
    store.remember("u", "has_car", "Yes!", kind="fact")
    store.remember("u", "home city", "Beijing", kind="fact")
    store.remember("u", "Home_City", "beijing", kind="preference")  # same key after folding
    result = merge(store)
    assert result.counts == {"merge": 1, "supersede": 1}
    assert sorted(states(store).values()) == ["active", "active", "active", "superseded"]


def test_near_duplicates_by_embedding(store: MemoryStore) -> None:
    a = "meeting with Zhang San every Friday at 10 about the budget"
    b = "weekly meeting with Zhang San on Fridays about the budget review"
    far = "The user likes green tea in the afternoon"
    assert similarity(a, b) >= THRESHOLD > similarity(a, far)
    first = store.add_note("u", a, confidence=0.9)
    second = store.add_note("u", b, confidence=0.6)
    other = store.add_note("u", far)
    assert merge(store).counts == {}  # no vectors yet: normalization only
    index_all(store)
    result = merge(store)
    assert result.counts == {"merge": 1, "supersede": 1}
    assert result.stats["full_scan"] is False and result.stats["pairs"] == 1
    assert store.get(first.id).state == "active" and store.get(other.id).state == "active"
    (change,) = store.changes(memory_id=second.id, action="supersede")
    assert change.reason == f"duplicate of {first.id} (similarity {similarity(a, b):.2f})"


def test_vectors_of_another_model_are_never_compared(store: MemoryStore) -> None:
    a = "meeting with Zhang San every Friday at 10 about the budget"
    b = "weekly meeting with Zhang San on Fridays about the budget review"
    store.add_note("u", a)
    store.add_note("u", b)
    index_all(store, model="an-older-model")
    assert merge(store).counts == {}
    index_all(store)  # re-embedded: a vector written anew, above the run's watermark
    result = merge(store)
    assert result.stats["full_scan"] is False and result.stats["pairs"] == 1
    assert result.counts == {"merge": 1, "supersede": 1}


def test_a_preference_and_a_note_compare_but_a_fact_and_a_note_do_not(store: MemoryStore) -> None:
    text = "always send the weekly reports as PDF files to the team"
    store.remember("u", "report", text + " please", kind="preference")
    store.add_note("u", text)
    store.remember("w", "report", text + " please", kind="fact")
    store.add_note("w", text)
    assert similarity(f"report: {text} please", text) >= THRESHOLD
    index_all(store)
    result = merge(store)
    assert result.counts == {"merge": 1, "supersede": 1}
    assert {m.user_id for m in store.list_memories(state="superseded")} == {"u"}


def test_never_pinned_never_across_users_or_namespaces(store: MemoryStore) -> None:
    value = "Prefers reports as PDF, sent on Fridays"
    store.remember("u", "format", value, kind="preference", pinned=True)
    store.add_note("u", value)
    store.add_note("v", value)
    store.add_note("w", value, namespace="p1")
    store.add_note("w", value, namespace="p2")
    index_all(store)
    assert merge(store).counts == {}
    assert set(states(store).values()) == {"active"}


def test_session_summaries_are_never_merged(store: MemoryStore) -> None:
    from memkeeper.storage.transitions import Transition, apply
    from memkeeper.store.entries import new_entry_image

    text = "Summary: Zhang San delivers the report as PDF on Friday."
    for session in ("s1", "s2"):
        image = new_entry_image(
            user_id="u",
            namespace="",
            kind="note",
            key=f"summary:{session}",
            value=text,
            source=f"session:{session}",
            confidence=0.8,
            pinned=False,
            ttl_days=None,
            now=T0,
        )
        apply(
            store.storage,
            [Transition(image["id"], None, image, "summarize", "t")],
            actor="t",
            now=T0,
        )
    plain = store.add_note("u", text)
    assert merge(store).counts == {}
    assert store.get(plain.id).state == "active"


def test_never_two_values_of_one_key(store: MemoryStore) -> None:
    a = "Beijing Haidian district near the river"
    b = "Beijing Haidian district near the rivers"
    store.remember("u", "home_city", a, kind="fact")
    store.remember("u", "Home City", b, kind="fact")
    assert similarity(f"home_city: {a}", f"Home City: {b}") >= THRESHOLD
    index_all(store)
    assert merge(store).counts == {}
    assert set(states(store).values()) == {"active"}


def test_the_survivor_takes_confidence_last_use_and_sources(store: MemoryStore) -> None:
    value = "Works at the Haidian branch of the bank"
    used = store.remember("u", "job", value, kind="fact", confidence=0.6, source="import:crm")
    for _ in range(3):
        store.recall("u", "job")
    store.frozen.tick(timedelta(days=20))
    sure = store.remember("u", "employer", value, kind="fact", confidence=0.95, source="api")
    store.frozen.tick(timedelta(days=5))
    late = store.remember("u", "work", value + ".", kind="fact", confidence=0.8, source="s:1")
    store.recall("u", "work")
    store.frozen.tick(timedelta(days=1))
    before = {m.id: m for m in store.list_memories()}
    result = merge(store)
    assert result.counts == {"merge": 1, "supersede": 2}
    (survivor,) = store.list_memories(state="active")
    assert survivor.confidence == 0.95
    assert survivor.last_accessed_at == before[late.id].last_accessed_at
    assert survivor.updated_at == before[late.id].updated_at
    assert survivor.access_count == 4
    (change,) = store.changes(memory_id=survivor.id, action="merge")
    others = {used.id, sure.id, late.id} - {survivor.id}
    assert set(change.details["merged"]) == others
    assert change.details["sources"] == ["api", "import:crm", "s:1"]
    assert all(change.details["similarities"][i] == 1.0 for i in others)


def test_pending_review_survivor_of_an_active_group_becomes_active(store: MemoryStore) -> None:
    value = "Prefers quiet rooms for meetings"
    first = store.remember("u", "room", value, kind="preference", confidence=0.95)
    second = store.remember("u", "rooms", value, kind="preference", confidence=0.5)
    with store.storage.lock, store.storage.hot.atomic():
        store.storage.hot.conn.execute(
            "UPDATE memories SET state = 'pending_review' WHERE id = ?", [first.id]
        )
    merge(store)
    assert store.get(first.id).state == "active"
    assert store.get(second.id).state == "superseded"


# -- the run: watermark, settle, dry run, undo, explain ---------------------------------------


def test_later_runs_look_only_at_changed_users(store: MemoryStore) -> None:
    for user in ("a", "b", "c"):
        store.remember(user, "x", "some long value", kind="fact")
        store.remember(user, "y", "another long value", kind="fact")
    first = merge(store)
    assert first.stats["full_scan"] is True and first.stats["pairs"] == 3
    assert merge(store).stats["pairs"] == 0
    store.remember("b", "z", "Another long value!", kind="fact")
    again = merge(store)
    assert again.stats["pairs"] == 1 and again.counts == {"merge": 1, "supersede": 1}
    changed = merge(store, similarity_threshold=0.95)
    assert changed.stats["full_scan"] is True and changed.stats["pairs"] == 3


def test_duplicates_settle_after_the_grey_period(store: MemoryStore) -> None:
    store.remember("u", "a", "the same long value", kind="fact")
    loser = store.remember("u", "b", "The same long value.", kind="fact", confidence=0.5)
    merge(store)
    store.frozen.tick(timedelta(days=15))
    run_once(store, ["settle"])
    assert store.get(loser.id).state == "cold"
    assert store.get(loser.id).cold_reason == "superseded"


def test_dry_run_changes_nothing(store: MemoryStore) -> None:
    store.remember("u", "a", "the same long value", kind="fact")
    store.add_note("u", "The same long value!")
    index_all(store)
    before = rows(store)
    with store.storage.lock:
        changes = store.storage.hot.execute("SELECT count(*) FROM changes").fetchone()[0]
    result = merge(store, dry_run=True)
    assert result.counts == {"merge": 1, "supersede": 1}
    assert [c.action for c in result.changes] == ["merge", "supersede"]
    assert "similarity 1.00" in result.changes[1].reason
    assert rows(store) == before
    with store.storage.lock:
        assert store.storage.hot.execute("SELECT count(*) FROM changes").fetchone()[0] == changes
        assert store.storage.hot.execute("SELECT count(*) FROM job_runs").fetchone()[0] == 0


def test_undo_restores_every_entry(store: MemoryStore) -> None:
    for i in range(3):
        value = "Lives in Beijing near the river"
        store.remember("u", f"k{i}", value, kind="fact", confidence=0.5 + i / 10)
    store.add_note("u", "lives in beijing, near the river")
    store.remember("v", "a", "Prefers long walks", kind="preference")
    store.remember("v", "b", "prefers long walks!", kind="preference")
    store.frozen.tick(timedelta(hours=1))
    before = rows(store)
    result = merge(store)
    assert result.counts == {"merge": 2, "supersede": 4}
    store.frozen.tick(timedelta(hours=1))
    report = undo_run(store, result.run_id)
    # 4 supersessions and the survivor whose confidence rose; the other survivor's merge row
    # changed nothing but the log, so there is nothing to revert.
    assert len(report.reverted) == 5 and len(report.already_undone) == 1
    assert not report.conflicts
    assert rows(store) == before


def test_explain_of_a_survivor_says_what_was_merged(store: MemoryStore) -> None:
    keep = store.remember("u", "a", "the same long value", kind="fact", confidence=0.6)
    gone = store.add_note("u", "The same long value!", confidence=0.9)
    merge(store)
    text = store.explain(keep.id)
    assert f"merged into it: {gone.id} (similarity 1.00, identical after normalization)" in text
    assert "confidence 0.6 → 0.9" in text
    assert f"duplicate of {keep.id}" in store.explain(gone.id)


def test_a_group_changed_meanwhile_is_left_whole(store: MemoryStore, monkeypatch) -> None:
    from memkeeper.consolidation import merging

    keep = store.remember("u", "a", "the same long value", kind="fact")
    store.remember("u", "b", "The same long value.", kind="fact", confidence=0.5)
    real = merging.apply_whole

    def agent_first(ctx: Any, batch: Any) -> Any:
        if batch:
            store.recall("u", "a")  # an agent uses the survivor after the job read it
        return real(ctx, batch)

    monkeypatch.setattr("memkeeper.consolidation.job.apply_whole", agent_first)
    result = merge(store)
    assert result.counts == {} and result.stats["groups_left"] == 1
    assert result.stats["groups"] == result.stats["duplicates"] == 0
    assert set(states(store).values()) == {"active"}
    assert store.get(keep.id).access_count == 1


def test_run_once_runs_merge_after_index(store: MemoryStore) -> None:
    names = [r.job for r in run_once(store).results]
    assert names.index("index") < names.index("merge") < names.index("retain")
    with store.storage.lock:
        (counts,) = store.storage.hot.execute(
            "SELECT counts FROM job_runs WHERE job = 'merge'"
        ).fetchone()
    assert json.loads(counts)["stats"]["_scope"].startswith("threshold=0.92;")
