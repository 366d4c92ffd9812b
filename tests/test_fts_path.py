"""Keyword search past the substring scan: the FTS5 ``MATCH`` path (issue 18, item 18).

Below a few thousand rows for the user searched, keyword search scans the user's rows; past
that it asks the FTS5 index (quoted phrases, the user id ANDed in, bm25). No test reached
that path: the "FTS syntax never raises" and isolation tests ran on the scan only. These do,
with other users' rows present — users whose ids contain the searched one, and one whose id
is too short for a trigram — and assert only what ``store.search`` promises, so they hold
whatever the scoring inside becomes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from memkeeper import MemoryStore
from memkeeper.storage import keywords

# Past the scan's threshold whatever it is tuned to (2,000 today).
BIG = max(2000, int(getattr(keywords, "SCAN_BELOW_ROWS", 2000))) + 100
WORDS = ["report", "deadline", "logo", "weekly", "invoice", "报告格式", "客户名单", "封面设计"]
HOSTILE = ['"', "*", "AND", "(", "a AND (b", '"unterminated', "NEAR(logo cover)", "key:logo",
           "user_id:bob", "-x", "^abc", "logo*", "OR OR", "NOT", ")(", "{key value}: logo",
           "'; DROP TABLE memories; --", "\\", "lo\"go", "logo OR user_id : bob"]  # fmt: skip
BIG_USERS = ("alice", "al")  # "al" is too short for a trigram of the user id
SMALL_USERS = ("malice", "alice2", "bob")  # ids containing "alice", and a stranger


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryStore]:
    path: Path = tmp_path_factory.mktemp("fts") / "memory.db"
    rng = random.Random(18)
    store = MemoryStore(path)
    for user in BIG_USERS:
        for index in range(BIG + 300):  # BIG in the profile, 300 in a project
            namespace = "proj" if index >= BIG else ""
            text = " ".join(rng.sample(WORDS, 2))
            store.remember(user, f"k{index}", f"{text} #{index}", namespace=namespace)
        store.remember(user, "cover", f'{user} logo AND (big) "quoted" NEAR*')
    for user in SMALL_USERS:
        for index in range(60):
            store.remember(user, f"k{index}", " ".join(rng.sample(WORDS, 3)))
        store.remember(user, "only", f"zyxwvu-{user}-secret")
    yield store
    store.close()


def _search(store: MemoryStore, user: str, query: str, namespace: str = "") -> list:
    return list(store.search(user, query, namespace=namespace, limit=50))


def test_these_searches_really_ask_the_fts_index(big: MemoryStore) -> None:
    statements: list[str] = []
    big.storage.hot.conn.set_trace_callback(statements.append)
    try:
        for user in BIG_USERS:
            for namespace in ("", "proj"):
                assert _search(big, user, "report deadline", namespace)
    finally:
        big.storage.hot.conn.set_trace_callback(None)
    matches = [sql for sql in statements if " MATCH " in sql]
    assert len(matches) >= 4, "the FTS5 path was not reached for every search"


@pytest.mark.parametrize("user", BIG_USERS)
@pytest.mark.parametrize("query", HOSTILE)
def test_fts_syntax_never_raises_and_never_crosses_users(
    big: MemoryStore, user: str, query: str
) -> None:
    for namespace in ("", "proj"):
        for hit in _search(big, user, query, namespace):
            assert hit.memory.user_id == user
            assert hit.memory.namespace in {namespace, ""}


@pytest.mark.parametrize("user", BIG_USERS)
def test_operators_and_quotes_are_matched_as_text(big: MemoryStore, user: str) -> None:
    for query in ('"quoted"', "AND (big)", "NEAR*"):
        keys = [hit.memory.key for hit in _search(big, user, query)]
        assert "cover" in keys, query


def test_isolation_over_random_queries(big: MemoryStore) -> None:
    rng = random.Random(7)
    for _ in range(60):
        user = rng.choice(BIG_USERS)
        namespace = rng.choice(["", "proj"])
        query = " ".join(rng.sample(WORDS, rng.randint(1, 3)))
        hits = _search(big, user, query, namespace)
        assert hits, query  # every word is in the user's rows
        for hit in hits:
            assert hit.memory.user_id == user
            assert hit.memory.namespace in {namespace, ""}


@pytest.mark.parametrize("user", BIG_USERS)
def test_a_word_only_other_users_wrote_finds_nothing(big: MemoryStore, user: str) -> None:
    for other in SMALL_USERS:
        assert _search(big, user, f"zyxwvu-{other}-secret") == []
        assert _search(big, user, "zyxwvu") == []


def test_a_user_whose_id_contains_anothers_sees_only_their_own(big: MemoryStore) -> None:
    hits = _search(big, "malice", "zyxwvu")
    assert [(h.memory.user_id, h.memory.key) for h in hits] == [("malice", "only")]
