"""Tombstones: every forget records hashes of what it erased, in the erasure's own commit.

The table (hot migration ``0008_tombstones``) holds a scope, the sha256 of the scope's
identity and a time — never a user id, key or value in clear.
"""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers import T0, raw_rows
from helpers.erasure import dump_memory, places_holding
from test_migrations import build_at_step

from memkeeper import MemoryStore
from memkeeper.clock import fixed
from memkeeper.storage import transitions
from memkeeper.storage.sqlite.schema import HOT, hot_migrations
from memkeeper.storage.tombstones import Tombstone, digest_of, is_tombstoned, record, since

SECRET = "TOMBSECRET-9f3a"

pytestmark = pytest.mark.both_backends


@pytest.fixture
def tstore(db_path: Path) -> MemoryStore:
    store = MemoryStore(db_path, clock=fixed(T0))
    yield store
    store.close()


def test_digest_is_sha256_of_scope_and_parts_joined_by_unit_separator() -> None:
    expected = hashlib.sha256(b"key\x1falice\x1facme\x1fcity").hexdigest()
    assert digest_of("key", "alice", "acme", "city") == expected
    assert digest_of("memory", "abc") != digest_of("user", "abc")
    # The separator keeps ("a", "bc") and ("ab", "c") apart.
    assert digest_of("key", "a", "bc", "") != digest_of("key", "ab", "c", "")


@pytest.mark.parametrize(
    ("scope", "parts"), [("note", ("x",)), ("key", ("alice", "city")), ("user", ())]
)
def test_a_bad_scope_or_identity_is_refused(scope: str, parts: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="tombstone"):
        digest_of(scope, *parts)


def test_record_is_tombstoned_and_since(tstore: MemoryStore) -> None:
    hot = tstore.storage.hot
    with hot.atomic():
        record(hot, "user", ("alice",), T0)
        record(hot.conn, "memory", ("m1",), T0 + timedelta(days=1))
    assert is_tombstoned(hot, "user", ("alice",))
    assert is_tombstoned(hot.conn, "memory", ("m1",))
    assert not is_tombstoned(hot, "user", ("bob",))
    assert since(hot, None) == [
        Tombstone("user", digest_of("user", "alice"), T0),
        Tombstone("memory", digest_of("memory", "m1"), T0 + timedelta(days=1)),
    ]
    assert [t.scope for t in since(hot, T0)] == ["memory"]
    assert since(hot, T0 + timedelta(days=1)) == []


def test_a_rolled_back_transaction_records_nothing(tstore: MemoryStore) -> None:
    hot = tstore.storage.hot
    with pytest.raises(RuntimeError), hot.atomic():
        record(hot, "user", ("alice",), T0)
        raise RuntimeError("boom")
    assert since(hot, None) == []


def test_forget_key_records_key_and_each_erased_id(tstore: MemoryStore, db_path: Path) -> None:
    old = tstore.remember("alice", "city", f"Xi'an {SECRET}", namespace="acme")
    new = tstore.remember("alice", "city", f"Beijing {SECRET}", namespace="acme")
    assert tstore.forget("alice", "city", namespace="acme") == 2
    hot = tstore.storage.hot
    assert is_tombstoned(hot, "key", ("alice", "acme", "city"))
    assert is_tombstoned(hot, "memory", (old.id,))
    assert is_tombstoned(hot, "memory", (new.id,))
    assert not is_tombstoned(hot, "key", ("alice", "", "city"))
    rows = raw_rows(db_path, "tombstones")
    assert {row["erased_at"] for row in rows} == {"2026-01-01T09:00:00.000000+00:00"}
    # Hashes only: no identity and no value in the table, and no value anywhere on disk.
    text = repr(rows)
    for clear in ("alice", "acme", "city", old.id, new.id, SECRET):
        assert clear not in text
    assert places_holding(db_path, SECRET.encode()) == []


def test_forget_memory_of_a_fact_also_tombstones_its_key(tstore: MemoryStore) -> None:
    fact = tstore.remember("alice", "city", "Beijing")
    note = tstore.add_note("alice", "a note")
    assert tstore.forget_memory(fact.id) == 1
    assert tstore.forget_memory(note.id) == 1
    hot = tstore.storage.hot
    assert is_tombstoned(hot, "memory", (fact.id,))
    assert is_tombstoned(hot, "key", ("alice", "", "city"))
    assert is_tombstoned(hot, "memory", (note.id,))
    assert [t.scope for t in since(hot, None)] == ["key", "memory", "memory"]


def test_forget_user_records_one_user_tombstone(tstore: MemoryStore) -> None:
    for index in range(5):
        tstore.remember("alice", f"k{index}", "v")
    tstore.remember("bob", "city", "Lisbon")
    tstore.forget_user("alice")
    hot = tstore.storage.hot
    # One row covers all of the user's entries: repeated fill-and-forget stays small.
    assert [t.scope for t in since(hot, None)] == ["user"]
    assert is_tombstoned(hot, "user", ("alice",))
    assert not is_tombstoned(hot, "user", ("bob",))


def test_forgetting_what_is_absent_records_nothing(tstore: MemoryStore, db_path: Path) -> None:
    tstore.remember("alice", "city", "Beijing")
    before = dump_memory(db_path)
    assert tstore.forget("alice", "gone") == 0
    assert tstore.forget_memory("0000000000000000") == 0
    assert tstore.forget_user("nobody")["memories"] == 0
    assert dump_memory(db_path) == before
    assert since(tstore.storage.hot, None) == []


def test_tombstones_commit_with_the_erasure(
    tstore: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = tstore.remember("alice", "city", "Beijing")

    def crash(step: str) -> None:
        if step == "forget-hot-written":
            raise RuntimeError("crash before the hot commit")

    monkeypatch.setattr(transitions, "step_hook", crash)
    with pytest.raises(RuntimeError):
        tstore.forget("alice", "city")
    assert since(tstore.storage.hot, None) == []
    assert tstore.get(entry.id) is not None
    monkeypatch.undo()
    assert tstore.forget("alice", "city") == 1
    assert is_tombstoned(tstore.storage.hot, "memory", (entry.id,))


@pytest.mark.sqlite_only  # SQLite's migration steps; PostgreSQL's schema starts at 0001
def test_a_0007_database_migrates_forward_to_tombstones(db_path: Path) -> None:
    db = build_at_step(db_path, HOT, "0007_vectors")
    db.conn.close()
    with MemoryStore(db_path, clock=fixed(T0)) as store:
        assert hot_migrations.pending(store.storage.hot) == []
        store.remember("alice", "city", "Beijing")
        store.forget("alice", "city")
        assert is_tombstoned(store.storage.hot, "key", ("alice", "", "city"))
    conn = sqlite3.connect(db_path)
    try:
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(
                "INSERT INTO tombstones (scope, digest, erased_at) VALUES ('note', 'x', ?)",
                [datetime(2026, 1, 1, tzinfo=UTC).isoformat()],
            )
    finally:
        conn.close()
