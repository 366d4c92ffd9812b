"""A user's "forget this" is a hard delete with no residue anywhere (seed 003 §3.4).

The proof is in the raw bytes: a distinctive value is put through every place a copy can end
up (the hot row, superseded rows, cold storage, the change log's before/after images, the WAL
files), then forgotten, then both databases are checkpointed and every byte of every file is
searched for it. On PostgreSQL (the module runs on both backends) the server owns the files:
the places searched are every row of every table of memkeeper's schema
(``helpers.erasure.places_holding``; tests/postgres/test_pg_forget.py adds the VACUUM).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from freezegun import freeze_time
from helpers import T0, change_rows, checkpoint_files, files_containing, raw_rows
from helpers.erasure import cold_place, hot_place, places_holding

from memkeeper import MemoryStore
from memkeeper.maintenance.runner import run_once

DAY = timedelta(days=1)

pytestmark = pytest.mark.both_backends
SECRET = "ZEBRA-4711-secret-value"
NEEDLE = SECRET.encode()


@pytest.fixture
def frozen() -> Iterator:
    with freeze_time(T0) as clock:
        yield clock


def spread_everywhere(store: MemoryStore, frozen) -> dict[str, str]:
    """Put SECRET (and values containing it) through create, conflict, revive, settle, expire,
    retire and recall-back. Returns the ids of what was created, by role."""
    config = store.config.jobs
    main = store.remember("alice", "city", SECRET, source="chat", confidence=0.95)
    frozen.tick(DAY)
    draft = store.remember("alice", "city", f"{SECRET} (draft)")  # main superseded
    frozen.tick(DAY)
    store.remember("alice", "city", SECRET)  # main revived, draft superseded
    frozen.tick(DAY)
    other = store.remember("alice", "city", f"Paris, not {SECRET}")  # main superseded again
    frozen.tick(DAY)
    store.remember("alice", "city", SECRET)  # main revived again, other superseded
    # Grey period over: both superseded values go to cold storage.
    run_once(store, ["settle"], now=T0 + (config.settle.grey_days + 10) * DAY)
    # Unused past its TTL: pending review, then retired to cold storage too.
    expiry = T0 + (config.expire.ttl_days.fact + 10) * DAY
    run_once(store, ["expire"], now=expiry)
    retired = expiry + (config.expire.review_grace_days + 1) * DAY
    run_once(store, ["expire"], now=retired)
    assert store.get(main.id).state == "cold"
    # Recalled: back from cold storage into the hot file.
    frozen.move_to(retired + DAY)
    assert store.recall("alice", "city").id == main.id
    return {"main": main.id, "draft": draft.id, "other": other.id}


def bystanders(store: MemoryStore) -> dict[str, str]:
    """Entries that must survive a forget of alice's city."""
    return {
        "bob": store.remember("bob", "city", "Lisbon").id,
        "namespace": store.remember("alice", "city", "Oslo", namespace="acme").id,
        "key": store.remember("alice", "country", "Norway").id,
    }


@pytest.mark.sqlite_only  # bytes of the files; PostgreSQL: test_pg_forget.py
def test_forget_leaves_no_byte_of_the_value_in_any_file(store: MemoryStore, frozen) -> None:
    ids = spread_everywhere(store, frozen)
    keep = bystanders(store)
    # Precondition: copies really are in both files (so the final check can fail).
    checkpoint_files(store.path)
    found = files_containing(store.path, NEEDLE)
    assert "memory.db" in found
    assert "memory-cold.db" in found
    assert any(SECRET in json.dumps(row) for row in change_rows(store.path))
    kept_before = {key: store.get(memory_id) for key, memory_id in keep.items()}

    erased = store.forget("alice", "city")

    assert erased == 3
    assert files_containing(store.path, NEEDLE) == []  # even before any outside checkpoint
    checkpoint_files(store.path)
    assert files_containing(store.path, NEEDLE) == []
    for memory_id in ids.values():
        assert store.get(memory_id) is None
        assert store.changes(memory_id=memory_id) == []
    assert store.recall("alice", "city") is None
    # Bystanders are untouched, with their history.
    for key, memory_id in keep.items():
        assert store.get(memory_id) == kept_before[key]
        assert [c.action for c in store.changes(memory_id=memory_id)] == ["create"]
    store.close()
    assert files_containing(store.path, NEEDLE) == []


