"""One store's threads on PostgreSQL run on the connections of its pool, at once.

``storage.lock`` is a per-thread connection lease there (memkeeper.storage.postgres.leases):
a thread's write transaction on one user does not hold up another thread of the same store
working on another user; PostgreSQL's locks isolate them. Whether a thread waits is read from
the server or from an Event, never from a clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
from helpers.databases import raw_rows
from psycopg.conninfo import conninfo_to_dict

from memkeeper import MemoryStore
from memkeeper.clock import system_now
from memkeeper.config import Config
from memkeeper.errors import DatabaseUnreachable
from memkeeper.storage import use_buffer
from memkeeper.storage.transaction import write_transaction
from memkeeper.storage.transitions import Transition, apply, with_changes

WAIT = 30  # seconds a test waits for a thread before failing (never reached when green)


def _store(url: str, pool_size: int = 4) -> MemoryStore:
    return MemoryStore(url, config=Config.model_validate({"database": {"pool_size": pool_size}}))


@pytest.fixture
def store(pg_database: str) -> Iterator[MemoryStore]:
    with _store(pg_database) as opened:
        yield opened


def _thread(target: Callable[[], None]) -> tuple[threading.Thread, list[BaseException]]:
    failures: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    return worker, failures


def _memkeeper_backends(url: str) -> int:
    dbname = conninfo_to_dict(url)["dbname"]
    with psycopg.connect(url, autocommit=True) as admin:
        (count,) = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
            " AND application_name = 'memkeeper'",
            (dbname,),
        ).fetchone()
    return int(count)


def _kill(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))


def test_a_thread_writing_one_user_does_not_hold_up_another_thread_of_the_same_store(
    store: MemoryStore,
) -> None:
    """Fails where the store's threads share one connection behind a mutex: thread B would
    wait for thread A's transaction, which waits for B."""
    a = store.remember("a", "city", "Oslo")
    inside, release = threading.Event(), threading.Event()

    def hold_a() -> None:
        with write_transaction(store.storage, users=["a"]) as hot:
            hot.execute("UPDATE memories SET confidence = 0.5 WHERE user_id = ?", ["a"])
            inside.set()
            assert release.wait(WAIT)

    holder, failures = _thread(hold_a)
    assert inside.wait(WAIT)
    done = threading.Event()

    def work_on_b() -> None:
        store.remember("b", "city", "Rome")
        assert store.recall("b", "city").value == "Rome"
        assert store.get(a.id).confidence == pytest.approx(0.9)  # MVCC: what is committed
        done.set()

    worker, more = _thread(work_on_b)
    finished = done.wait(WAIT)
    release.set()
    holder.join(WAIT)
    worker.join(WAIT)
    assert finished, "thread B waited for thread A's write of another user"
    assert failures == more == []
    assert store.recall("a", "city").confidence == pytest.approx(0.5)


def test_a_threads_write_and_its_change_log_row_commit_together(
    store: MemoryStore, pg_database: str
) -> None:
    memory = store.remember("a", "city", "Oslo")
    image = store.storage.hot_images([memory.id])[memory.id]
    demote = Transition(memory.id, image, with_changes(image, confidence=0.5), "demote", "test")
    written, release = threading.Event(), threading.Event()

    def write(fail: bool) -> None:
        with write_transaction(store.storage, users=["a"]):
            apply(store.storage, [demote], actor="test", now=system_now())
            written.set()
            assert release.wait(WAIT)
            if fail:
                raise RuntimeError("the caller's block fails after the write")

    def seen() -> tuple[float, int]:
        rows = raw_rows(pg_database, "memories")
        return rows[0]["confidence"], len(raw_rows(pg_database, "changes"))

    for fail, after in ((True, (0.9, 1)), (False, (0.5, 2))):
        written.clear()
        release.clear()
        worker, failures = _thread(lambda fail=fail: write(fail))
        assert written.wait(WAIT)
        assert seen() == (0.9, 1)  # neither the change nor its log row before the commit
        with store.storage.lock:  # another thread of the store, on another connection
            assert store.get(memory.id).confidence == pytest.approx(0.9)
        release.set()
        worker.join(WAIT)
        assert [type(f) for f in failures] == ([RuntimeError] if fail else [])
        assert seen() == after  # both or neither


def test_many_threads_remembering_distinct_users_all_land(store: MemoryStore) -> None:
    threads, each = 8, 15
    start = threading.Barrier(threads)

    def remember(n: int) -> None:
        start.wait(WAIT)
        for m in range(each):
            store.remember(f"user{n}", f"key{m}", f"value {n}.{m}")

    workers = [_thread(lambda n=n: remember(n)) for n in range(threads)]
    for worker, _ in workers:
        worker.join(WAIT * 4)
    assert [f for _, failures in workers for f in failures] == []
    memories = store.list_memories(None)
    assert len(memories) == threads * each
    assert {m.user_id for m in memories} == {f"user{n}" for n in range(threads)}
    assert len(store.changes()) == threads * each  # each write with its log row
    pool = store.status()["database"]["pool"]
    assert 1 <= pool["open"] <= pool["size"] == 4
    assert pool["in_use"] == 1  # status's own lease: the others were given back


