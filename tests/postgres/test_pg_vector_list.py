"""Search's vector list on PostgreSQL: written by the index job in pgvector form, computed by
the server in one statement, the same as the numpy ranking SQLite does (issue 22, Retrieval)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import psycopg
import pytest
from fake_embeddings import DIMS, FakeEmbeddings, embed_config, fake_vector
from helpers.backends import empty_memory
from helpers.postgres import kill_backends

from memkeeper import MemoryStore
from memkeeper.maintenance.runner import JobResult, run_once
from memkeeper.storage.nearest import nearest_entries
from memkeeper.storage.postgres.vector_index import index_name
from memkeeper.storage.vectors import user_vectors
from memkeeper.store import semantic

NOW = datetime(2026, 3, 2, 3, 0, tzinfo=UTC)
MODEL = "embedding-3"
KINDS = ("fact", "preference", "note")


@pytest.fixture
def fake() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings() as server:
        yield server


@pytest.fixture
def store(pg_suite_url: str, fake: FakeEmbeddings, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ZHIPUAI_API_KEY", "0123456789abcdef.EmbedKeySecretPart")
    semantic.reset()
    empty_memory(pg_suite_url)
    with MemoryStore(pg_suite_url, config=embed_config(fake.url)) as opened:
        yield opened
    semantic.reset()


def _index(store: MemoryStore) -> JobResult:
    (result,) = run_once(store, ["index"], now=NOW).results
    return result


def _fill(store: MemoryStore) -> None:
    topics = ["weekly report as pdf", "tea with lemon", "river walks", "budget meeting",
              "logo on the cover", "python scripts", "hotel near the station"]  # fmt: skip
    for i in range(45):
        store.remember("alice", f"k{i}", f"{topics[i % 7]} number {i}")
    for i in range(6):
        store.remember("alice", f"w{i}", f"{topics[i]} at work", namespace="work")
    for i in range(30):
        store.remember("bob", f"k{i}", f"{topics[(i + 3) % 7]} for bob {i}")


def _raw(store: MemoryStore, statement: str) -> list[tuple]:
    with store.storage.lock:
        return store.storage.hot.raw.execute(statement).fetchall()


def test_the_index_job_writes_the_pgvector_form_the_owner_and_the_hnsw_index(
    store: MemoryStore,
) -> None:
    _fill(store)
    assert _index(store).stats["entries_indexed"] == 81
    rows = _raw(
        store,
        "SELECT v.memory_id, v.user_id, v.namespace, m.user_id, m.namespace, v.vector,"
        " v.embedding::text FROM vectors v JOIN memories m ON m.id = v.memory_id",
    )
    assert len(rows) == 81
    for _, user, namespace, owner, owner_namespace, blob, embedding in rows:
        assert (user, namespace) == (owner, owner_namespace)
        as_bytes = np.frombuffer(bytes(blob), dtype="<f4")
        as_pgvector = np.array(embedding.strip("[]").split(","), dtype=np.float32)
        assert np.array_equal(as_bytes, as_pgvector)  # the same float32 numbers exactly
    valid = (
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        f" WHERE c.relname = '{index_name(MODEL, DIMS)}'"
    )
    assert _raw(store, valid) == [(True,)]
    # A concurrent build interrupted (a stopped service) leaves the index invalid: the next
    # run builds it again.
    _raw(
        store,
        "UPDATE pg_index SET indisvalid = false FROM pg_class c WHERE c.oid = indexrelid"
        f" AND c.relname = '{index_name(MODEL, DIMS)}' RETURNING 1",
    )
    _index(store)
    assert _raw(store, valid) == [(True,)]


def test_the_servers_vector_list_is_the_numpy_ranking_of_the_same_vectors(
    store: MemoryStore,
) -> None:
    _fill(store)
    _index(store)
    stale = store.remember("alice", "k3", "a new value not embedded yet")  # its vector: stale
    query = np.asarray(fake_vector("weekly report as pdf"), dtype=np.float32)
    query /= np.linalg.norm(query)
    for namespaces, kinds in [(("",), KINDS), (("work", ""), KINDS), (("",), ("note",))]:
        with store.storage.lock:
            ids, matrix = user_vectors(
                store.storage.hot,
                user_id="alice",
                namespaces=namespaces,
                model=MODEL,
                dims=DIMS,
                kinds=kinds,
            )
            near = nearest_entries(
                store.storage.hot,
                user_id="alice",
                namespaces=namespaces,
                kinds=kinds,
                model=MODEL,
                query=query.tolist(),
                depth=10,
            )
        similarities = matrix @ query if ids else np.zeros(0, dtype=np.float32)
        best = np.argsort(-similarities, kind="stable")[:10]
        assert near.count == len(ids)
        assert stale.id not in [i for i, _ in near.top]
        assert [i for i, _ in near.top] == [ids[i] for i in best]
        assert [s for _, s in near.top] == pytest.approx(similarities[best].tolist(), rel=1e-6)
        if ids:
            assert near.mean == pytest.approx(float(similarities.mean()), rel=1e-5)
            assert near.spread == pytest.approx(float(similarities.std()), rel=1e-5)
    assert near.count == 0  # alice's notes: none (all her entries are facts)


def test_vectors_copied_without_their_pgvector_form_are_filled_without_embedding_calls(
    store: MemoryStore, fake: FakeEmbeddings
) -> None:
    _fill(store)
    _index(store)
    with store.storage.lock:
        hot = store.storage.hot
        with hot.atomic():  # as migrate-to copies them: the float32 bytes only
            hot.raw.execute("UPDATE vectors SET embedding = NULL, user_id = NULL, namespace = NULL")
    calls = len(fake.embedded_texts())
    found = store.search("alice", "weekly report as pdf")
    assert not found.semantic  # nothing in pgvector form yet: keyword-only
    result = _index(store)
    assert result.stats["embeddings_filled"] == 81 and result.stats["entries_indexed"] == 0
    assert len(fake.embedded_texts()) == calls  # no entry embedded again
    assert _raw(store, "SELECT count(*) FROM vectors WHERE embedding IS NULL") == [(0,)]
    again = store.search("alice", "weekly report as pdf")
    assert again.semantic and again[0].similarity > 0


def test_a_large_users_nearest_come_through_the_hnsw_index_and_match_the_exact_list(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memkeeper.storage.postgres import vector_index

    _fill(store)
    for i in range(200):  # other users' rows around the same texts, in the same index
        store.remember(f"crowd{i % 20}", f"c{i}", f"weekly report as pdf, copy {i}")
    _index(store)
    store.remember("alice", "k10", "changed since: its vector is stale")
    query = np.asarray(fake_vector("weekly report as pdf"), dtype=np.float32)
    query /= np.linalg.norm(query)

    def near(namespaces: tuple[str, ...]):
        with store.storage.lock:
            return nearest_entries(
                store.storage.hot,
                user_id="alice",
                namespaces=namespaces,
                kinds=KINDS,
                model=MODEL,
                query=query.tolist(),
                depth=8,
            )

    sent: list[str] = []
    execute = psycopg.Connection.execute

    def seen(self, query, params=None, **kw):  # type: ignore[no-untyped-def]
        sent.append(query.as_string(self) if hasattr(query, "as_string") else str(query))
        return execute(self, query, params, **kw)

    for namespaces in [("",), ("work", "")]:
        exact = near(namespaces)
        sent.clear()
        with monkeypatch.context() as patch:
            patch.setattr(vector_index, "EXACT_UP_TO", 5)  # alice is "large" now
            patch.setattr(psycopg.Connection, "execute", seen)
            indexed = near(namespaces)
        assert any("hnsw.iterative_scan" in s for s in sent)  # the index's scan ran
        assert not any("hnsw" in s for s in sent[:1])  # (not for the exact list)
        assert indexed.count == exact.count
        assert [i for i, _ in indexed.top] == [i for i, _ in exact.top]
        assert [s for _, s in indexed.top] == pytest.approx([s for _, s in exact.top])


@pytest.mark.parametrize("large", [False, True], ids=["exact", "hnsw"])
def test_a_search_by_meaning_whose_connection_died_reconnects(
    store: MemoryStore, pg_suite_url: str, monkeypatch: pytest.MonkeyPatch, large: bool
) -> None:
    """The vector statements run on psycopg's connection itself: they must reconnect like
    every other read, not fail the search (the server dropped the connection while the
    query was being embedded, between the search's two leases)."""
    from memkeeper.storage.postgres import vector_index

    _fill(store)
    _index(store)
    if large:  # alice is "large": the HNSW path, its own transaction and settings
        monkeypatch.setattr(vector_index, "EXACT_UP_TO", 5)
    before = store.search("alice", "weekly report as pdf")
    assert before.semantic
    embed = semantic.query_vector
    killed: list[int] = []

    def embed_then_lose_the_server(*args, **kwargs):  # type: ignore[no-untyped-def]
        vector = embed(*args, **kwargs)
        kill_backends(pg_suite_url, store)
        killed.append(1)
        return vector

    monkeypatch.setattr(semantic, "query_vector", embed_then_lose_the_server)
    after = store.search("alice", "weekly report as pdf")
    assert killed and after.semantic
    assert [(h.memory.id, h.similarity) for h in after] == [
        (h.memory.id, h.similarity) for h in before
    ]


def test_the_index_job_builds_its_index_on_a_new_connection_after_one_died(
    store: MemoryStore, pg_suite_url: str
) -> None:
    from memkeeper.storage.vectors import prepare_index

    _fill(store)
    with store.storage.lock:
        store.storage.hot.execute("SELECT 1")  # the lease holds its connection now
        kill_backends(pg_suite_url, store)
        prepare_index(store.storage.hot, model=MODEL, dims=DIMS)
    valid = _raw(
        store,
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        f" WHERE c.relname = '{index_name(MODEL, DIMS)}'",
    )
    assert valid == [(True,)]