def test_the_tombstone_says_what_was_erased_but_holds_no_content(
    store: MemoryStore, frozen
) -> None:
    ids = spread_everywhere(store, frozen)
    frozen.tick(DAY)
    store.forget("alice", "city")

    tombstones = [row for row in change_rows(store.path) if row["action"] == "forget"]
    assert len(tombstones) == 1
    tomb = tombstones[0]
    assert tomb["memory_id"] is None
    assert (tomb["before"], tomb["after"], tomb["source"]) == (None, None, None)
    assert (tomb["user_id"], tomb["namespace"], tomb["actor"]) == ("alice", "", "api:forget")
    assert tomb["details"]["memory_ids"] == sorted(ids.values())
    assert tomb["details"]["erased"]["memories"] == 3
    assert tomb["details"]["erased"]["changes"] > 10
    assert tomb["at"] == store.now().isoformat(timespec="microseconds")
    flat = json.dumps(tomb, ensure_ascii=False)
    assert SECRET not in flat
    assert "city" not in flat  # not even the key: only ids and counts
    # The only rows left about alice's erased key are the tombstone.
    remaining = {row["memory_id"] for row in change_rows(store.path)}
    assert not remaining & set(ids.values())

    text = store.explain(ids["main"])
    assert "erased" in text
    assert SECRET not in text


def test_forget_only_matches_the_exact_owner_namespace_and_key(store: MemoryStore) -> None:
    store.remember("alice", "city", "Beijing")
    store.remember("alice", "city", "Oslo", namespace="acme")
    store.remember("alice", "City", "Rome")
    store.remember("alice", "cit%", "Wildcard")
    store.remember("bob", "city", "Lisbon")

    assert store.forget("alice", "city") == 1
    left = sorted((m.user_id, m.namespace, m.key, m.value) for m in store.list())
    assert left == [
        ("alice", "", "City", "Rome"),
        ("alice", "", "cit%", "Wildcard"),
        ("alice", "acme", "city", "Oslo"),
        ("bob", "", "city", "Lisbon"),
    ]
    assert store.forget("alice", "nothing") == 0


def test_forget_memory_erases_one_note_with_its_history(store: MemoryStore, frozen) -> None:
    note = store.add_note("alice", f"reminder: {SECRET}")
    other = store.add_note("alice", "another note")
    # Send the note to cold storage and back, so it has a long history in both files.
    ttl = store.config.jobs.expire.ttl_days.note
    grace = store.config.jobs.expire.review_grace_days
    run_once(store, ["expire"], now=T0 + (ttl + 1) * DAY)
    run_once(store, ["expire"], now=T0 + (ttl + grace + 2) * DAY)
    assert store.get(note.id).state == "cold"
    assert cold_place(store.path) in places_holding(store.path, NEEDLE)

    assert store.forget_memory(note.id) == 1

    assert places_holding(store.path, NEEDLE) == []
    assert store.get(note.id) is None
    assert store.get(other.id) is not None
    assert store.changes(memory_id=note.id) == []
    tomb = store.changes(action="forget")
    assert len(tomb) == 1
    assert tomb[0].details["memory_ids"] == [note.id]
    # An unknown id erases nothing and writes nothing.
    rows = change_rows(store.path)
    assert store.forget_memory("0000000000000000") == 0
    assert change_rows(store.path) == rows


def test_forget_user_erases_memories_messages_episodes_and_log(store: MemoryStore, frozen) -> None:
    spread_everywhere(store, frozen)
    store.add_note("alice", f"note {SECRET}", namespace="acme")
    store.append_message("alice", "s1", "user", f"my password is {SECRET}")
    store.append_message("alice", "s1", "assistant", f"I will remember {SECRET}")
    store.record_episode(
        "alice",
        f"task {SECRET}",
        input_summary=f"in {SECRET}",
        output_summary=f"out {SECRET}",
        user_feedback=f"feedback {SECRET}",
    )
    store.forget("alice", "nothing-yet")  # an earlier tombstone of alice's
    bob = store.remember("bob", "city", "Lisbon")
    store.append_message("bob", "s1", "user", "hello")
    store.record_episode("bob", "bob's task")
    held = set(places_holding(store.path, NEEDLE))
    assert held >= {hot_place(store.path), cold_place(store.path)}

    counts = store.forget_user("alice")

    assert counts["memories"] == 4
    assert counts["messages"] == 2
    assert counts["episodes"] == 1
    assert counts["changes"] > 10
    assert places_holding(store.path, NEEDLE) == []
    assert [m.user_id for m in store.list()] == ["bob"]
    assert [row["user_id"] for row in raw_rows(store.path, "messages")] == ["bob"]
    assert [row["user_id"] for row in raw_rows(store.path, "episodes")] == ["bob"]
    assert store.history("alice", "s1") == []
    assert store.episodes("alice") == []
    # Alice's log: only the new tombstone, which names no content.
    alice_rows = [row for row in change_rows(store.path) if row["user_id"] == "alice"]
    assert len(alice_rows) == 1
    assert alice_rows[0]["action"] == "forget"
    assert alice_rows[0]["namespace"] is None
    assert alice_rows[0]["details"]["erased"] == counts
    assert SECRET not in json.dumps(alice_rows[0])
    # Bob is untouched.
    assert store.get(bob.id).value == "Lisbon"
    assert [c.action for c in store.changes(memory_id=bob.id)] == ["create"]
    assert store.status()["messages"]["total"] == 1


