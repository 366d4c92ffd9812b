"""The expire job: TTL per kind, review grace, pinning, per-entry TTL — at the boundaries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time

from memkeeper import MemoryStore
from memkeeper.config import Config
from memkeeper.maintenance.runner import run_once

pytestmark = pytest.mark.both_backends

SECOND = timedelta(seconds=1)
DAY = timedelta(days=1)


def expire(store: MemoryStore, *, dry_run: bool = False):
    return run_once(store, ["expire"], dry_run=dry_run).results[0]


def state(store: MemoryStore, memory_id: str) -> str:
    memory = store.get(memory_id)
    assert memory is not None
    return memory.state


@pytest.mark.parametrize(("kind", "ttl_days"), [("fact", 180), ("preference", 30), ("note", 90)])
def test_entry_expires_one_second_after_its_kinds_ttl(
    store: MemoryStore, kind: str, ttl_days: int
) -> None:
    created = datetime(2026, 3, 10, 8, 30, tzinfo=UTC)
    with freeze_time(created) as clock:
        if kind == "note":
            memory = store.add_note("alice", "call Bob back")
        else:
            memory = store.remember("alice", "k", "v", kind=kind)
        boundary = created + timedelta(days=ttl_days)
        for moment, expected in (
            (boundary - SECOND, "active"),
            (boundary, "active"),
            (boundary + SECOND, "pending_review"),
        ):
            clock.move_to(moment)
            result = expire(store, dry_run=True)
            assert (memory.id in {c.memory_id for c in result.changes}) == (
                expected == "pending_review"
            ), moment
        clock.move_to(boundary)
        expire(store)
        assert state(store, memory.id) == "active"
        clock.move_to(boundary + SECOND)
        result = expire(store)
        assert state(store, memory.id) == "pending_review"
        assert result.counts == {"expire": 1}
        change = store.changes(memory_id=memory.id)[-1]
        assert change.action == "expire"
        assert change.actor == "job:expire"
        assert change.run_id == result.run_id
        assert f"TTL {ttl_days} days ({kind})" in change.reason


def test_pending_review_retires_after_grace_and_recall_renews(store: MemoryStore) -> None:
    with freeze_time(datetime(2026, 1, 1, tzinfo=UTC)) as clock:
        kept = store.remember("alice", "city", "Beijing")
        dropped = store.remember("alice", "team", "blue")
        expired_at = datetime(2026, 1, 1, tzinfo=UTC) + 180 * DAY + SECOND
        clock.move_to(expired_at)
        expire(store)
        assert state(store, kept.id) == state(store, dropped.id) == "pending_review"

        clock.move_to(expired_at + 3 * DAY)
        renewed = store.recall("alice", "city")
        assert renewed is not None and renewed.state == "active"
        assert store.changes(memory_id=kept.id)[-1].action == "renew"

        grace_end = expired_at + 14 * DAY
        clock.move_to(grace_end)
        expire(store)
        assert state(store, dropped.id) == "pending_review"
        clock.move_to(grace_end + SECOND)
        result = expire(store)
        retired = store.get(dropped.id)
        assert retired is not None
        assert (retired.state, retired.cold_reason) == ("cold", "expired")
        assert result.counts == {"retire (expired)": 1}
        assert state(store, kept.id) == "active"
        assert [m.id for m in store.list_memories("alice", state="cold")] == [dropped.id]


def test_use_and_reconfirmation_restart_the_ttl(store: MemoryStore) -> None:
    start = datetime(2026, 5, 1, tzinfo=UTC)
    with freeze_time(start) as clock:
        recalled = store.remember("u", "a", "1")
        reconfirmed = store.remember("u", "b", "2")
        untouched = store.remember("u", "c", "3")
        clock.move_to(start + 100 * DAY)
        store.recall("u", "a")
        store.remember("u", "b", "2")
        clock.move_to(start + 181 * DAY)
        expire(store)
        assert state(store, untouched.id) == "pending_review"
        assert state(store, recalled.id) == "active"
        assert state(store, reconfirmed.id) == "active"
        clock.move_to(start + 280 * DAY + SECOND)
        expire(store)
        assert state(store, recalled.id) == state(store, reconfirmed.id) == "pending_review"


def test_pinned_entries_never_expire(store: MemoryStore) -> None:
    with freeze_time(datetime(2026, 1, 1, tzinfo=UTC)) as clock:
        pinned = store.remember("u", "name", "Xiaoming", pinned=True)
        note = store.add_note("u", "allergic to peanuts", pinned=True)
        clock.move_to(datetime(2029, 1, 1, tzinfo=UTC))
        assert expire(store).counts == {}
        assert state(store, pinned.id) == state(store, note.id) == "active"


def test_per_entry_ttl_overrides_the_kind(store: MemoryStore) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with freeze_time(start) as clock:
        short = store.remember("u", "deadline", "Friday", ttl_days=5)
        long = store.remember("u", "name", "Ann", ttl_days=365)
        normal = store.remember("u", "city", "Paris")
        clock.move_to(start + 5 * DAY)
        assert expire(store).counts == {}
        clock.move_to(start + 5 * DAY + SECOND)
        expire(store)
        assert state(store, short.id) == "pending_review"
        assert "its own TTL" in store.changes(memory_id=short.id)[-1].reason
        clock.move_to(start + 181 * DAY)
        expire(store)
        assert state(store, normal.id) == "pending_review"
        assert state(store, long.id) == "active"
        clock.move_to(start + 365 * DAY + SECOND)
        expire(store)
        assert state(store, long.id) == "pending_review"


@pytest.mark.parametrize(
    ("created", "boundary"),
    [
        # 30 days from the last day of January lands on the leap day in 2028...
        (datetime(2028, 1, 30, 12, tzinfo=UTC), datetime(2028, 2, 29, 12, tzinfo=UTC)),
        # ...and on 2 March in a common year.
        (datetime(2027, 1, 31, 12, tzinfo=UTC), datetime(2027, 3, 2, 12, tzinfo=UTC)),
        # created on the leap day itself
        (
            datetime(2028, 2, 29, 23, 59, 59, tzinfo=UTC),
            datetime(2028, 3, 30, 23, 59, 59, tzinfo=UTC),
        ),
        # across a year end
        (datetime(2026, 12, 31, 23, 0, tzinfo=UTC), datetime(2027, 1, 30, 23, 0, tzinfo=UTC)),
    ],
)
def test_month_ends_and_leap_days(
    store: MemoryStore, created: datetime, boundary: datetime
) -> None:
    with freeze_time(created) as clock:
        memory = store.remember("u", "style", "brief", kind="preference")
        clock.move_to(boundary)
        expire(store)
        assert state(store, memory.id) == "active"
        clock.move_to(boundary + SECOND)
        expire(store)
        assert state(store, memory.id) == "pending_review"


def test_dst_change_in_the_configured_timezone_does_not_shift_expiry(db_path) -> None:
    """TTLs are spans of absolute time: a DST jump in service.timezone moves no boundary."""
    config = Config.model_validate({"service": {"timezone": "Europe/Berlin"}})
    store = MemoryStore(db_path, config=config)
    # Berlin springs forward on 2027-03-28 and falls back on 2027-10-31.
    for created in (
        datetime(2027, 3, 1, 1, 30, tzinfo=UTC),
        datetime(2027, 10, 15, 1, 30, tzinfo=UTC),
    ):
        with freeze_time(created) as clock:
            memory = store.remember("u", f"k{created.month}", "v", kind="preference")
            boundary = created + 30 * DAY
            clock.move_to(boundary)
            expire(store)
            assert state(store, memory.id) == "active"
            clock.move_to(boundary + SECOND)
            expire(store)
            assert state(store, memory.id) == "pending_review"
    store.close()


def test_expire_config_is_honoured(db_path) -> None:
    config = Config.model_validate(
        {"jobs": {"expire": {"ttl_days": {"fact": 10}, "review_grace_days": 2}}}
    )
    store = MemoryStore(db_path, config=config)
    start = datetime(2026, 6, 1, tzinfo=UTC)
    with freeze_time(start) as clock:
        memory = store.remember("u", "k", "v")
        clock.move_to(start + 10 * DAY + SECOND)
        expire(store)
        assert state(store, memory.id) == "pending_review"
        clock.move_to(start + 12 * DAY + 2 * SECOND)
        expire(store)
        assert state(store, memory.id) == "cold"
    store.close()


def test_batches_cover_everything_due(db_path) -> None:
    config = Config.model_validate({"database": {"batch_size": 7}})
    store = MemoryStore(db_path, config=config)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with freeze_time(start) as clock:
        ids = [store.remember("u", f"k{i}", "v").id for i in range(50)]
        clock.move_to(start + 200 * DAY)
        assert expire(store, dry_run=True).counts == {"expire": 50}
        assert expire(store).counts == {"expire": 50}
        assert {state(store, i) for i in ids} == {"pending_review"}
    store.close()
