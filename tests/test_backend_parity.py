"""One data set, both backends, the same answers (issue 22, "Retrieval").

The ranking is the same Python code on SQLite and PostgreSQL (:mod:`memkeeper.store.bm25`,
:mod:`memkeeper.store.fusion`); what differs is where the candidates come from: FTS5's
trigram index against pg_trgm for a large user, the same portable reads for a small one,
numpy over the user's float32 vectors against one pgvector statement over the same vectors
(the same selection, statistics and order). This test writes one data set — the search evaluation's
users (English and Chinese, several namespaces), a user past the scan threshold, entries in
cold storage, a fake embedding for every current entry — with the same ids and times into a
SQLite file and into PostgreSQL, runs the same sequence of searches (keyword-only, then
hybrid; searches mark their hits used, identically on both) and contexts on each, and
compares the hits: the same entries, in the same order, with the same scores — and what
the index and merge jobs would select (stale vectors, merge candidates) in the same order.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_embeddings import DIMS, FakeEmbeddings, embed_config, fake_vector
from helpers import T0
from helpers.backends import empty_memory

from memkeeper import MemoryStore
from memkeeper.bench.search_eval import load_eval_set
from memkeeper.clock import fixed, to_db
from memkeeper.config import Config
from memkeeper.maintenance.runner import run_once
from memkeeper.storage import keywords, merge_candidates
from memkeeper.storage.vectors import embedding_text, stale_entries, store_vectors, text_hash
from memkeeper.store import semantic

pytestmark = pytest.mark.postgres

KEY_ENV = "ZHIPUAI_API_KEY"
EVAL = load_eval_set()
LARGE_USER = "erin"
LARGE_ROWS = keywords.SCAN_BELOW_ROWS + 100
WORDS = ["report", "pdf", "weekly", "logo", "deadline", "client", "plan", "budget", "报告",
         "格式", "封面", "客户", "会议", "reports", "planning", "budgets"]  # fmt: skip
LARGE_QUERIES = ["weekly report", "报告格式", "client budget plan", "pd", "封面", "planned"]
COLD_QUERIES = ["Lisbon", "old pdf budget"]
BY_THE_JOB = "dana"
"""The user whose vectors the index job writes (the others' are written directly: faster)."""
NOW = T0 + timedelta(days=400)
FLOAT32_SUMS = 1e-6
"""How far a score of the hybrid may differ between the backends: a few float32 epsilons."""


@pytest.fixture(autouse=True)
def fresh_semantic(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("MEMKEEPER_RETRIEVAL", raising=False)
    semantic.reset()
    yield
    semantic.reset()


def _row(
    i: int,
    memory_id: str,
    user: str,
    namespace: str,
    kind: str,
    key: str | None,
    value: str,
    confidence: float,
) -> dict[str, Any]:
    """One entry as stored: ages and uses spread over a year, the same on both backends."""
    written = to_db(T0 + timedelta(days=(i * 7) % 360, hours=i % 24))
    used = to_db(T0 + timedelta(days=(i * 11) % 390)) if i % 3 == 0 else None
    return {
        "id": memory_id, "user_id": user, "namespace": namespace, "kind": kind, "key": key,
        "value": value, "source": "parity", "confidence": confidence, "created_at": written,
        "updated_at": written, "state_since": written, "last_used_at": used or written,
        "last_accessed_at": used, "access_count": 1 if used else 0,
    }  # fmt: skip


def _data_set() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(hot rows, cold rows) of the data set, deterministic."""
    import random

    hot = [
        _row(
            i,
            f"eval-{e['ref']}",
            e["user"],
            e["namespace"],
            e["kind"],
            e.get("key"),
            e["value"],
            e["confidence"],
        )
        for i, e in enumerate(EVAL["memories"])
    ]
    rng = random.Random(22)
    for i in range(LARGE_ROWS):
        text = " ".join(rng.sample(WORDS, rng.randint(1, 4)))
        kind, key = ("note", None) if i % 2 else ("fact", f"k{i}")
        confidence = round(rng.uniform(0.5, 1), 3)
        hot.append(_row(i, f"large-{i:05d}", LARGE_USER, "", kind, key, text, confidence))
    cold = []
    for i, (key, value) in enumerate(
        [("city", "Lisbon, the old flat"), ("format", "old pdf budget"), ("note", "pdf plan")]
    ):
        row = _row(i, f"cold-{i}", "alice", "", "fact", key, value, 0.7)
        cold.append(row | {"cold_reason": "expired", "retired_at": row["updated_at"]})
    for row in hot:
        row["state"] = "active"
    for row in cold:
        row["state"] = "cold"
    return hot, cold


def _insert(db: Any, table: str, rows: list[dict[str, Any]]) -> None:
    names = list(rows[0])
    with db.atomic():
        db.conn.executemany(
            f"INSERT INTO {table} ({', '.join(names)}) VALUES"
            f" ({', '.join(':' + n for n in names)})",
            rows,
        )


@functools.lru_cache(maxsize=4096)
def _vector(text: str) -> list[float]:
    """The fake embedding of ``text``, made once for both backends (it is slow to make)."""
    return fake_vector(text, DIMS)


def _fill(store: MemoryStore) -> None:
    hot, cold = _data_set()
    with store.storage.lock:
        _insert(store.storage.hot, "memories", hot)
        cold_db = store.storage.cold(create=True)
        assert cold_db is not None
        _insert(cold_db, "cold_memories", cold)
        model = store.config.search.embedding_model
        store_vectors(
            store.storage.hot,
            [
                (row["id"], model, DIMS, text_hash(text), _vector(text))
                for row in hot
                if (text := embedding_text(row["kind"], row["key"], row["value"]))
                and row["user_id"] != BY_THE_JOB
            ],
        )


Answer = list[tuple[str, float, float, float]]


def _answers(target: Path | str, config: Config, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every search and context of the sequence on one backend: (id, score, similarity,
    keyword share) of each hit, and each context's text."""
    out: list[Any] = []
    with MemoryStore(target, config=config, clock=fixed(NOW)) as store:
        _fill(store)
        with store.storage.lock:  # what the index and merge jobs would pick, in their order
            hot = store.storage.hot
            out.append(repr(stale_entries(hot, model="another-model", dims=DIMS, limit=40)))
            out.append(repr(merge_candidates.all_pairs(hot)))
            out.append(repr([e["id"] for e in merge_candidates.mergeable_entries(hot, "bob", "")]))
        # One user's vectors through the index job and the fake embeddings server: on
        # PostgreSQL the job writes them in pgvector form, which search reads.
        monkeypatch.setenv(KEY_ENV, "fake.key-for-tests")
        (job,) = run_once(store, ["index"], now=NOW).results
        out.append(repr((job.status, job.stats["entries_indexed"])))
        for hybrid in (False, True):
            if hybrid:
                monkeypatch.setenv(KEY_ENV, "fake.key-for-tests")
            else:
                monkeypatch.delenv(KEY_ENV, raising=False)
            searches = [(q["user"], q["namespace"], q["query"], False) for q in EVAL["queries"]]
            searches += [(LARGE_USER, "", q, False) for q in LARGE_QUERIES]
            searches += [("alice", "", q, True) for q in COLD_QUERIES]
            for user, namespace, query, cold in searches:
                hits = store.search(user, query, namespace=namespace, limit=10, include_cold=cold)
                assert hits.semantic is hybrid
                found = [(h.memory.id, h.score, h.similarity, h.keyword) for h in hits]
                out.append((user, query, hybrid, found))
            for user in ("alice", "chen", LARGE_USER):
                out.append(store.context(user, query="weekly report format").text)
    return out


def test_one_data_set_gives_the_same_hits_on_sqlite_and_postgres(
    tmp_path: Path, pg_suite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty_memory(pg_suite_url)
    with FakeEmbeddings() as fake:
        config = embed_config(fake.url)
        on_sqlite = _answers(tmp_path / "memory.db", config, monkeypatch)
        semantic.reset()
        on_postgres = _answers(pg_suite_url, config, monkeypatch)
    assert len(on_sqlite) == len(on_postgres)
    assert "[]" not in on_sqlite[:3]  # stale vectors, merge pairs and entries: something each
    by_the_job = sum(1 for m in EVAL["memories"] if m["user"] == BY_THE_JOB)
    assert on_sqlite[3] == repr(("ok", by_the_job))  # the job embedded them (equal on PG)
    searches = [a for a in on_sqlite if isinstance(a, tuple)]
    assert sum(1 for *_, hits in searches if hits) >= 0.9 * len(searches)  # it finds things
    assert any(a[0] == LARGE_USER and a[3] for a in searches)
    for mine, theirs in zip(on_sqlite, on_postgres, strict=True):
        if isinstance(mine, str):
            assert mine == theirs
            continue
        user, query, hybrid, hits = mine
        assert theirs[:3] == (user, query, hybrid)
        assert [h[0] for h in theirs[3]] == [h[0] for h in hits], (user, query, hybrid)
        for (_, *scores), (_, *others) in zip(hits, theirs[3], strict=True):
            # Similarities are float32 sums, numpy's on SQLite and pgvector's on PostgreSQL:
            # equal to float32's precision (keyword scores are the same Python, exactly).
            rel = FLOAT32_SUMS if hybrid else 1e-9
            assert others == pytest.approx(scores, rel=rel, abs=1e-12), (user, query, hybrid)
