"""A year of daily maintenance runs with agents writing and recalling in between.

An independent model of the rules (below) predicts every entry's state; at the end the
database must match it exactly, and the change log must replay to the same state.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from freezegun import freeze_time
from helpers import current_images, locations, replay

from memkeeper import MemoryStore
from memkeeper.config import Config
from memkeeper.maintenance.runner import run_once

pytestmark = pytest.mark.slow  # a year of daily runs: skipped by `pytest -m "not slow"`

DAY = timedelta(days=1)
TTL = {"fact": 180, "preference": 30, "note": 90}
GRACE, GREY, DEMOTE_BELOW, UNUSED = 14, 14, 0.5, 30


@dataclass
class Entry:
    """The model's view of one memory."""

    id: str
    user: str
    kind: str
    key: str | None
    value: str
    confidence: float
    pinned: bool
    state: str
    updated_at: datetime
    state_since: datetime
    last_accessed_at: datetime | None = None
    access_count: int = 0
    cold_reason: str | None = None

    @property
    def last_used(self) -> datetime:
        if self.last_accessed_at and self.last_accessed_at > self.updated_at:
            return self.last_accessed_at
        return self.updated_at


@dataclass
class Model:
    entries: dict[str, Entry] = field(default_factory=dict)

    def current(self, user: str, kind: str, key: str) -> Entry | None:
        found = [
            e
            for e in self.entries.values()
            if (e.user, e.kind, e.key) == (user, kind, key)
            and e.state in ("active", "pending_review")
        ]
        assert len(found) <= 1
        return found[0] if found else None

    def set_state(self, entry: Entry, state: str, now: datetime) -> None:
        if entry.state != state:
            entry.state, entry.state_since = state, now

    # -- agent actions, as the store should perform them --

    def remember(
        self,
        store: MemoryStore,
        user: str,
        kind: str,
        key: str,
        value: str,
        confidence: float,
        pinned: bool,
        now: datetime,
    ) -> None:
        result = store.remember(
            user, key, value, kind=kind, confidence=confidence, pinned=pinned or None
        )
        current = self.current(user, kind, key)
        if current is not None and current.value == value:
            target = current
        else:
            earlier = sorted(
                (
                    e
                    for e in self.entries.values()
                    if (e.user, e.kind, e.key, e.state, e.value)
                    == (user, kind, key, "superseded", value)
                ),
                key=lambda e: e.updated_at,
            )
            if current is not None:
                self.set_state(current, "superseded", now)
            if earlier:
                target = earlier[-1]
            else:
                assert result.id not in self.entries
                target = Entry(
                    result.id, user, kind, key, value, confidence, pinned, "active", now, now
                )
                self.entries[result.id] = target
                return
        assert result.id == target.id
        target.updated_at = now
        if confidence >= target.confidence:
            target.confidence = confidence
        target.pinned = target.pinned or pinned
        self.set_state(target, "active", now)

    def recall(self, store: MemoryStore, user: str, kind: str, key: str, now: datetime) -> None:
        result = store.recall(user, key, kind=kind)
        target = self.current(user, kind, key)
        if target is None:
            cold = sorted(
                (
                    e
                    for e in self.entries.values()
                    if (e.user, e.kind, e.key, e.state) == (user, kind, key, "cold")
                ),
                key=lambda e: (e.cold_reason != "superseded", e.updated_at),
            )
            if not cold:
                assert result is None
                return
            target = cold[-1]
            target.cold_reason = None
        assert result is not None and result.id == target.id
        target.last_accessed_at = now
        target.access_count += 1
        self.set_state(target, "active", now)

    def note(
        self, store: MemoryStore, user: str, text: str, confidence: float, now: datetime
    ) -> None:
        memory = store.add_note(user, text, confidence=confidence)
        self.entries[memory.id] = Entry(
            memory.id, user, "note", None, text, confidence, False, "active", now, now
        )

    # -- the jobs, as the rules say --

    def retire(self, entry: Entry, reason: str, now: datetime) -> None:
        self.set_state(entry, "cold", now)
        entry.cold_reason = reason

    def run_jobs(self, now: datetime) -> None:
        for e in list(self.entries.values()):  # settle
            if e.state == "superseded" and e.state_since < now - GREY * DAY:
                self.retire(e, "superseded", now)
        for e in list(self.entries.values()):  # expire: review grace first
            if e.state == "pending_review" and not e.pinned and e.state_since < now - GRACE * DAY:
                self.retire(e, "expired", now)
        for e in list(self.entries.values()):  # expire: TTL
            if e.state == "active" and not e.pinned and e.last_used < now - TTL[e.kind] * DAY:
                self.set_state(e, "pending_review", now)
        for e in list(self.entries.values()):  # demote
            if (
                e.state in ("active", "pending_review")
                and not e.pinned
                and e.confidence < DEMOTE_BELOW
                and e.last_used < now - UNUSED * DAY
            ):
                self.retire(e, "low_confidence", now)


