"""PostgreSQL's walk over a job's due rows (``storage.postgres.due_walk``).

The due rows are found set-based by the job's predicate and handed out in owner order, so a
batch changes the entries of a few users: their heap and index pages are shared and the
batch locks those users only. What a job selects is the same on both backends (the jobs'
own tests run on both); these tests hold the order, the chunking and the re-read.
"""

from __future__ import annotations

import pytest

from memkeeper import MemoryStore
from memkeeper.storage import due
from memkeeper.storage.postgres.due_walk import owner_ordered_batches

pytestmark = pytest.mark.postgres

# Jobs' own predicates (expire's by kind, and settle's shape by state), with a cutoff past
# every row: the statements stay those the user-filter audit knows (docs/guides/scaling.md).
ACTIVE_FACTS = (
    "state = 'active' AND kind = ? AND updated_at < ? AND last_used_at < ? AND pinned = 0"
    " AND ttl_days IS NULL"
)
FACTS = ["fact", "9999-01-01", "9999-01-01"]
ACTIVE = "state = 'active' AND state_since < ?"


def _fill(store: MemoryStore) -> None:
    # Written out of owner order, so that no walk by time or by id is the owner order too.
    for n in range(6):
        for user_id in ("carol", "ann", "bob"):
            for namespace in ("work", ""):
                store.remember(user_id, f"k{n}", f"value {n}", namespace=namespace)
    store.remember("ann", "likes", "tea", kind="preference")


def _owner_key(image: dict) -> tuple[str, str, str]:
    return (image["user_id"], image["namespace"], image["id"])


def test_due_rows_come_in_owner_order_in_batches_of_at_most_the_size(pg_database: str) -> None:
    with MemoryStore(pg_database) as store:
        _fill(store)
        batches = list(
            due.select_batches(
                store.storage.hot, "memories", ACTIVE_FACTS, FACTS, order="updated_at", size=5
            )
        )
    rows = [row for batch in batches for row in batch]
    assert [len(batch) for batch in batches] == [5, 5, 5, 5, 5, 5, 5, 1]
    assert len(rows) == 36 and len({row["id"] for row in rows}) == 36
    assert [_owner_key(row) for row in rows] == sorted(_owner_key(row) for row in rows)
    assert {row["kind"] for row in rows} == {"fact"}
    # Whole images, as the transition mechanism compares them.
    assert {"value", "last_used_at", "confidence"} <= set(rows[0])


def test_chunks_of_found_rows_continue_where_the_last_one_ended(pg_database: str) -> None:
    with MemoryStore(pg_database) as store:
        _fill(store)
        hot = store.storage.hot
        whole = list(owner_ordered_batches(hot, "memories", ACTIVE_FACTS, FACTS, size=4))
        for keys_per_chunk in (1, 5, 7, 36, 37):
            chunked = list(
                owner_ordered_batches(
                    hot, "memories", ACTIVE_FACTS, FACTS, size=4, keys_per_chunk=keys_per_chunk
                )
            )
            # A chunk boundary ends a batch early; the rows and their order are the same.
            assert [r for b in chunked for r in b] == [r for b in whole for r in b]
            assert all(0 < len(b) <= 4 for b in chunked)


def test_a_row_that_stops_matching_after_it_was_found_is_left_out(pg_database: str) -> None:
    with MemoryStore(pg_database) as store:
        _fill(store)
        walk = owner_ordered_batches(store.storage.hot, "memories", ACTIVE_FACTS, FACTS, size=6)
        first = next(walk)
        assert {row["user_id"] for row in first} == {"ann"}
        # Between batches an agent writes a new value for carol's k0: the old row is
        # superseded (no longer due) and the new one was not due when the rows were found.
        (old,) = [m for m in store.list_memories("carol", namespace="work") if m.key == "k0"]
        new = store.remember("carol", "k0", "changed", namespace="work")
        rest = [row for batch in walk for row in batch]
    ids = {row["id"] for row in first + rest}
    assert old.id not in ids and new.id not in ids
    assert len(ids) == 35


def test_rows_that_stay_due_are_walked_once_as_in_a_dry_run(pg_database: str) -> None:
    """A dry run changes nothing, so every found row still matches when its chunk is read:
    the keyset on the owner order moves the walk on and ends it."""
    with MemoryStore(pg_database) as store:
        _fill(store)
        rows = [
            row
            for batch in owner_ordered_batches(
                store.storage.hot, "memories", ACTIVE, ["9999-01-01"], size=10, keys_per_chunk=8
            )
            for row in batch
        ]
    assert len(rows) == 37 and len({row["id"] for row in rows}) == 37
