"""What a search of a small user costs the database, on both backends (issue 22, Figures).

On PostgreSQL every statement is a round trip to the server, so a search of a user with a
few hundred entries is kept to: the user's rows (one read), then the use-marking's write
transaction, whose read under the write lock gives the hits' rows. The user's rows come in
the same order as SQLite gives them whatever was written since, so the BM25 postings kept
for them (:mod:`memkeeper.store.bm25_index`) are reused, not rebuilt after every search.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from helpers.databases import raw_rows
from helpers.logs import capture_logs

from memkeeper import MemoryStore
from memkeeper.storage import keywords
from memkeeper.store import bm25_index, semantic
from memkeeper.store.search import FACTS, LIVE_STATES

pytestmark = pytest.mark.both_backends

NO_KEY = "search is keyword-only: no API key for embeddings"


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("ZHIPUAI_API_KEY", raising=False)
    monkeypatch.delenv("ZAI_API_KEY", raising=False)
    semantic.reset()
    yield
    semantic.reset()


def _fill(store: MemoryStore, n: int = 40) -> None:
    words = ["report", "pdf", "budget", "meeting", "river", "tea", "logo", "invoice"]
    for i in range(n):
        text = " ".join(words[(i * k) % len(words)] for k in (1, 3, 5)) + f" #{i}"
        store.remember("alice", f"k{i}", text)


def _rows(store: MemoryStore) -> list[str]:
    with store.storage.lock:
        found = keywords.small_user_rows(
            store.storage.hot,
            table="memories",
            user_id="alice",
            namespaces=("",),
            kinds=None,
            states=LIVE_STATES,
            columns=(*FACTS, "value"),
        )
    assert found is not None
    return [row[0] for row in found]


def test_a_small_users_rows_keep_their_order_while_searches_mark_hits(
    store: MemoryStore, db_path: Path | str
) -> None:
    _fill(store)
    before = _rows(store)
    for query in ("report pdf", "budget", "river tea", "logo invoice"):
        assert store.search("alice", query, limit=5)  # each marks its hits used (updates)
    by_rowid = [r["id"] for r in raw_rows(db_path, "memories")]  # in rowid order
    assert _rows(store) == before == by_rowid


def test_a_small_users_postings_are_reused_between_searches(store: MemoryStore) -> None:
    _fill(store)
    store.search("alice", "report")
    kept = list(bm25_index._kept.values())
    for query in ("pdf budget", "river", "meeting tea", "logo"):
        assert store.search("alice", query, limit=5)
    assert list(bm25_index._kept.values()) == kept  # the same index object, not rebuilt


@contextmanager
def _statements() -> Iterator[list[str]]:
    """Every statement sent to PostgreSQL meanwhile (psycopg's own calls, counted)."""
    sent: list[str] = []
    execute, executemany = psycopg.Connection.execute, psycopg.Cursor.executemany
    cursor_execute = psycopg.Cursor.execute

    def counted_execute(self, query, params=None, **kw):  # type: ignore[no-untyped-def]
        if not self._pipeline:  # in a pipeline the cursor's execute below counts it
            sent.append(str(query))
        return execute(self, query, params, **kw)

    def counted_cursor_execute(self, query, params=None, **kw):  # type: ignore[no-untyped-def]
        if self.connection._pipeline:  # a statement of a pipeline, however it was sent
            sent.append("pipelined " + str(query))
        return cursor_execute(self, query, params, **kw)

    def counted_many(self, query, params_seq, **kw):  # type: ignore[no-untyped-def]
        sent.append(("pipelined " if self.connection._pipeline else "") + str(query))
        return executemany(self, query, params_seq, **kw)

    psycopg.Connection.execute = counted_execute  # type: ignore[method-assign]
    psycopg.Cursor.execute = counted_cursor_execute  # type: ignore[method-assign]
    psycopg.Cursor.executemany = counted_many  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        psycopg.Connection.execute = execute  # type: ignore[method-assign]
        psycopg.Cursor.execute = cursor_execute  # type: ignore[method-assign]
        psycopg.Cursor.executemany = executemany  # type: ignore[method-assign]


def test_a_keyword_search_of_a_small_user_takes_two_round_trips(
    store: MemoryStore, backend: str
) -> None:
    if backend != "postgres":
        pytest.skip("round trips are PostgreSQL's")
    _fill(store)
    store.search("alice", "report")  # the first one also looks for unusable vectors
    with _statements() as sent:
        hits = store.search("alice", "pdf budget", limit=3)
    assert len(hits) == 3 and all(hit.memory.access_count == 1 for hit in hits)
    assert [hit.memory for hit in hits] == [store.get(hit.memory.id) for hit in hits]
    assert not [s for s in sent if s.startswith("pipelined ")]
    # The user's rows; BEGIN with the write locks, the hits' rows marked used (one UPDATE
    # for every hit, one upsert of their uses, in one statement) and the COMMIT. Both the
    # read and the marking are statements the session keeps prepared: EXECUTE, with the
    # PREPARE in front the first time on a connection.
    assert len(sent) == 2, sent
    assert sent[0].startswith("EXECUTE memkeeper_") and "'alice'" in sent[0]
    begin, locks, *prepares, marking, commit = sent[1].split("; ")
    assert begin == "BEGIN" and "pg_advisory_xact_lock" in locks and commit == "COMMIT"
    name = marking.removeprefix("EXECUTE ").partition("(")[0]
    assert marking.startswith("EXECUTE memkeeper_") and name in marking
    for prepare in prepares:  # the statement itself, as the session keeps it
        statement = prepare.removeprefix(f"PREPARE {name} AS ")
        assert statement.startswith("WITH found AS (SELECT")
        assert statement.count("UPDATE memories") == 1 and "INSERT INTO uses" in statement
    with _statements() as again:
        store.search("alice", "pdf budget", limit=3)
    assert again[0] == sent[0]  # the read, prepared already
    begin, locks, marking, commit = again[1].split("; ")  # prepared already: no PREPARE
    assert marking.startswith(f"EXECUTE {name}(")
    counts = store.storage.hot.query(
        "SELECT count FROM uses WHERE memory_id IN (?, ?, ?)", [hit.memory.id for hit in hits]
    )
    assert sorted(row["count"] for row in counts) == [2, 2, 2]


def test_stored_vectors_without_a_key_are_still_warned_about_once_looked_for(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fake_embeddings import DIMS, fake_vector

    from memkeeper.storage.vectors import embedding_text, store_vectors, text_hash

    # The endpoint named (with no key): not the local model that "auto" falls back to.
    search = store.config.search.model_copy(update={"embedder": "zhipu"})
    store.config = store.config.model_copy(update={"search": search})
    _fill(store, 5)
    with capture_logs() as lines:
        store.search("alice", "report")  # no vectors: quiet
    assert NO_KEY not in [line["event"] for line in lines]
    rows = [
        (m.id, "embedding-3", DIMS, text_hash(t), fake_vector(t))
        for m in store.list_memories()
        if (t := embedding_text(m.kind, m.key, m.value))
    ]
    with store.storage.lock:
        store_vectors(store.storage.hot, rows)
    with capture_logs() as lines:
        store.search("alice", "report")  # looked for a moment ago: not again yet
    assert NO_KEY not in [line["event"] for line in lines]
    monkeypatch.setattr(semantic, "VECTOR_LOOK_SECONDS", 0.0)
    with capture_logs() as lines:
        store.search("alice", "report")
        store.search("alice", "pdf")
    assert [line["event"] for line in lines].count(NO_KEY) == 1