def test_forget_works_across_processes_with_the_store_closed(db_path: Path) -> None:
    with MemoryStore(db_path) as store:
        store.remember("alice", "city", SECRET)
    with MemoryStore(db_path) as store:
        assert hot_place(db_path) in places_holding(db_path, NEEDLE)
        assert store.forget("alice", "city") == 1
    assert places_holding(db_path, NEEDLE) == []


def test_forgetting_what_is_not_there_changes_nothing(store: MemoryStore) -> None:
    store.remember("alice", "city", "Beijing")
    before = len(store.changes())
    assert store.forget("alice", "no-such-key") == 0
    assert store.forget_user("nobody") == {
        "memories": 0,
        "changes": 0,
        "messages": 0,
        "episodes": 0,
    }
    assert len(store.changes()) == before


def test_forget_namespace_erases_one_project_and_keeps_the_rest(
    store: MemoryStore, frozen, db_path: Path
) -> None:
    """A project (seed 003 §3.4): its entries in every state and file, messages, episodes,
    vectors and log rows; the user's profile, other projects and other users are kept."""
    from memkeeper.cli import main
    from memkeeper.errors import InvalidInput
    from memkeeper.storage.tombstones import is_tombstoned

    draft = store.remember("alice", "format", f"{SECRET} draft", namespace="acme")
    frozen.tick(DAY)
    store.remember("alice", "format", f"{SECRET} final", namespace="acme")  # draft superseded
    note = store.add_note("alice", f"note {SECRET}", namespace="acme")
    store.append_message("alice", "s1", "user", f"say {SECRET}", namespace="acme")
    store.record_episode("alice", f"task {SECRET}", namespace="acme", output_summary=SECRET)
    run_once(store, ["settle"], now=store.now() + 30 * DAY)  # the draft retired to cold
    profile = store.remember("alice", "name", "Alice")
    other = store.remember("alice", "format", "Markdown", namespace="globex")
    store.record_episode("alice", "globex task", namespace="globex")
    bob = store.remember("bob", "format", "PDF", namespace="acme")
    held = set(places_holding(store.path, NEEDLE))
    assert held >= {hot_place(store.path), cold_place(store.path)}
    assert store.get(draft.id) is None or store.get(draft.id).state in ("cold", "superseded")

    counts = store.forget_namespace("alice", "acme")

    assert counts["memories"] == 3 and counts["messages"] == 1 and counts["episodes"] == 1
    assert places_holding(store.path, NEEDLE) == []
    assert store.list_memories("alice", namespace="acme") == []
    assert store.episodes("alice", namespace="acme") == []
    assert store.get(note.id) is None
    assert [c.action for c in store.changes(namespace="acme", user_id="alice")] == ["forget"]
    for kept in (profile, other, bob):
        assert store.get(kept.id) is not None
    assert [e.task_name for e in store.episodes("alice", namespace="globex")] == ["globex task"]
    with store.storage.lock:
        assert is_tombstoned(store.storage.hot.conn, "key", ("alice", "acme", "format"))
        assert is_tombstoned(store.storage.hot.conn, "memory", (note.id,))
    # The profile is not a project; nothing left is "not found" (exit 3) on the command line.
    with pytest.raises(InvalidInput, match="profile"):
        store.forget_namespace("alice", "")
    store.close()
    assert main(["--db", str(db_path), "forget-namespace", "alice", "acme", "--yes"]) == 3
    assert main(["--db", str(db_path), "forget-namespace", "alice", "globex", "--yes"]) == 0
