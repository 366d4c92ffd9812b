"""``recall`` returns None, raising nothing, when a key has no current value, and says so.

Every way a key can have no value reads the same: never stored, forgotten, stored only in
another namespace or for another user, a kind that does not hold it. The docstring (the API
reference is generated from it) states it and shows the check before ``.value``.
"""

from __future__ import annotations

import pytest

from memkeeper import InvalidInput, MemoryStore

pytestmark = pytest.mark.both_backends


def test_a_key_without_a_current_value_is_none(store: MemoryStore) -> None:
    assert store.recall("alice", "city") is None  # never stored (an empty memory)
    store.remember("alice", "city", "Paris", namespace="trip")
    store.remember("bob", "city", "Oslo")
    assert store.recall("alice", "city") is None  # only in another namespace
    assert store.recall("carol", "city") is None  # only for other users
    assert store.recall("alice", "city", namespace="trip", kind="preference") is None
    found = store.recall("alice", "city", namespace="trip")
    assert found is not None and found.value == "Paris"


def test_a_forgotten_key_reads_as_one_never_stored(store: MemoryStore) -> None:
    store.remember("alice", "city", "Paris")
    store.remember("alice", "city", "Rome")  # Paris is superseded, kept for a while
    recalled = store.recall("alice", "city")
    assert recalled is not None and recalled.value == "Rome"  # the newer value, never Paris
    store.forget("alice", "city")
    assert store.recall("alice", "city") is None
    store.remember("alice", "city", "Lima")  # said again after the forget: a new value
    again = store.recall("alice", "city")
    assert again is not None and again.value == "Lima"


def test_bad_arguments_are_errors_not_none(store: MemoryStore) -> None:
    with pytest.raises(InvalidInput):
        store.recall("alice", "")
    with pytest.raises(InvalidInput):
        store.recall("alice", "city", kind="mood")


def test_the_docstring_says_none_and_shows_the_check() -> None:
    doc = MemoryStore.recall.__doc__ or ""
    assert "``None`` when there is none" in doc and "nothing is raised" in doc
    assert "memory.value if memory is not None" in doc
    for way in ("never remembered", "forget", "another namespace", "another user"):
        assert way in doc
