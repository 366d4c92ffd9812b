"""Embeddings: the real zhipuai client against a fake server, vector storage, the index job."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from fake_embeddings import (
    DIMS,
    FakeEmbeddings,
    embed_config,
    fake_vector,
    fewer_vectors,
    nan_values,
    wrong_dimension,
)
from fake_llm import Reply, error

from memkeeper import MemoryStore
from memkeeper.llm.embeddings import Embedder
from memkeeper.llm.errors import LlmAuthError, LlmBadAnswer, LlmUnavailable
from memkeeper.maintenance.runner import JobResult, run_once
from memkeeper.storage.transaction import immediate_transaction
from memkeeper.storage.vectors import (
    embedding_text,
    stale_entries,
    store_vectors,
    text_hash,
    user_vectors,
    vector_count,
)

pytestmark = pytest.mark.both_backends

KEY = "0123456789abcdef.EmbedKeySecretPart"
NOW = datetime(2026, 3, 2, 3, 0, tzinfo=UTC)


@pytest.fixture
def fake() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings() as server:
        yield server


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ZHIPUAI_API_KEY", KEY)
    return KEY


def embedder(fake: FakeEmbeddings, **kwargs) -> Embedder:
    config = embed_config(fake.url)
    return Embedder(
        config.llm, api_key=KEY, model="embedding-3", dimensions=DIMS, timeout_s=1.0, **kwargs
    )


def open_store(db_path: Path, fake: FakeEmbeddings, **search) -> MemoryStore:
    return MemoryStore(db_path, config=embed_config(fake.url, search=search))


def index(store: MemoryStore, **kwargs) -> JobResult:
    (result,) = run_once(store, ["index"], now=NOW, **kwargs).results
    return result


def fill(store: MemoryStore, count: int, user: str = "u1") -> None:
    for i in range(count):
        store.remember(user, f"k{i}", f"value number {i}")


# -- the client -------------------------------------------------------------------------------


def test_fake_vectors_are_deterministic_unit_and_similar_for_similar_texts() -> None:
    a = np.array(fake_vector("report format: PDF with a cover page"))
    b = np.array(fake_vector("report format: PDF with cover pages"))
    c = np.array(fake_vector("喜欢喝无糖乌龙茶"))
    assert fake_vector("x y") == fake_vector("x y")
    assert math.isclose(float(a @ a), 1.0, rel_tol=1e-9)
    assert float(a @ b) > float(a @ c) + 0.3


def test_embed_returns_unit_float32_vectors_in_input_order(fake: FakeEmbeddings) -> None:
    with embedder(fake) as client:
        vectors = client.embed(["alpha beta", "封面加公司logo", "gamma"])
    assert [v.dtype for v in vectors] == [np.float32] * 3
    assert all(v.shape == (DIMS,) for v in vectors)
    assert np.allclose(vectors[1], np.array(fake_vector("封面加公司logo"), dtype=np.float32))
    (request,) = fake.requests
    assert request.path.endswith("/embeddings")
    assert request.body["input"] == ["alpha beta", "封面加公司logo", "gamma"]
    assert request.body["dimensions"] == DIMS
    assert request.body["model"] == "embedding-3"
    assert request.headers["Authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize(
    ("failure", "exception", "words"),
    [
        (wrong_dimension, LlmBadAnswer, "dimensions"),
        (nan_values, LlmBadAnswer, "NaN"),
        (fewer_vectors, LlmBadAnswer, "2 vectors for 3 inputs"),
        (lambda r: error(401, "bad key"), LlmAuthError, "refused the API key"),
        (lambda r: error(500), LlmUnavailable, "HTTP 500"),
        (lambda r: Reply(delay=3.0), LlmUnavailable, "no answer within 1 s"),
    ],
)
def test_every_failure_is_one_of_our_errors_and_never_names_the_key(
    fake: FakeEmbeddings, failure, exception, words: str
) -> None:
    fake.fail_forever(failure)
    with embedder(fake, sleep=lambda s: None) as client, pytest.raises(exception) as caught:
        client.embed(["a", "b", "c"])
    assert words in str(caught.value)
    assert KEY not in str(caught.value)
    assert "EmbedKeySecretPart" not in str(caught.value)
    assert caught.value.__context__ is None
    retried = exception is LlmUnavailable
    assert len(fake.requests) == (2 if retried else 1)  # max_retries = 1, bad answers final


def test_a_transient_failure_is_retried(fake: FakeEmbeddings) -> None:
    fake.script(error(503))
    with embedder(fake, sleep=lambda s: None) as client:
        result = client.embed_counted(["a"])
    assert result.attempts == 2
    assert result.tokens == 7
    assert len(result.vectors) == 1


# -- the index job ----------------------------------------------------------------------------


def test_index_embeds_every_current_entry_and_nothing_twice(
    db_path: Path, fake: FakeEmbeddings
) -> None:
    store = open_store(db_path, fake, index_batch=4)
    fill(store, 10)
    note = store.add_note("u1", "封面加公司logo")
    assert fake.requests == []  # writes never call the network
    result = index(store)
    assert result.status == "ok", result.error
    assert result.stats["entries_indexed"] == 11
    assert result.stats["batches_done"] == 3
    assert result.stats["embed_calls"] == 3
    assert "封面加公司logo" in fake.embedded_texts()  # a note: its value alone
    assert "k3: value number 3" in fake.embedded_texts()
    with store.storage.lock:
        ids, matrix = user_vectors(
            store.storage.hot, user_id="u1", namespaces=[""], model="embedding-3", dims=DIMS
        )
    assert len(ids) == 11 and matrix.shape == (11, DIMS) and matrix.dtype == np.float32
    row = matrix[ids.index(note.id)]
    assert np.allclose(row, np.array(fake_vector("封面加公司logo"), dtype=np.float32))
    again = index(store)
    assert again.stats["entries_stale"] == 0
    assert len(fake.requests) == 3
    store.close()


def test_a_changed_value_or_a_new_entry_is_re_embedded(db_path: Path, fake: FakeEmbeddings) -> None:
    store = open_store(db_path, fake)
    first = store.remember("u1", "report_format", "PDF")
    index(store)
    newer = store.remember("u1", "report_format", "Word")  # a new entry supersedes the old
    superseded = store.get(first.id)
    assert superseded is not None and superseded.state == "superseded"
    with store.storage.lock:
        stale = dict(stale_entries(store.storage.hot, model="embedding-3", dims=DIMS, limit=10))
    assert stale == {newer.id: "report_format: Word"}
    result = index(store)
    assert result.stats["entries_indexed"] == 1
    store.close()


def test_an_in_place_value_change_makes_the_vector_stale(
    db_path: Path, fake: FakeEmbeddings
) -> None:
    store = open_store(db_path, fake)
    entry = store.remember("u1", "drink", "green tea")
    index(store)
    with store.storage.lock, immediate_transaction(store.storage.hot):
        store.storage.hot.execute("UPDATE memories SET value = 'oolong' WHERE id = ?", [entry.id])
    with store.storage.lock:
        ids, _ = user_vectors(
            store.storage.hot, user_id="u1", namespaces=[""], model="embedding-3", dims=DIMS
        )
    assert ids == []  # a stale vector is never compared
    result = index(store)
    assert result.stats["entries_indexed"] == 1
    assert fake.embedded_texts()[-1] == "drink: oolong"
    store.close()


def test_a_vector_of_the_entrys_own_text_is_current_whatever_the_text(db_path: Path) -> None:
    """A vector is current when its text hash is the entry's text's now: compared in the
    query through a Python function on SQLite, computed in SQL (sha256 of ``key: value``, or
    of a note's value) on PostgreSQL. The two agree on any text, and a change is seen."""
    store = MemoryStore(db_path)
    entries = [
        store.remember("u1", "city", "北京 朝阳区"),
        store.remember("u1", "k: with a colon", "value: with one too", kind="preference"),
        store.remember("u1", "ünïcode", "e\u0301 combining, 🧪 emoji, tab\tand\nnewline"),
        store.add_note("u1", "a note's value only ' quoted \\ backslash %s %(x)s ?"),
        store.add_note("u1", "a summary note has a key, and only its value is embedded"),
    ]
    with store.storage.lock, immediate_transaction(store.storage.hot):
        store.storage.hot.execute(
            "UPDATE memories SET key = 'summary:s1' WHERE id = ?", [entries[-1].id]
        )
    rows = []
    for m in store.list_memories("u1"):
        text = embedding_text(m.kind, m.key, m.value)
        rows.append((m.id, "embedding-3", DIMS, text_hash(text), fake_vector(text)))
    with store.storage.lock:
        assert store_vectors(store.storage.hot, rows) == len(entries)
        assert stale_entries(store.storage.hot, model="embedding-3", dims=DIMS, limit=10) == []
        with immediate_transaction(store.storage.hot):
            store.storage.hot.execute(
                "UPDATE memories SET value = value || '!' WHERE id = ?", [entries[3].id]
            )
        stale = stale_entries(store.storage.hot, model="embedding-3", dims=DIMS, limit=10)
    assert stale == [(entries[3].id, entries[3].value + "!")]
    store.close()


def test_storing_a_batch_replaces_each_vector_with_a_higher_rowid(db_path: Path) -> None:
    """One row per entry, the last given for it winning; a replaced vector gets a rowid above
    every earlier one (the merge job's watermark), on both backends; an entry that is gone
    gets none."""
    store = MemoryStore(db_path)
    a, b = store.remember("u1", "a", "first"), store.remember("u1", "b", "second")
    hot = store.storage.hot

    def row(memory_id: str, text: str) -> tuple[str, str, int, str, list[float]]:
        return (memory_id, "embedding-3", DIMS, text_hash(text), fake_vector(text))

    with store.storage.lock:
        assert store_vectors(hot, [row(a.id, "one"), row(b.id, "two")]) == 2
        before = hot.execute("SELECT max(rowid) FROM vectors").fetchone()[0]
        written = store_vectors(
            hot, [row(a.id, "three"), row(b.id, "four"), row(a.id, "five"), row("gone", "x")]
        )
        stored = {
            r[0]: (r[1], r[2])
            for r in hot.execute("SELECT memory_id, value_hash, rowid FROM vectors").fetchall()
        }
    assert written == 2 and set(stored) == {a.id, b.id}
    assert stored[a.id][0] == text_hash("five") and stored[b.id][0] == text_hash("four")
    assert min(rowid for _, rowid in stored.values()) > before
    store.close()


def test_another_model_or_dimension_is_re_embedded_and_never_mixed(
    db_path: Path, fake: FakeEmbeddings
) -> None:
    store = open_store(db_path, fake)
    fill(store, 3)
    index(store)
    store.close()
    store = open_store(db_path, fake, embedding_dimensions=32)
    with store.storage.lock:
        ids, matrix = user_vectors(
            store.storage.hot, user_id="u1", namespaces=[""], model="embedding-3", dims=32
        )
    assert ids == [] and matrix.shape == (0, 32)
    assert index(store).stats["entries_indexed"] == 3
    assert fake.requests[-1].body["dimensions"] == 32
    store.close()
    store = open_store(db_path, fake, embedding_dimensions=32, embedding_model="embedding-2")
    assert index(store).stats["entries_indexed"] == 3
    with store.storage.lock:
        assert vector_count(store.storage.hot, model="embedding-2", dims=32) == 3
        assert vector_count(store.storage.hot) == 3
    store.close()


def test_without_a_key_index_is_skipped(
    db_path: Path, fake: FakeEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ZHIPUAI_API_KEY")
    store = open_store(db_path, fake)
    fill(store, 2)
    result = index(store)
    assert result.status == "skipped"
    assert "ZHIPUAI_API_KEY is not set" in result.error
    assert "search is keyword-only" in result.error
    assert fake.requests == []
    store.close()


def test_the_call_budget_and_concurrency_are_respected(db_path: Path) -> None:
    with FakeEmbeddings(delay=0.05) as fake:
        store = open_store(
            db_path, fake, index_batch=2, index_max_calls_per_run=3, index_concurrency=2
        )
        fill(store, 10)
        result = index(store)
        assert result.stats["entries_indexed"] == 6
        assert len(fake.requests) == 3
        assert fake.max_in_flight == 2
        assert all(len(r.body["input"]) <= 2 for r in fake.requests)
        assert result.stats["entries_stale"] == 6
        assert result.stats["more_stale"] is True
        assert index(store).stats["entries_indexed"] == 4
        store.close()


def test_a_dry_run_calls_nothing(db_path: Path, fake: FakeEmbeddings) -> None:
    store = open_store(db_path, fake)
    fill(store, 3)
    result = index(store, dry_run=True)
    assert result.stats["entries_stale"] == 3
    assert fake.requests == []
    store.close()


@pytest.mark.parametrize(
    "failure",
    [
        nan_values,
        fewer_vectors,
        lambda r: error(401),
        lambda r: error(500),
        lambda r: Reply(delay=3.0),
    ],
    ids=["nan", "fewer", "401", "500-forever", "timeout"],
)
def test_every_failure_skips_the_batch_stores_nothing_and_a_run_with_nothing_done_fails(
    db_path: Path, fake: FakeEmbeddings, failure
) -> None:
    """A failed batch is skipped; a run in which every batch failed fails, saying why."""
    store = open_store(db_path, fake, index_batch=2)
    fill(store, 4)
    fake.fail_forever(failure)
    result = index(store)
    assert result.status == "failed"
    assert result.error is not None and "every embedding batch failed" in result.error
    assert result.stats["entries_indexed"] == 0
    assert result.stats["batches_failed"] >= 1
    with store.storage.lock:
        assert vector_count(store.storage.hot) == 0
    fake.fail_forever(None)
    assert index(store).stats["entries_indexed"] == 4  # nothing lost: the next run catches up
    store.close()


def test_a_dimension_mismatch_fails_the_run_with_both_numbers_and_status_shows_it(
    db_path: Path, fake: FakeEmbeddings, capsys: pytest.CaptureFixture[str]
) -> None:
    """Vectors of another dimension than configured are a setting to fix, not a passing
    failure: the run stops its calls and fails with one error naming both numbers."""
    from memkeeper.cli import main

    store = open_store(db_path, fake, index_batch=1, index_concurrency=1)
    fill(store, 5)
    fake.fail_forever(wrong_dimension)
    result = index(store)
    assert result.status == "failed"
    assert result.error is not None and "DimensionMismatch" in result.error
    assert f"vectors of {DIMS + 1} dimensions" in result.error
    assert f"embedding_dimensions is {DIMS}" in result.error
    assert len(fake.requests) == 1 and result.stats["batches_failed"] == 1
    store.close()
    assert main(["--db", str(db_path), "status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert f"vectors of {DIMS + 1} dimensions" in status["last_runs"]["index"]["error"]


def test_forget_and_forget_user_remove_vectors(db_path: Path, fake: FakeEmbeddings) -> None:
    store = open_store(db_path, fake)
    store.remember("u1", "a", "one")
    store.remember("u1", "b", "two")
    store.remember("u2", "c", "three")
    index(store)
    store.forget("u1", "a")
    with store.storage.lock:
        assert vector_count(store.storage.hot) == 2
    store.forget_user("u2")
    with store.storage.lock:
        rows = store.storage.hot.execute("SELECT memory_id FROM vectors").fetchall()
    assert len(rows) == 1
    store.close()
