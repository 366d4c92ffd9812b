"""demote, settle and prune: the rules at their boundaries, and the registry's shape."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time
from memkeeper.jobs import ORDER, REGISTRY

from memkeeper import MemoryStore
from memkeeper.config import Config, JobsSection
from memkeeper.maintenance.runner import run_once
from memkeeper.service.schedule_info import next_run_time

pytestmark = pytest.mark.both_backends

SECOND = timedelta(seconds=1)
DAY = timedelta(days=1)


def run(store: MemoryStore, job: str, *, dry_run: bool = False):
    return run_once(store, [job], dry_run=dry_run).results[0]


def where(store: MemoryStore, memory_id: str) -> tuple[str, str | None]:
    memory = store.get(memory_id)
    assert memory is not None
    return memory.state, memory.cold_reason


# -- demote ----------------------------------------------------------------------------------


def test_demote_moves_low_confidence_unused_entries_to_cold(store: MemoryStore) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with freeze_time(start) as clock:
        weak = store.remember("u", "guess", "maybe PDF", confidence=0.4)
        at_threshold = store.remember("u", "other", "x", confidence=0.5)
        strong = store.remember("u", "name", "Ann", confidence=0.95)
        weak_used = store.remember("u", "hunch", "tea", confidence=0.3)
        weak_pinned = store.remember("u", "pinned", "yes", confidence=0.1, pinned=True)
        weak_note = store.add_note("u", "seems busy on Mondays", confidence=0.2)
        clock.move_to(start + 10 * DAY)
        store.recall("u", "hunch")
        clock.move_to(start + 30 * DAY)
        assert run(store, "demote").counts == {}
        clock.move_to(start + 30 * DAY + SECOND)
        result = run(store, "demote")
        assert result.counts == {"retire (low_confidence)": 2}
        assert where(store, weak.id) == ("cold", "low_confidence")
        assert where(store, weak_note.id) == ("cold", "low_confidence")
        for kept in (at_threshold, strong, weak_used, weak_pinned):
            assert where(store, kept.id) == ("active", None)
        reason = store.changes(memory_id=weak.id)[-1].reason
        assert "confidence 0.4 < 0.5" in reason and "unused 30 days ≥ 30 days" in reason
        clock.move_to(start + 40 * DAY + SECOND)
        assert run(store, "demote").counts == {"retire (low_confidence)": 1}
        assert where(store, weak_used.id) == ("cold", "low_confidence")


def test_demote_also_takes_pending_review_entries(store: MemoryStore) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with freeze_time(start) as clock:
        memory = store.remember("u", "mood", "cheerful", kind="preference", confidence=0.3)
        clock.move_to(start + 31 * DAY)
        run(store, "expire")
        assert where(store, memory.id) == ("pending_review", None)
        run(store, "demote")
        assert where(store, memory.id) == ("cold", "low_confidence")


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (datetime(2027, 1, 31, 12, tzinfo=UTC), datetime(2027, 2, 1, 4, tzinfo=UTC)),
        (datetime(2028, 2, 29, 4, tzinfo=UTC), datetime(2028, 3, 1, 4, tzinfo=UTC)),
        (datetime(2027, 12, 1, 4, tzinfo=UTC), datetime(2028, 1, 1, 4, tzinfo=UTC)),
        (datetime(2027, 4, 30, 23, 59, tzinfo=UTC), datetime(2027, 5, 1, 4, tzinfo=UTC)),
    ],
)
def test_demote_is_scheduled_on_the_first_of_each_month(now: datetime, expected: datetime) -> None:
    schedule = JobsSection().demote.schedule
    assert next_run_time(schedule, "UTC", now) == expected


# -- settle ----------------------------------------------------------------------------------


def test_settle_retires_superseded_values_after_the_grey_period(store: MemoryStore) -> None:
    start = datetime(2026, 2, 20, 9, tzinfo=UTC)
    with freeze_time(start) as clock:
        old = store.remember("u", "city", "Beijing")
        clock.move_to(start + DAY)
        new = store.remember("u", "city", "Shanghai")
        superseded_at = start + DAY
        assert where(store, old.id) == ("superseded", None)
        clock.move_to(superseded_at + 14 * DAY)
        assert run(store, "settle").counts == {}
        clock.move_to(superseded_at + 14 * DAY + SECOND)
        result = run(store, "settle")
        assert result.counts == {"retire (superseded)": 1}
        assert where(store, old.id) == ("cold", "superseded")
        assert where(store, new.id) == ("active", None)
        assert "grey period 14 days" in store.changes(memory_id=old.id)[-1].reason


def test_reasserting_during_the_grey_period_keeps_the_old_value(store: MemoryStore) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with freeze_time(start) as clock:
        first = store.remember("u", "format", "PDF", kind="preference")
        clock.move_to(start + DAY)
        second = store.remember("u", "format", "Word", kind="preference")
        clock.move_to(start + 10 * DAY)
        again = store.remember("u", "format", "PDF", kind="preference")
        assert again.id == first.id and again.state == "active"
        assert where(store, second.id) == ("superseded", None)
        clock.move_to(start + 25 * DAY)
        run(store, "settle")
        assert where(store, first.id) == ("active", None)
        assert where(store, second.id) == ("cold", "superseded")
        assert store.recall("u", "format", kind="preference").value == "PDF"


# -- prune -----------------------------------------------------------------------------------


def test_prune_keeps_the_cap_and_removes_the_lowest_scores(db_path) -> None:
    config = Config.model_validate({"jobs": {"prune": {"max_facts": 5}}})
    store = MemoryStore(db_path, config=config)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with freeze_time(start) as clock:
        low = store.remember("u", "low", "x", confidence=0.3)
        stale = store.remember("u", "stale", "x", confidence=0.9)
        clock.move_to(start + 100 * DAY)
        fresh = [store.remember("u", f"fresh{i}", "x", confidence=0.9) for i in range(3)]
        popular = store.remember("u", "popular", "x", confidence=0.6)
        for _ in range(10):
            store.recall("u", "popular")
        pinned = store.remember("u", "pinned", "x", confidence=0.1, pinned=True)
        other_ns = [store.remember("u", f"n{i}", "x", namespace="p2") for i in range(5)]
        preference = store.remember("u", "pref", "x", kind="preference", confidence=0.1)
        result = run(store, "prune")
        # 7 active facts in the default namespace, cap 5: the two lowest (pinned exempt) go.
        assert result.counts == {"retire (over_cap)": 2}
        assert where(store, low.id) == ("cold", "over_cap")
        assert where(store, stale.id) == ("cold", "over_cap")
        for kept in (*fresh, popular, pinned, *other_ns, preference):
            assert where(store, kept.id)[0] == "active"
        change = store.changes(memory_id=low.id)[-1]
        assert change.details["rank"] == 1
        assert change.details["active_facts"] == 7 and change.details["max_facts"] == 5
        components = change.details["score"]
        assert set(components) == {"score", "confidence", "confirmed", "recency", "frequency"}
        assert components["confidence"] == 0.3
        weights = config.scoring
        recomputed = (
            weights.weight_confidence * components["confidence"]
            + weights.weight_confirmed * components["confirmed"]
            + weights.weight_recency * components["recency"]
            + weights.weight_frequency * components["frequency"]
        )
        assert recomputed == pytest.approx(components["score"], abs=1e-5)
        assert run(store, "prune").counts == {}
    store.close()


def test_prune_never_removes_pinned_facts_even_over_the_cap(db_path) -> None:
    config = Config.model_validate({"jobs": {"prune": {"max_facts": 2}}})
    store = MemoryStore(db_path, config=config)
    pinned = [store.remember("u", f"p{i}", "x", pinned=True) for i in range(3)]
    loose = store.remember("u", "loose", "x")
    assert run(store, "prune").counts == {"retire (over_cap)": 1}
    assert where(store, loose.id) == ("cold", "over_cap")
    assert all(where(store, p.id)[0] == "active" for p in pinned)
    store.close()


def test_prune_default_cap_is_fifty(store: MemoryStore) -> None:
    for i in range(53):
        store.remember("u", f"k{i:02}", "v", confidence=0.5 + i / 200)
    result = run(store, "prune")
    assert result.counts == {"retire (over_cap)": 3}
    active = store.list_memories("u", state="active")
    assert len(active) == 50
    assert {m.key for m in store.list_memories("u", state="cold")} == {"k00", "k01", "k02"}


def test_prune_caps_many_owners_read_and_applied_together(db_path, monkeypatch) -> None:
    """Owners over the cap are read several at a time and their retirements applied in
    shared batches: each owner still keeps exactly its cap, the lowest scores going."""
    import memkeeper.jobs.prune as prune

    from memkeeper.storage import due

    monkeypatch.setattr(prune, "_FACTS_PER_READ", 12)  # parts of three owners (5 facts each)
    monkeypatch.setattr(due, "_OWNERS_PER_READ", 2)  # read two owners a statement
    config = Config.model_validate(
        {"jobs": {"prune": {"max_facts": 3}}, "database": {"batch_size": 4}}
    )
    store = MemoryStore(db_path, config=config)
    owners = [(f"user{u}", namespace) for u in range(7) for namespace in ("", "work")]
    for user_id, namespace in owners:
        for i in range(5):
            store.remember(user_id, f"k{i}", "x", namespace=namespace, confidence=0.5 + i / 10)
    store.remember("under", "only", "x")
    result = run(store, "prune")
    assert result.counts == {"retire (over_cap)": 2 * len(owners)}
    for user_id, namespace in owners:
        kept = store.list_memories(user_id, namespace=namespace, state="active")
        assert sorted(m.key for m in kept) == ["k2", "k3", "k4"], (user_id, namespace)
        gone = store.list_memories(user_id, namespace=namespace, state="cold")
        assert sorted(m.key for m in gone) == ["k0", "k1"]
    assert [m.key for m in store.list_memories("under", state="active")] == ["only"]
    store.close()


def test_prune_retires_nothing_of_an_owner_back_under_the_cap_since_it_was_counted(
    db_path, monkeypatch
) -> None:
    """The groups over the cap are counted before their facts are read: an owner whose
    facts an agent forgot in between is judged by what is read, and keeps what it has."""
    from memkeeper.storage import due

    config = Config.model_validate({"jobs": {"prune": {"max_facts": 5}}})
    store = MemoryStore(db_path, config=config)
    for i in range(4):
        store.remember("u", f"k{i}", "x")
    stale = [{"user_id": "u", "namespace": "", "n": 8}]
    monkeypatch.setattr(due, "over_cap_groups", lambda db, max_facts: stale)
    assert run(store, "prune").counts == {}
    assert len(store.list_memories("u", state="active")) == 4
    store.close()


# -- the registry ----------------------------------------------------------------------------


def test_every_registered_job_has_a_config_section_and_back() -> None:
    assert set(REGISTRY) == set(JobsSection.model_fields)
    assert ORDER[:4] == ("settle", "expire", "demote", "prune")
    for name, job in REGISTRY.items():
        assert job.name == name and job.description


def test_disabled_jobs_are_not_run_by_default(db_path) -> None:
    config = Config.model_validate({"jobs": {"prune": {"enabled": False}}})
    store = MemoryStore(db_path, config=config)
    names = [r.job for r in run_once(store).results]
    assert "prune" not in names and "expire" in names
    assert [r.job for r in run_once(store, ["prune"]).results] == ["prune"]
    store.close()