def test_a_year_of_daily_runs_matches_the_rules_exactly(db_path: Path) -> None:
    rng = random.Random(20261130)
    config = Config.model_validate({"jobs": {"prune": {"max_facts": 10_000}}})
    store = MemoryStore(db_path, config=config)
    model = Model()
    users = [f"user{i}" for i in range(4)]
    keys = [f"key{i}" for i in range(6)]
    values = ["red", "green", "blue"]
    start = datetime(2027, 1, 1, tzinfo=UTC)
    with freeze_time(start) as clock:
        for day in range(366):
            midnight = start + day * DAY
            times = sorted(rng.sample(range(8 * 3600, 22 * 3600), 6))
            for offset in times:
                now = midnight + timedelta(seconds=offset)
                clock.move_to(now)
                # Skewed traffic: some pairs are used daily, others once in months, so every
                # state and every way back (renew, restore) occurs.
                user = rng.choices(users, weights=[60, 25, 10, 5])[0]
                key = rng.choices(keys, weights=[40, 25, 15, 10, 6, 4])[0]
                kind = "preference" if key in ("key4", "key5") else "fact"
                roll = rng.random()
                if roll < 0.45:
                    model.recall(store, user, kind, key, now)
                elif roll < 0.9:
                    model.remember(
                        store,
                        user,
                        kind,
                        key,
                        rng.choice(values),
                        rng.choice([0.3, 0.6, 0.9, 0.95]),
                        rng.random() < 0.03,
                        now,
                    )
                else:
                    model.note(store, user, f"note {day}-{offset}", rng.choice([0.4, 0.9]), now)
            run_at = midnight + DAY + timedelta(hours=3)
            clock.move_to(run_at)
            report = run_once(store, ["settle", "expire", "demote", "prune"])
            assert report.ok
            model.run_jobs(run_at)

    stored = {m.id: m for m in store.list_memories()}
    assert set(stored) == set(model.entries)
    states = {}
    for memory_id, expected in model.entries.items():
        memory = stored[memory_id]
        actual = (
            memory.state,
            memory.cold_reason,
            memory.value,
            memory.confidence,
            memory.pinned,
            memory.updated_at,
            memory.last_accessed_at,
            memory.access_count,
            memory.state_since,
        )
        wanted = (
            expected.state,
            expected.cold_reason,
            expected.value,
            expected.confidence,
            expected.pinned,
            expected.updated_at,
            expected.last_accessed_at,
            expected.access_count,
            expected.state_since,
        )
        assert actual == wanted, memory_id
        states[expected.state] = states.get(expected.state, 0) + 1
    # The simulation really exercised every state and every way to cold storage.
    assert set(states) == {"active", "pending_review", "superseded", "cold"}
    assert {e.cold_reason for e in model.entries.values()} >= {
        "expired",
        "superseded",
        "low_confidence",
    }
    actions = {change.action for change in store.changes()}
    assert actions >= {
        "create",
        "reconfirm",
        "supersede",
        "renew",
        "restore",
        "expire",
        "retire",
    }
    # Recalls of active entries are uses, counted in place: none is a logged change.
    assert "recall" not in actions
    assert all(len(places) == 1 for places in locations(db_path).values())
    assert replay(store) == current_images(store)  # the log plus the counted uses
    store.close()