def test_a_thread_past_the_pool_size_waits_for_a_free_connection(pg_database: str) -> None:
    with _store(pg_database, pool_size=2) as store:
        lease = store.storage.lock
        leased, release = threading.Barrier(3), threading.Event()

        def hold() -> None:
            with lease:
                leased.wait(WAIT)
                assert release.wait(WAIT)

        holders = [_thread(hold) for _ in range(2)]
        leased.wait(WAIT)  # both connections are leased
        got = threading.Event()

        def third() -> None:
            with lease:
                got.set()

        waiter, failures = _thread(third)
        pause = threading.Event()  # never set: a bounded poll of the pool's own count
        for _ in range(WAIT * 50):
            if lease.status()["waiting"] == 1:
                break
            pause.wait(0.02)
        assert lease.status() == {"size": 2, "open": 2, "in_use": 2, "waiting": 1}
        assert not got.is_set()
        release.set()
        waiter.join(WAIT)
        for worker, more in holders:
            worker.join(WAIT)
            failures += more
        assert got.is_set() and failures == []


def test_a_connection_killed_under_a_lease_reconnects_as_a_single_one_did(
    store: MemoryStore, pg_database: str
) -> None:
    store.remember("a", "city", "Oslo")
    storage = store.storage
    with storage.lock:
        _kill(pg_database, storage.hot.raw.info.backend_pid)
        assert store.recall("a", "city").value == "Oslo"  # a read: run again, reconnected
        store.remember("a", "tea", "green")  # a write after it: its BEGIN reconnected
        stand_in = storage.hot.raw  # opened beside the pool for the rest of this lease
        replaced = stand_in.info.backend_pid
        with (
            pytest.raises(DatabaseUnreachable, match="did not commit"),
            write_transaction(storage, users=["a"]) as hot,
        ):
            hot.execute("DELETE FROM memories WHERE user_id = ?", ["a"])
            _kill(pg_database, replaced)
            hot.execute("DELETE FROM changes WHERE user_id = ?", ["a"])
        assert sorted(m.key for m in store.list_memories("a")) == ["city", "tea"]
    # The stand-ins were closed with the lease; the pool has every connection back.
    assert stand_in.closed and replaced not in storage.backend_pids()
    assert storage.lock.status()["in_use"] == 0
    assert len(store.changes(user_id="a")) == 2


def test_a_lazy_query_read_after_its_lease_returns_its_own_rows(store: MemoryStore) -> None:
    for n in range(5):
        store.remember("a", f"k{n}", "x")
    store.remember("b", "only", "y")
    hot = store.storage.hot
    with store.storage.lock:
        rows = hot.query("SELECT key FROM memories WHERE user_id = ? ORDER BY key", ["a"])
    other = _thread(lambda: list(hot.query("SELECT key FROM memories WHERE user_id = 'b'")))
    other[0].join(WAIT)  # the same connection, leased again by another thread meanwhile
    assert [row["key"] for row in rows] == [f"k{n}" for n in range(5)]
    assert other[1] == []


def test_a_job_writes_no_buffered_use_of_a_user_it_does_not_lock(
    store: MemoryStore,
) -> None:
    """A buffered use of b's entry stays buffered while a batch on a's entries applies
    (another thread may be writing b's row: its read image would overwrite the use)."""
    a = store.remember("a", "city", "Oslo")
    b = store.remember("b", "city", "Rome")
    buffer = use_buffer.enable(store.storage)
    try:
        assert store.recall("b", "city").access_count == 1  # buffered
        image = store.storage.hot_images([a.id])[a.id]
        change = with_changes(image, confidence=0.5)
        apply(
            store.storage,
            [Transition(a.id, image, change, "demote", "t")],
            actor="t",
            now=system_now(),
        )
        assert buffer.pending(b.id) == 1 and store.get(b.id).access_count == 0
        assert use_buffer.flush(store.storage) == 1
        assert store.get(b.id).access_count == 1
    finally:
        use_buffer.flush(store.storage)


def test_closing_the_store_closes_every_connection_of_its_pool(pg_database: str) -> None:
    store = _store(pg_database)
    leased, release = threading.Barrier(4), threading.Event()

    def hold() -> None:
        with store.storage.lock:
            store.storage.hot.execute("SELECT 1")
            leased.wait(WAIT)
            assert release.wait(WAIT)

    holders = [_thread(hold) for _ in range(3)]
    leased.wait(WAIT)
    assert 3 <= _memkeeper_backends(pg_database) <= 4  # the pool may have grown one more
    assert 3 <= len(store.storage.backend_pids()) <= 4
    release.set()
    for worker, failures in holders:
        worker.join(WAIT)
        assert failures == []
    store.close()
    # A backend leaves pg_stat_activity a moment after its client has gone (it exits on
    # its own time): wait for that, bounded; a connection left open would stay there.
    deadline = time.monotonic() + WAIT
    while (left := _memkeeper_backends(pg_database)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == 0
