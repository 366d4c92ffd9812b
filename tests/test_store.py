"""MemoryStore, the agents' API: every call, checked against what is really in the files.

Time matters for most of these (re-confirmation, grey periods, expiry), so the clock is frozen
with freezegun and moved by whole days; maintenance states (pending review, cold) are created
by running the real jobs with ``run_once``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time
from helpers import T0, change_rows, raw_rows
from helpers.databases import is_postgres
from helpers.state import use_rows, uses_between

from memkeeper import Change, Episode, Memory, MemoryStore, Message
from memkeeper.errors import InvalidInput, MemkeeperError, NotFound
from memkeeper.maintenance.runner import run_once

DAY = timedelta(days=1)

pytestmark = pytest.mark.both_backends


def hot_row(store: MemoryStore, memory_id: str) -> dict[str, Any] | None:
    rows = [row for row in raw_rows(store.path, "memories") if row["id"] == memory_id]
    return rows[0] if rows else None


def cold_row(store: MemoryStore, memory_id: str) -> dict[str, Any] | None:
    if not is_postgres(store.cold_path) and not store.cold_path.exists():
        return None
    rows = [row for row in raw_rows(store.cold_path, "cold_memories") if row["id"] == memory_id]
    return rows[0] if rows else None


def actions(store: MemoryStore, memory_id: str) -> list[str]:
    return [change.action for change in store.changes(memory_id=memory_id)]


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds")


@pytest.fixture
def frozen():
    with freeze_time(T0) as clock:
        yield clock


# -- remember -------------------------------------------------------------------------------


def test_remember_creates_an_active_entry_with_every_field(store: MemoryStore, frozen) -> None:
    memory = store.remember("alice", "city", "Beijing", source="chat", confidence=0.95)

    assert isinstance(memory, Memory)
    row = hot_row(store, memory.id)
    assert row == {
        "id": memory.id,
        "user_id": "alice",
        "namespace": "",
        "kind": "fact",
        "key": "city",
        "value": "Beijing",
        "source": "chat",
        "confidence": 0.95,
        "state": "active",
        "pinned": 0,
        "ttl_days": None,
        "created_at": iso(T0),
        "updated_at": iso(T0),
        "last_accessed_at": None,
        "access_count": 0,
        "state_since": iso(T0),
        "last_used_at": iso(T0),
    }
    assert memory.created_at == T0
    assert memory.created_at.tzinfo is not None
    assert memory.to_image() == row
    assert len(memory.id) == 16
    int(memory.id, 16)


def test_remember_defaults_and_options(store: MemoryStore, frozen) -> None:
    plain = store.remember("alice", "name", "Xiaoming")
    assert (plain.confidence, plain.source, plain.kind, plain.pinned) == (0.9, "api", "fact", False)

    pref = store.remember(
        "alice",
        "report_format",
        "PDF",
        kind="preference",
        namespace="acme",
        pinned=True,
        ttl_days=7,
    )
    row = hot_row(store, pref.id)
    assert row is not None
    assert (row["kind"], row["namespace"], row["pinned"], row["ttl_days"]) == (
        "preference",
        "acme",
        1,
        7,
    )


def test_same_value_again_reconfirms_the_same_entry(store: MemoryStore, frozen) -> None:
    first = store.remember("alice", "city", "Beijing", confidence=0.6, source="inferred")
    frozen.tick(3 * DAY)
    again = store.remember("alice", "city", "Beijing", confidence=0.95, source="stated")

    assert again.id == first.id
    row = hot_row(store, first.id)
    assert row is not None
    assert row["created_at"] == iso(T0)
    assert row["updated_at"] == iso(T0 + 3 * DAY)
    assert row["last_used_at"] == iso(T0 + 3 * DAY)
    assert (row["confidence"], row["source"], row["state"]) == (0.95, "stated", "active")
    assert len(raw_rows(store.path, "memories")) == 1
    assert actions(store, first.id) == ["create", "reconfirm"]

    # A weaker re-assertion refreshes the entry but never lowers its confidence or source.
    frozen.tick(DAY)
    store.remember("alice", "city", "Beijing", confidence=0.5, source="guess")
    row = hot_row(store, first.id)
    assert row is not None
    assert (row["confidence"], row["source"], row["updated_at"]) == (
        0.95,
        "stated",
        iso(T0 + 4 * DAY),
    )


def test_pinned_none_keeps_the_pin_and_false_clears_it(store: MemoryStore) -> None:
    memory = store.remember("alice", "city", "Beijing", pinned=True)
    store.remember("alice", "city", "Beijing")
    assert store.get(memory.id).pinned is True
    store.remember("alice", "city", "Beijing", pinned=False)
    assert store.get(memory.id).pinned is False


def test_conflicting_value_supersedes_the_old_one(store: MemoryStore, frozen) -> None:
    old = store.remember("alice", "city", "Beijing")
    frozen.tick(DAY)
    new = store.remember("alice", "city", "Shanghai", source="chat 2")

    assert new.id != old.id
    assert new.state == "active"
    old_row = hot_row(store, old.id)
    assert old_row is not None
    assert old_row["state"] == "superseded"
    assert old_row["state_since"] == iso(T0 + DAY)
    assert old_row["value"] == "Beijing"
    current = [
        row
        for row in raw_rows(store.path, "memories")
        if row["key"] == "city" and row["state"] in ("active", "pending_review")
    ]
    assert [row["id"] for row in current] == [new.id]
    supersede = store.changes(memory_id=old.id, action="supersede")
    assert len(supersede) == 1
    assert supersede[0].details == {"superseded_by": new.id}
    assert supersede[0].before["state"] == "active"
    assert supersede[0].after["state"] == "superseded"
    assert store.recall("alice", "city").value == "Shanghai"


def test_reasserting_during_the_grey_period_revives_the_old_entry(
    store: MemoryStore, frozen
) -> None:
    beijing = store.remember("alice", "city", "Beijing")
    frozen.tick(DAY)
    shanghai = store.remember("alice", "city", "Shanghai")
    frozen.tick(DAY)
    revived = store.remember("alice", "city", "Beijing")

    assert revived.id == beijing.id
    assert revived.state == "active"
    assert store.get(shanghai.id).state == "superseded"
    assert len(raw_rows(store.path, "memories")) == 2  # no third row
    row = hot_row(store, beijing.id)
    assert row is not None
    assert (row["state"], row["updated_at"], row["state_since"]) == (
        "active",
        iso(T0 + 2 * DAY),
        iso(T0 + 2 * DAY),
    )
    assert actions(store, beijing.id) == ["create", "supersede", "reconfirm"]
    assert actions(store, shanghai.id) == ["create", "supersede"]


def test_remembering_an_entry_pending_review(store: MemoryStore, frozen) -> None:
    """The same value re-confirms it (active again); a new value supersedes it."""
    city = store.remember("alice", "city", "Beijing")
    tone = store.remember("alice", "tone", "brief")
    ttl = store.config.jobs.expire.ttl_days.fact
    run_once(store, ["expire"], now=T0 + (ttl + 1) * DAY)
    assert {store.get(city.id).state, store.get(tone.id).state} == {"pending_review"}
    frozen.move_to(T0 + (ttl + 2) * DAY)

    again = store.remember("alice", "city", "Beijing")
    assert (again.id, again.state) == (city.id, "active")
    assert again.updated_at == T0 + (ttl + 2) * DAY
    assert actions(store, city.id) == ["create", "expire", "reconfirm"]

    replaced = store.remember("alice", "tone", "detailed")
    assert replaced.id != tone.id
    assert store.get(tone.id).state == "superseded"
    assert actions(store, tone.id) == ["create", "expire", "supersede"]


def test_after_the_grey_period_the_old_value_is_in_cold_storage(store: MemoryStore, frozen) -> None:
    beijing = store.remember("alice", "city", "Beijing")
    frozen.tick(DAY)
    store.remember("alice", "city", "Shanghai")
    grey = store.config.jobs.settle.grey_days
    run_once(store, ["settle"], now=T0 + (grey + 2) * DAY)

    assert hot_row(store, beijing.id) is None
    cold = cold_row(store, beijing.id)
    assert cold is not None
    assert (cold["state"], cold["cold_reason"], cold["value"]) == ("cold", "superseded", "Beijing")
    # The current value is unaffected and still the one recalled.
    assert store.recall("alice", "city").value == "Shanghai"


def test_remember_rejects_bad_arguments_and_writes_nothing(store: MemoryStore) -> None:
    bad_calls = [
        {"user_id": "", "key": "k", "value": "v"},
        {"user_id": " alice", "key": "k", "value": "v"},
        {"user_id": "alice", "key": "", "value": "v"},
        {"user_id": "alice", "key": "a\nb", "value": "v"},
        {"user_id": "alice", "key": "k", "value": ""},
        {"user_id": "alice", "key": "k", "value": "   "},
        {"user_id": "alice", "key": "k", "value": "a\x00b"},
        {"user_id": "alice", "key": "k", "value": 42},
        {"user_id": "alice", "key": "k", "value": "v", "confidence": 1.5},
        {"user_id": "alice", "key": "k", "value": "v", "confidence": -0.1},
        {"user_id": "alice", "key": "k", "value": "v", "confidence": math.nan},
        {"user_id": "alice", "key": "k", "value": "v", "confidence": True},
        {"user_id": "alice", "key": "k", "value": "v", "confidence": "0.9"},
        {"user_id": "alice", "key": "k", "value": "v", "ttl_days": 0},
        {"user_id": "alice", "key": "k", "value": "v", "ttl_days": 1.5},
        {"user_id": "alice", "key": "k", "value": "v", "kind": "note"},
        {"user_id": "alice", "key": "k", "value": "v", "kind": "opinion"},
        {"user_id": "alice", "key": "k", "value": "v", "namespace": "a\tb"},
        {"user_id": "alice", "key": "k" * 257, "value": "v"},
    ]
    for call in bad_calls:
        with pytest.raises(InvalidInput):
            store.remember(**call)
    assert raw_rows(store.path, "memories") == []
    assert raw_rows(store.path, "changes") == []


def test_errors_name_the_field_without_echoing_the_value(store: MemoryStore) -> None:
    with pytest.raises(InvalidInput) as caught:
        store.remember("alice", "k", "x" * 70_000)
    assert "value" in str(caught.value)
    assert "xxxx" not in str(caught.value)
    assert isinstance(caught.value, MemkeeperError)


# -- recall ---------------------------------------------------------------------------------


def test_recall_returns_the_value_and_marks_it_used(store: MemoryStore, frozen) -> None:
    memory = store.remember("alice", "city", "Beijing")
    frozen.tick(2 * DAY)
    recalled = store.recall("alice", "city")
    assert recalled is not None
    assert (recalled.id, recalled.value, recalled.access_count) == (memory.id, "Beijing", 1)
    assert recalled.last_accessed_at == T0 + 2 * DAY
    frozen.tick(DAY)
    store.recall("alice", "city")

    row = hot_row(store, memory.id)
    assert row is not None
    assert (row["access_count"], row["last_accessed_at"], row["last_used_at"]) == (
        2,
        iso(T0 + 3 * DAY),
        iso(T0 + 3 * DAY),
    )
    assert row["updated_at"] == iso(T0)  # recalling is not re-confirming


def test_recall_of_an_unknown_key_is_none_and_writes_nothing(store: MemoryStore) -> None:
    store.remember("alice", "city", "Beijing")
    before = raw_rows(store.path, "changes")
    assert store.recall("alice", "country") is None
    assert store.recall("bob", "city") is None
    assert store.recall("alice", "city", namespace="acme") is None
    assert store.recall("alice", "city", kind="preference") is None
    assert raw_rows(store.path, "changes") == before
    # a read never creates cold storage (on PostgreSQL, a table that always exists)
    assert is_postgres(store.cold_path) or not store.cold_path.exists()


def test_recall_filters_by_kind_and_namespace(store: MemoryStore) -> None:
    fact = store.remember("alice", "format", "A4")
    pref = store.remember("alice", "format", "PDF", kind="preference")
    project = store.remember("alice", "format", "DOCX", kind="preference", namespace="acme")

    assert store.recall("alice", "format", kind="fact").id == fact.id
    assert store.recall("alice", "format", kind="preference").id == pref.id
    assert store.recall("alice", "format", namespace="acme").id == project.id
    assert {m.id for m in store.list("alice")} == {fact.id, pref.id, project.id}
    assert all(m.state == "active" for m in store.list("alice"))


def test_recall_renews_an_entry_pending_review(store: MemoryStore, frozen) -> None:
    memory = store.remember("alice", "city", "Beijing")
    ttl = store.config.jobs.expire.ttl_days.fact
    run_once(store, ["expire"], now=T0 + (ttl + 1) * DAY)
    assert hot_row(store, memory.id)["state"] == "pending_review"

    frozen.move_to(T0 + (ttl + 3) * DAY)
    recalled = store.recall("alice", "city")

    assert recalled is not None
    assert (recalled.id, recalled.state, recalled.value) == (memory.id, "active", "Beijing")
    row = hot_row(store, memory.id)
    assert row is not None
    assert (row["state"], row["state_since"], row["access_count"]) == (
        "active",
        iso(T0 + (ttl + 3) * DAY),
        1,
    )
    renew = store.changes(memory_id=memory.id, action="renew")
    assert len(renew) == 1
    assert renew[0].before["state"] == "pending_review"
    assert renew[0].after == row
    # Active again: the next expire run a day later leaves it alone.
    run_once(store, ["expire"], now=T0 + (ttl + 4) * DAY)
    assert hot_row(store, memory.id)["state"] == "active"


def test_recall_brings_back_an_entry_from_cold_storage(store: MemoryStore, frozen) -> None:
    memory = store.remember("alice", "city", "Beijing")
    ttl = store.config.jobs.expire.ttl_days.fact
    grace = store.config.jobs.expire.review_grace_days
    run_once(store, ["expire"], now=T0 + (ttl + 1) * DAY)
    run_once(store, ["expire"], now=T0 + (ttl + grace + 2) * DAY)
    assert hot_row(store, memory.id) is None
    assert cold_row(store, memory.id)["cold_reason"] == "expired"
    assert store.get(memory.id).state == "cold"

    frozen.move_to(T0 + 400 * DAY)
    recalled = store.recall("alice", "city")

    assert recalled is not None
    assert (recalled.id, recalled.state, recalled.value) == (memory.id, "active", "Beijing")
    assert cold_row(store, memory.id) is None
    row = hot_row(store, memory.id)
    assert row is not None
    assert (row["state"], row["access_count"], row["last_accessed_at"]) == (
        "active",
        1,
        iso(T0 + 400 * DAY),
    )
    restore = store.changes(memory_id=memory.id, action="restore")
    assert len(restore) == 1
    assert restore[0].before["state"] == "cold"
    assert restore[0].after == row
    if not is_postgres(store.cold_path):  # PostgreSQL moves in one transaction: no marks
        assert raw_rows(store.cold_path, "moves_in_flight") == []


def test_recall_from_cold_prefers_the_value_current_when_retired(
    store: MemoryStore, frozen
) -> None:
    store.remember("alice", "city", "Beijing")
    frozen.tick(DAY)
    shanghai = store.remember("alice", "city", "Shanghai")  # Beijing superseded
    grey = store.config.jobs.settle.grey_days
    ttl = store.config.jobs.expire.ttl_days.fact
    grace = store.config.jobs.expire.review_grace_days
    run_once(store, ["settle"], now=T0 + (grey + 2) * DAY)
    run_once(store, ["expire"], now=T0 + (ttl + 2) * DAY)
    run_once(store, ["expire"], now=T0 + (ttl + grace + 3) * DAY)
    assert raw_rows(store.path, "memories") == []
    assert len(raw_rows(store.cold_path, "cold_memories")) == 2

    frozen.move_to(T0 + 400 * DAY)
    recalled = store.recall("alice", "city")
    assert recalled is not None
    assert (recalled.id, recalled.value) == (shanghai.id, "Shanghai")
    assert [row["value"] for row in raw_rows(store.cold_path, "cold_memories")] == ["Beijing"]


# -- notes, messages, episodes --------------------------------------------------------------


def test_add_note(store: MemoryStore, frozen) -> None:
    note = store.add_note("alice", "Deliver the report before Wednesday", namespace="acme")
    assert (note.kind, note.key, note.state, note.namespace) == ("note", None, "active", "acme")
    second = store.add_note("alice", "Deliver the report before Wednesday", namespace="acme")
    assert second.id != note.id  # notes have no key: the same text twice is two notes
    row = hot_row(store, note.id)
    assert row is not None
    assert row["value"] == "Deliver the report before Wednesday"
    assert row["created_at"] == iso(T0)
    assert actions(store, note.id) == ["create"]
    with pytest.raises(InvalidInput):
        store.add_note("alice", "")
    with pytest.raises(InvalidInput):
        store.add_note("alice", "ok", confidence=2)


def test_append_message_and_history(store: MemoryStore, frozen) -> None:
    sent = []
    for index, role in enumerate(["user", "assistant", "user", "assistant", "system"]):
        sent.append(store.append_message("alice", "s1", role, f"message {index}"))
        frozen.tick(timedelta(minutes=1))
    store.append_message("alice", "s2", "user", "other session")
    store.append_message("alice", "s1", "user", "other namespace", namespace="acme")
    store.append_message("bob", "s1", "user", "other user")

    assert all(isinstance(message, Message) for message in sent)
    history = store.history("alice", "s1")
    assert [m.content for m in history] == [f"message {i}" for i in range(5)]
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant", "system"]
    assert history[0].created_at == T0
    assert history[4].created_at == T0 + timedelta(minutes=4)
    assert [m.content for m in store.history("alice", "s1", limit=2)] == ["message 3", "message 4"]
    assert [m.content for m in store.history("alice", "s1", namespace="acme")] == [
        "other namespace"
    ]
    # Summarized messages leave the history (the summarize job sets summarized_at).
    conn_rows = raw_rows(store.path, "messages")
    assert len(conn_rows) == 8
    store.storage.hot.conn.execute(
        "UPDATE messages SET summarized_at = ? WHERE id IN (?, ?)",
        [iso(T0), sent[0].id, sent[1].id],
    )
    assert [m.content for m in store.history("alice", "s1")] == [f"message {i}" for i in (2, 3, 4)]
    with pytest.raises(InvalidInput):
        store.append_message("alice", "s1", "robot", "hi")
    with pytest.raises(InvalidInput):
        store.history("alice", "s1", limit=0)


def test_record_episode_and_episodes(store: MemoryStore, frozen) -> None:
    for index in range(4):
        episode = store.record_episode(
            "alice",
            f"task {index}",
            namespace="acme",
            input_summary="3 documents",
            output_summary="an outline",
            user_feedback="added a table" if index == 1 else "",
            status="completed" if index != 3 else "cancelled",
        )
        assert isinstance(episode, Episode)
        frozen.tick(DAY)
    store.record_episode("alice", "elsewhere", namespace="other")

    timeline = store.episodes("alice", namespace="acme")
    assert [e.task_name for e in timeline] == ["task 0", "task 1", "task 2", "task 3"]
    assert timeline[1].user_feedback == "added a table"
    assert timeline[3].status == "cancelled"
    assert timeline[0].created_at == T0
    assert [e.task_name for e in store.episodes("alice", namespace="acme", limit=2)] == [
        "task 2",
        "task 3",
    ]
    assert store.episodes("alice") == []
    assert len(raw_rows(store.path, "episodes")) == 5
    with pytest.raises(InvalidInput):
        store.record_episode("alice", "t", status="done")
    with pytest.raises(InvalidInput):
        store.record_episode("alice", "")


# -- get, list ------------------------------------------------------------------------------


def test_get_finds_hot_and_cold_entries(store: MemoryStore, frozen) -> None:
    hot = store.remember("alice", "city", "Beijing")
    gone = store.remember("alice", "old", "value", kind="preference")
    ttl = store.config.jobs.expire.ttl_days.preference
    grace = store.config.jobs.expire.review_grace_days
    store.recall("alice", "city")
    frozen.move_to(T0 + (ttl + 1) * DAY)
    store.recall("alice", "city")  # keeps the fact in use
    run_once(store, ["expire"], now=T0 + (ttl + 1) * DAY)
    run_once(store, ["expire"], now=T0 + (ttl + grace + 2) * DAY)

    assert store.get(hot.id).state == "active"
    cold = store.get(gone.id)
    assert cold is not None
    assert (cold.state, cold.cold_reason, cold.value) == ("cold", "expired", "value")
    assert cold.retired_at == T0 + (ttl + grace + 2) * DAY
    assert store.get("0123456789abcdef") is None


def test_list_filters(store: MemoryStore, frozen) -> None:
    a = store.remember("alice", "city", "Beijing")
    frozen.tick(DAY)
    b = store.remember("alice", "city", "Shanghai")
    frozen.tick(DAY)
    c = store.remember("alice", "tone", "brief", kind="preference", namespace="acme")
    frozen.tick(DAY)
    d = store.add_note("alice", "a note", namespace="acme")
    frozen.tick(DAY)
    e = store.remember("bob", "city", "Paris")

    def ids(**filters: Any) -> list[str]:
        user = filters.pop("user", None)
        return [m.id for m in store.list(user, **filters)]

    assert ids() == [a.id, b.id, c.id, d.id, e.id]
    assert ids(user="alice") == [a.id, b.id, c.id, d.id]
    assert ids(user="alice", namespace="") == [a.id, b.id]
    assert ids(namespace="acme") == [c.id, d.id]
    assert ids(state="superseded") == [a.id]
    assert ids(state="active", kind="fact") == [b.id, e.id]
    assert ids(kind="note") == [d.id]
    assert ids(state="cold") == []
    assert ids(user="nobody") == []
    with pytest.raises(InvalidInput):
        store.list(state="deleted")
    with pytest.raises(InvalidInput):
        store.list(kind="opinion")
    assert store.list_memories == store.list


# -- the change log -------------------------------------------------------------------------


def test_changes_filters(store: MemoryStore, frozen) -> None:
    a = store.remember("alice", "city", "Beijing")
    store.remember("alice", "city", "Shanghai")
    store.add_note("alice", "note", namespace="acme")
    store.remember("bob", "city", "Paris")
    ttl = store.config.jobs.expire.ttl_days.note
    report = run_once(store, ["expire"], now=T0 + (ttl + 1) * DAY)
    run_id = report.results[0].run_id

    everything = store.changes()
    assert all(isinstance(change, Change) for change in everything)
    assert [c.id for c in everything] == sorted(c.id for c in everything)
    assert len(everything) == len(raw_rows(store.path, "changes"))
    assert [c.action for c in store.changes(memory_id=a.id)] == ["create", "supersede"]
    assert {c.user_id for c in store.changes(user_id="bob")} == {"bob"}
    assert [c.action for c in store.changes(namespace="acme")] == ["create", "expire"]
    assert len(store.changes(action="supersede")) == 1
    by_run = store.changes(run_id=run_id)
    assert by_run
    assert {c.run_id for c in by_run} == {run_id}
    assert {c.actor for c in by_run} == {"job:expire"}
    newest = store.changes(limit=2, newest_first=True)
    assert [c.id for c in newest] == [everything[-1].id, everything[-2].id]
    assert store.changes(user_id="alice", action="create", namespace="")[0].memory_id == a.id
    with pytest.raises(InvalidInput):
        store.changes(limit=0)


def test_every_change_has_exactly_one_log_row_with_matching_images(
    store: MemoryStore, frozen
) -> None:
    """Count log rows per operation, and check each memory's rows form an unbroken chain
    (plus the in-place uses between them) whose last after-image is exactly the stored row
    (hot or cold)."""
    ttl = store.config.jobs.expire.ttl_days.fact
    grace = store.config.jobs.expire.review_grace_days
    grey = store.config.jobs.settle.grey_days
    steps: list[tuple[str, int]] = []

    def step(label: str, expected_rows: int, action) -> None:
        before = len(raw_rows(store.path, "changes"))
        action()
        after = len(raw_rows(store.path, "changes"))
        assert after - before == expected_rows, label
        steps.append((label, expected_rows))

    step("create", 1, lambda: store.remember("alice", "city", "Beijing"))
    step("reconfirm", 1, lambda: store.remember("alice", "city", "Beijing", confidence=0.99))
    step("conflict", 2, lambda: store.remember("alice", "city", "Shanghai"))
    step("revive", 2, lambda: store.remember("alice", "city", "Beijing"))
    step("conflict again", 2, lambda: store.remember("alice", "city", "Paris"))
    step("note", 1, lambda: store.add_note("alice", "call the client"))
    step("preference", 1, lambda: store.remember("alice", "tone", "brief", kind="preference"))
    step("recall", 0, lambda: store.recall("alice", "city"))  # a use: counted, not logged
    step("unknown recall", 0, lambda: store.recall("alice", "unknown"))
    step("message", 0, lambda: store.append_message("alice", "s", "user", "hi"))
    step("episode", 0, lambda: store.record_episode("alice", "task"))
    # Jobs: settle (2 superseded entries), expire (tone is unused for 30+ days).
    step("settle", 2, lambda: run_once(store, ["settle"], now=T0 + (grey + 2) * DAY))
    frozen.move_to(T0 + (ttl + 1) * DAY)
    step("expire", 3, lambda: run_once(store, ["expire"], now=T0 + (ttl + 1) * DAY))
    step("renew", 1, lambda: store.recall("alice", "city"))
    step("retire", 2, lambda: run_once(store, ["expire"], now=T0 + (ttl + grace + 2) * DAY))
    frozen.move_to(T0 + (ttl + grace + 3) * DAY)
    step("restore from cold", 1, lambda: store.recall("alice", "tone"))

    rows = change_rows(store.path)
    assert len(rows) == sum(n for _, n in steps)
    stored = {row["id"]: row for row in raw_rows(store.path, "memories")}
    stored.update({row["id"]: row for row in raw_rows(store.cold_path, "cold_memories")})
    chains: dict[str, dict[str, Any] | None] = {}
    for row in rows:
        memory_id = row["memory_id"]
        uses_between(chains.get(memory_id), row["before"], f"at change #{row['id']}")
        image = row["after"] or row["before"]
        assert (row["user_id"], row["namespace"]) == (image["user_id"], image["namespace"])
        chains[memory_id] = row["after"]
    assert set(chains) == set(stored)
    for memory_id, image in chains.items():
        assert image == stored[memory_id]
    # The plain recall was counted in `uses` (and is in the expiry's before image).
    assert [[d["count"] for d in days] for days in use_rows(store).values()] == [[1]]


# -- explain, status ------------------------------------------------------------------------


def test_explain_tells_the_whole_life(store: MemoryStore, frozen) -> None:
    memory = store.remember("alice", "city", "Beijing", source="chat", confidence=0.95)
    ttl = store.config.jobs.expire.ttl_days.fact
    run_once(store, ["expire"], now=T0 + (ttl + 1) * DAY)

    text = store.explain(memory.id)
    lines = text.splitlines()
    assert lines[0] == f"Memory {memory.id} — fact 'city' of user 'alice'"
    assert lines[1].startswith("Now: pending_review; value 'Beijing'; confidence 0.95;")
    assert "History:" in lines
    assert any("created: new value; value 'Beijing'" in line for line in lines)
    assert any(f"expired: unused {ttl + 1} days ≥ TTL {ttl} days" in line for line in lines)
    assert any("job:expire, run " in line for line in lines)
    with pytest.raises(NotFound):
        store.explain("ffffffffffffffff")


def test_status_counts_files_and_runs(store: MemoryStore, frozen) -> None:
    assert store.status()["counts"] == {}
    store.remember("alice", "city", "Beijing")
    store.remember("alice", "city", "Shanghai")
    store.remember("alice", "tone", "brief", kind="preference")
    store.add_note("alice", "n")
    store.append_message("alice", "s", "user", "hi")
    store.append_message("alice", "s", "assistant", "hello")
    store.record_episode("alice", "task")
    grey = store.config.jobs.settle.grey_days
    run_once(store, ["settle"], now=T0 + (grey + 2) * DAY)

    status = store.status()
    assert status["counts"] == {
        "active": {"fact": 1, "preference": 1, "note": 1},
        "cold": {"fact": 1},
    }
    assert status["messages"] == {"total": 2, "unsummarized": 2}
    assert status["episodes"] == 1
    assert status["files"]["hot"]["path"] == str(store.path)
    tables = status["files"]["hot"]["tables"]
    if is_postgres(store.path):  # one database: cold storage is one of its tables
        assert set(status["files"]) == {"hot"}
        assert tables["memories"]["rows"] == 3 and tables["cold_memories"]["rows"] == 1
        assert tables["messages"]["rows"] == 2 and tables["episodes"]["rows"] == 1
        sizes = [table["bytes"] for table in tables.values()]
        assert status["files"]["hot"]["bytes"]["db"] == sum(sizes) and min(sizes) > 0
    else:
        assert "database" not in status
        assert status["files"]["hot"]["bytes"]["db"] == Path(store.path).stat().st_size
        assert status["files"]["cold"]["path"] == str(store.cold_path)
        assert status["files"]["cold"]["bytes"]["db"] > 0
    assert tables["changes"]["rows"] == len(change_rows(store.path))
    assert set(status["last_runs"]) == {"settle"}
    run = status["last_runs"]["settle"]
    assert (run.status, run.started_at, run.dry_run) == ("ok", T0 + (grey + 2) * DAY, False)


@pytest.mark.sqlite_only  # the second file; PostgreSQL: test_status_on_postgresql_*
def test_status_of_a_fresh_database_has_no_cold_file(store: MemoryStore) -> None:
    status = store.status()
    assert status["files"]["cold"]["bytes"] == {"db": None, "wal": None}
    assert status["messages"] == {"total": 0, "unsummarized": 0}
    assert status["last_runs"] == {}
    assert not store.cold_path.exists()


def test_status_on_postgresql_names_server_schema_and_tables_never_the_password(
    db_path: Path | str,
) -> None:
    """On PostgreSQL ``status`` shows the server's version, memkeeper's schema and its
    version and every table's size, instead of SQLite's pages (and on SQLite no such part)."""
    if not is_postgres(db_path):
        with MemoryStore(db_path) as store:
            status = store.status()
        assert "database" not in status and status["files"]["hot"]["pages"]["page_size"] > 0
        return
    from memkeeper.storage.postgres.ddl import TABLES
    from memkeeper.storage.postgres.schema import KNOWN_STEPS

    # The test server trusts its superuser: a password in the URL is accepted, unused.
    url = str(db_path).replace("postgres:@", "postgres:hunter2-pw@", 1)
    assert "hunter2-pw" in url
    with MemoryStore(url) as store:
        store.remember("alice", "city", "Beijing")
        status = store.status()
        with store.storage.lock:  # a connection of the store's pool, leased to this thread
            version = store.storage.hot.raw.info.server_version
    database = status["database"]
    assert database["pool"] == {"size": 4, "open": 1, "in_use": 1, "waiting": 0}  # its own
    assert database["server_version"].split(".")[0] == str(version // 10000)
    assert (database["schema"], database["schema_version"]) == ("memkeeper", KNOWN_STEPS[-1])
    assert database["schema_current"] is True
    assert set(database["extensions"]) == {"vector", "pg_trgm"}
    assert set(status["files"]["hot"]["tables"]) == set(TABLES)
    assert status["files"]["hot"]["tables"]["memories"]["rows"] == 1
    assert status["files"]["hot"]["pages"] is None
    assert "hunter2-pw" not in repr(status) and "***" in database["url"]
    assert database["url"] == status["files"]["hot"]["path"]


# -- plumbing -------------------------------------------------------------------------------


def test_default_location_is_the_user_data_dir(isolated_user_dirs: Path) -> None:
    with MemoryStore() as store:
        assert store.path == isolated_user_dirs / "data" / "memkeeper" / "memory.db"
        assert store.cold_path == store.path.with_name("memory-cold.db")
        store.remember("alice", "city", "Beijing")
    assert (isolated_user_dirs / "data" / "memkeeper" / "memory.db").is_file()


def test_environment_and_config_choose_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memkeeper.config import Config, DatabaseSection

    configured = Config(
        database=DatabaseSection(
            path=str(tmp_path / "from-config.db"), cold_path=str(tmp_path / "c" / "cold.db")
        )
    )
    with MemoryStore(config=configured) as store:
        assert store.path == tmp_path / "from-config.db"
        assert store.cold_path == tmp_path / "c" / "cold.db"
    monkeypatch.setenv("MEMKEEPER_DB", str(tmp_path / "from-env.db"))
    with MemoryStore(config=configured) as store:
        assert store.path == tmp_path / "from-env.db"
    with MemoryStore(tmp_path / "explicit.db", config=configured) as store:
        assert store.path == tmp_path / "explicit.db"


def test_a_custom_clock_and_actor(db_path: Path) -> None:
    moment = datetime(2030, 5, 6, 7, 8, 9, tzinfo=UTC)
    with MemoryStore(db_path, clock=lambda: moment, actor="agent-7") as store:
        memory = store.remember("alice", "city", "Beijing")
        assert memory.created_at == moment
        assert store.now() == moment
        assert store.changes()[0].actor == "agent-7:remember"
        assert store.changes()[0].at == moment


def test_one_store_is_safe_from_several_threads(store: MemoryStore) -> None:
    import threading

    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for index in range(25):
                store.remember("alice", f"t{worker}-{index}", "v")
                store.remember("alice", "shared", f"w{worker}-{index}")
                store.recall("alice", "shared")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    rows = raw_rows(store.path, "memories")
    assert len([r for r in rows if r["key"] != "shared"]) == 100
    shared = [r for r in rows if r["key"] == "shared"]
    assert len(shared) == 100
    assert [r["state"] for r in shared].count("active") == 1
