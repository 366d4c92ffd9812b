"""Buffered uses (issue 19, item 5): the MCP server's stores record recall's and search's uses
in a per-process buffer written in batches (memkeeper.storage.use_buffer), and everything
tests/test_recall_uses.py pins for per-call uses still holds: the rows the rules read, the
jobs' agent-wins re-check, forget's erasure, explain, and the log plus uses replaying to
the exact state.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from helpers import T0, current_images, locations, replay
from helpers.clocks import Clock
from helpers.state import use_rows

from memkeeper import MemoryStore
from memkeeper.config import Config
from memkeeper.maintenance.runner import run_once
from memkeeper.mcp.auth import Principal
from memkeeper.mcp.calls import Caller, call
from memkeeper.mcp.inline import answer_inline
from memkeeper.mcp.store_ref import StoreRef
from memkeeper.storage import use_buffer

DAY = timedelta(days=1)


def _uses(store: MemoryStore) -> dict[str, list[tuple[str, int, str, str]]]:
    return {
        memory_id: [(d["day"], d["count"], d["first_at"], d["last_at"]) for d in days]
        for memory_id, days in use_rows(store).items()
    }


def _script(store: MemoryStore, clock: Clock) -> None:
    """Recalls and searches over two days, several a day, with a write between them."""
    store.remember("alice", "city", "Beijing")
    store.remember("alice", "drink", "green tea", kind="preference")
    store.remember("bob", "city", "Paris")
    for day in range(2):
        clock.moment = T0 + day * DAY + timedelta(hours=1)
        for n in range(3):
            store.recall("alice", "city")
            store.search("alice", "green tea")
            store.recall("bob", "city")
            clock.tick(timedelta(minutes=7 + n))
        store.remember("alice", "city", "Beijing", confidence=0.99)  # re-confirmed mid-day
        store.recall("alice", "city")


def test_buffered_uses_leave_the_rows_and_the_uses_as_per_call_uses_do(tmp_path: Path) -> None:
    results = []
    for name, buffered in (("plain.db", False), ("buffered.db", True)):
        clock = Clock(T0)
        with MemoryStore(tmp_path / name, config=Config(), clock=clock) as store:
            if buffered:
                use_buffer.enable(store.storage)
            _script(store, clock)
            use_buffer.flush(store.storage)
            images = {
                (i["user_id"], i["key"], i["state"]): {k: v for k, v in i.items() if k != "id"}
                for i in current_images(store).values()
            }
            results.append((images, sorted(map(sorted, _uses(store).values()))))
            assert replay(store) == current_images(store)
    assert results[0] == results[1]


def test_a_buffered_use_is_written_only_at_the_flush(db_path: Path) -> None:
    clock = Clock(T0)
    with MemoryStore(db_path, config=Config(), clock=clock) as store:
        memory = store.remember("alice", "city", "Beijing")
        buffer = use_buffer.enable(store.storage)
        clock.tick(timedelta(hours=1))
        first = store.recall("alice", "city")
        second = store.recall("alice", "city")
        assert (first.access_count, second.access_count) == (1, 2)  # as the answer counts
        assert store.get(memory.id).access_count == 0 and use_rows(store) == {}
        assert buffer.pending(memory.id) == 2
        assert use_buffer.flush(store.storage) == 2
        assert store.get(memory.id).access_count == 2
        assert store.get(memory.id).last_accessed_at == clock()
        assert len(buffer) == 0


def test_a_job_of_the_same_process_sees_a_buffered_use_and_the_agent_wins(
    db_path: Path,
) -> None:
    """demote selects a low-confidence entry unused for 40 days; the MCP server's store
    recalls it (buffered, not yet written) before the job applies: the job writes the
    buffer in its own transaction first, its re-check sees the use, the entry stays hot."""
    clock = Clock(T0)
    with (
        MemoryStore(db_path, config=Config(), clock=clock, actor="mcp") as agent,
        MemoryStore(db_path, config=Config(), clock=clock) as runner,
    ):
        weak = agent.remember("alice", "hunch", "maybe", confidence=0.3)
        other = agent.remember("alice", "guess", "perhaps", confidence=0.3)
        use_buffer.enable(agent.storage)
        clock.tick(40 * DAY)
        agent.recall("alice", "hunch")
        assert runner.get(weak.id).access_count == 0  # not written yet
        result = run_once(runner, ["demote"], now=clock()).results[0]
        assert runner.get(weak.id).state == "active"
        assert runner.get(weak.id).access_count == 1
        assert runner.get(other.id).state == "cold"
        assert result.skipped_entries == 1  # selected unused, re-checked used
        assert replay(runner) == current_images(runner)


def test_a_use_buffered_before_another_process_moved_the_entry_brings_it_back(
    db_path: Path,
) -> None:
    """Uses still in this process's buffer while a job of another process demotes or
    expires the entry (taken out of the buffer here, as another process cannot see them):
    the flush applies them as a recall right after the job would, a logged restore and a
    logged renew, and the log plus the uses still replay to the exact state."""
    clock = Clock(T0)
    with MemoryStore(db_path, config=Config(), clock=clock, actor="mcp") as store:
        fact = store.remember("alice", "city", "Beijing")
        weak = store.remember("alice", "hunch", "maybe", confidence=0.3)
        buffer = use_buffer.enable(store.storage)
        for memory, key, days, job, moved in (
            (weak, "hunch", 40, "demote", "cold"),
            (fact, "city", 181, "expire", "pending_review"),
        ):
            clock.moment = T0 + days * DAY
            store.recall("alice", key)
            elsewhere = buffer.take()  # what another process's job could not see
            run_once(store, [job], now=clock())
            assert store.get(memory.id).state == moved
            buffer.put_back(elsewhere)
            assert use_buffer.flush(store.storage) == 1
            assert store.get(memory.id).state == "active"
            change = store.changes(memory_id=memory.id)[-1]
            action = "restore" if moved == "cold" else "renew"
            assert (change.action, change.actor) == (action, "mcp:recall")
            assert change.after["access_count"] == change.before["access_count"] + 1
            assert replay(store) == current_images(store)
        assert locations(db_path)[weak.id] == ["hot"]


def test_forget_leaves_no_buffered_use(db_path: Path) -> None:
    clock = Clock(T0)
    with MemoryStore(db_path, config=Config(), clock=clock) as store:
        city = store.remember("alice", "city", "Beijing")
        tone = store.remember("alice", "tone", "brief", kind="preference")
        buffer = use_buffer.enable(store.storage)
        store.recall("alice", "city")
        store.recall("alice", "tone")
        use_buffer.flush(store.storage)
        store.recall("alice", "city")  # buffered again
        store.forget("alice", "city")
        assert buffer.pending(city.id) == 0 and buffer.pending(tone.id) == 0
        use_buffer.flush(store.storage)
        assert set(use_rows(store)) == {tone.id}
        store.recall("alice", "tone")
        store.forget_user("alice")
        assert len(buffer) == 0
        use_buffer.flush(store.storage)
        assert use_rows(store) == {} and current_images(store) == {}


def test_the_mcp_servers_stores_buffer_and_write_on_close_and_before_explain(
    db_path: Path,
) -> None:
    clock = Clock(T0)
    with MemoryStore(db_path, config=Config(), clock=clock) as setup:
        memory = setup.remember("alice", "city", "Beijing")
    caller = Caller(Principal("alice"), "test-client")
    stores = StoreRef(db_path, config=Config())
    for _ in range(3):
        assert call(stores, caller, "recall", {"key": "city"})["found"]
    assert call(stores, caller, "search", {"query": "Beijing"})["hits"]
    explanation = call(stores, caller, "explain", {"memory_id": memory.id})["explanation"]
    assert "used 4 times" in explanation  # the buffer was written before explain read it
    call(stores, caller, "recall", {"key": "city"})
    stores.close()  # writes the last use
    with MemoryStore(db_path, config=Config()) as store:
        assert store.get(memory.id).access_count == 5
        assert sum(day["count"] for day in use_rows(store)[memory.id]) == 5


def _changes(store: MemoryStore) -> int:
    return store.storage.hot.execute("SELECT count(*) FROM changes").fetchone()[0]


def test_reads_only_stops_a_recall_that_would_write_before_it_writes(db_path: Path) -> None:
    """On the event loop a recall may only read: a pending-review entry (a renewal to log)
    raises NeedsWrite with nothing written, and the same recall in a thread renews it."""
    clock = Clock(T0)
    with MemoryStore(db_path, config=Config(), clock=clock) as store:
        memory = store.remember("alice", "city", "Beijing")
        clock.tick(181 * DAY)
        run_once(store, ["expire"], now=clock())
        use_buffer.enable(store.storage)
        before = _changes(store)
        for attempt in (
            lambda: store.recall("alice", "city"),
            lambda: store.search("alice", "Beijing"),
        ):
            with use_buffer.reads_only(), pytest.raises(use_buffer.NeedsWrite):
                attempt()
            assert _changes(store) == before
            assert store.get(memory.id).state == "pending_review"
        assert store.recall("alice", "city").state == "active"
        assert store.changes(memory_id=memory.id)[-1].action == "renew"


def test_the_event_loop_answers_reads_and_hands_writes_and_embeddings_to_a_thread(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(T0)
    with MemoryStore(db_path, config=Config(), clock=clock) as setup:
        active = setup.remember("alice", "city", "Beijing")
        setup.remember("alice", "tone", "brief", kind="preference")
        clock.tick(31 * DAY)  # the preference (30 days) expires, the fact (180) does not
        run_once(setup, ["expire"], now=clock())
        before = _changes(setup)
    caller = Caller(Principal("alice"), "test-client")
    with StoreRef(db_path, config=Config()) as stores:
        assert answer_inline(stores, caller, "recall", {"key": "city"}) is None  # none open
        assert call(stores, caller, "recall", {"key": "city"})["found"]  # opens one
        found = answer_inline(stores, caller, "recall", {"key": "city"})
        assert found is not None and found["memory"]["id"] == active.id
        assert answer_inline(stores, caller, "search", {"query": "Beijing"})["hits"]
        assert answer_inline(stores, caller, "recall", {"key": "tone"}) is None  # a renewal
        assert answer_inline(stores, caller, "remember", {"key": "k", "value": "v"}) is None
        monkeypatch.setenv("ZHIPUAI_API_KEY", "test-key.0123456789abcdef")
        assert answer_inline(stores, caller, "search", {"query": "Beijing"}) is None
        with stores.borrow(create=False) as store:
            assert store is not None and _changes(store) == before  # the loop wrote nothing
    with MemoryStore(db_path, config=Config()) as store:
        assert store.get(active.id).access_count == 3  # 2 recalls and a search, written


def test_a_recall_of_a_missing_key_only_reads_even_while_another_writer_holds_the_lock(
    db_path: Path,
) -> None:
    """A miss has nothing to mark or restore: on the event loop (reads_only) it answers
    None, with a cold file (it raised NeedsWrite, sending the call to a thread that took
    the write lock for nothing) and without one (it took the write lock on the loop itself,
    waiting for another writer)."""
    import sqlite3

    from memkeeper.config.schema import DatabaseSection

    config = Config(database=DatabaseSection(busy_timeout_ms=50))
    with MemoryStore(db_path, config=config) as store:
        store.remember("alice", "city", "Beijing")
        use_buffer.enable(store.storage)
        other = sqlite3.connect(db_path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            for cold in (False, True):
                if cold:
                    assert store.storage.cold(create=True) is not None
                with use_buffer.reads_only():
                    assert store.recall("alice", "country") is None
                    assert store.recall("alice", "city").value == "Beijing"
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert store.recall("alice", "country") is None
