"""Search (issue 11): ranking, the evaluation set, isolation, marking used, the switch,
degrading to keyword-only, and context(query=)."""

from __future__ import annotations

import contextlib
import json
import random
import re
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_embeddings import DIMS, FakeEmbeddings, embed_config, fake_vector, wrong_dimension
from fake_llm import error
from helpers.databases import is_postgres

from memkeeper import MemoryStore
from memkeeper.bench.search_eval import insert_memories, load_eval_set
from memkeeper.bench.search_eval import recall_at_3 as eval_recall_at_3
from memkeeper.clock import fixed, to_db
from memkeeper.config import Config
from memkeeper.records import Memory
from memkeeper.storage.vectors import embedding_text, store_vectors, text_hash
from memkeeper.store import semantic
from memkeeper.store.bm25 import score_all

pytestmark = pytest.mark.both_backends

EVAL = load_eval_set()
KEY_ENV = "ZHIPUAI_API_KEY"
KEYWORD_FLOOR = 0.75  # measured 0.798 (BM25; was 0.536 by substring counts)
HYBRID_FLOOR = 0.80  # measured 0.845 (fake trigram vectors, min_similarity 0.3; was 0.738)


@pytest.fixture(autouse=True)
def fresh_semantic(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("MEMKEEPER_RETRIEVAL", raising=False)
    semantic.reset()
    yield
    semantic.reset()


def index_all(store: MemoryStore, dims: int = DIMS) -> None:
    """Give every current entry its fake vector (what the index job would store)."""
    rows = []
    for m in store.list_memories():
        text = embedding_text(m.kind, m.key, m.value)
        rows.append(
            (
                m.id,
                store.config.search.embedding_model,
                dims,
                text_hash(text),
                fake_vector(text, dims),
            )
        )
    with store.storage.lock:
        store_vectors(store.storage.hot, rows)


def load_eval(store: MemoryStore) -> dict[str, Memory]:
    return insert_memories(store, EVAL)


def recall_at_3(store: MemoryStore, refs: dict[str, Memory]) -> tuple[float, list[str]]:
    return eval_recall_at_3(store, EVAL, refs)


def test_the_evaluation_set_is_the_promised_size() -> None:
    users = {e["user"] for e in EVAL["memories"]}
    assert len(EVAL["memories"]) >= 55 and len(EVAL["queries"]) >= 40 and len(users) >= 4
    assert sum(q["paraphrase"] for q in EVAL["queries"]) >= 10


def test_recall_at_3_keyword_only_and_hybrid(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeEmbeddings() as fake, MemoryStore(db_path, config=embed_config(fake.url)) as store:
        refs = load_eval(store)
        monkeypatch.delenv(KEY_ENV, raising=False)
        keyword_only, kw_misses = recall_at_3(store, refs)
        index_all(store)
        monkeypatch.setenv(KEY_ENV, "fake.key-for-tests")
        hybrid, hy_misses = recall_at_3(store, refs)
    with capsys.disabled():
        print(f"\nsearch eval recall@3: keyword-only {keyword_only:.3f}, hybrid {hybrid:.3f}")
    assert hybrid >= keyword_only
    assert keyword_only >= KEYWORD_FLOOR, kw_misses
    assert hybrid >= HYBRID_FLOOR, hy_misses


def test_isolation_over_random_data(store: MemoryStore) -> None:
    rng = random.Random(11)
    words = ["report", "报告", "格式", "deadline", "logo", "客户", "weekly", "封面", "plan"]
    owners = [(u, ns) for u in ("u1", "u2", "u3") for ns in ("", "p1", "p2")]
    for i in range(150):
        user, ns = rng.choice(owners)
        text = " ".join(rng.sample(words, 3))
        if i % 3:
            store.remember(user, f"k{i}", text, namespace=ns, confidence=rng.uniform(0.7, 1))
        else:
            store.add_note(user, text, namespace=ns)
    for _ in range(200):
        user, ns = rng.choice(owners)
        query = rng.choice(words) + rng.choice(["", " " + rng.choice(words)])
        for hit in store.search(user, query, namespace=ns, limit=10):
            assert hit.memory.user_id == user
            assert hit.memory.namespace in {ns, ""}


def test_formula_and_components(store: MemoryStore) -> None:
    store.remember("alice", "report_format", "PDF please", confidence=0.95)
    (hit,) = store.search("alice", "PDF")
    weights = store.config.search
    assert hit.keyword == 1.0 and hit.similarity == 0.0 and hit.confidence == 0.95
    assert hit.recency == pytest.approx(1.0)
    prior = (weights.weight_confidence * 0.95 + weights.weight_recency) / (
        weights.weight_confidence + weights.weight_recency
    )
    relevance = weights.weight_keyword * 1.0 * 1.0  # coverage 1 (every word), the best BM25
    assert hit.score == pytest.approx(relevance * (1 + weights.prior_weight * prior))


def _age(store: MemoryStore, memory_id: str, days: float) -> None:
    """Move an entry's write and last use ``days`` into the past."""
    moment = to_db(store.now() - timedelta(days=days))
    with store.storage.lock:
        store.storage.hot.conn.execute(
            "UPDATE memories SET created_at = ?, updated_at = ?, last_used_at = ?,"
            " last_accessed_at = NULL WHERE id = ?",
            [moment, moment, moment, memory_id],
        )


def test_relevance_leads_confidence_and_recency_only_reorder(store: MemoryStore) -> None:
    """An old, unused entry that matches the query better wins over a confident one that
    search just returned; an entry matching nothing is never returned, however confident."""
    best = store.add_note("alice", "the quarterly report goes out as a PDF", confidence=0.6)
    weak = store.add_note("alice", "a report was mentioned", confidence=1.0)
    store.remember("alice", "favourite_colour", "green", confidence=1.0)
    _age(store, best.id, 300)
    _age(store, weak.id, 300)
    for _ in range(3):  # found by other searches: now recently used
        assert store.search("alice", "mentioned", limit=1)[0].memory.id == weak.id
    hits = store.search("alice", "quarterly PDF report", limit=10)
    assert [h.memory.id for h in hits] == [best.id, weak.id]
    assert hits[1].recency > 0.9 > 0.01 > hits[0].recency


class _Discard(Exception):
    """Raised to roll a search's marks back."""


@contextlib.contextmanager
def _searching_a_copy(db_path: Path | str, config: Config) -> Iterator[MemoryStore]:
    """A store whose searches leave the memory as it was: a copy of the file on SQLite; on
    PostgreSQL the memory itself, inside one transaction rolled back at the end (every write
    of the store nests in it as a savepoint)."""
    if not is_postgres(db_path):
        copy = Path(db_path).parent / "copy.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
        shutil.copy(db_path, copy)
        with MemoryStore(copy, config=config) as fresh:
            yield fresh
        return
    with (
        MemoryStore(db_path, config=config) as fresh,
        contextlib.suppress(_Discard),
        fresh.storage.hot.atomic(),
    ):
        yield fresh
        raise _Discard


def test_first_k_hits_do_not_depend_on_the_limit(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Property: for several queries, the hits of limit k are the first k of limit 20
    (keyword-only and hybrid). Searching marks hits used, so each search runs on a copy."""
    rng = random.Random(21)
    words = [
        "report",
        "pdf",
        "weekly",
        "logo",
        "deadline",
        "client",
        "plan",
        "budget",
        "报告",
        "格式",
        "封面",
        "客户",
    ]
    with FakeEmbeddings() as fake:
        config = embed_config(fake.url)
        with MemoryStore(db_path, config=config) as store:
            for i in range(120):
                text = " ".join(rng.sample(words, rng.randint(1, 4)))
                if i % 2:
                    store.add_note("alice", text, confidence=rng.uniform(0.5, 1))
                else:
                    store.remember("alice", f"k{i}", text, confidence=rng.uniform(0.5, 1))
            index_all(store)
        queries = ["weekly report", "报告格式", "client budget plan", "logo", "pdf deadline"]
        for hybrid in (False, True):
            if hybrid:
                monkeypatch.setenv(KEY_ENV, "fake.key-for-tests")
            else:
                monkeypatch.delenv(KEY_ENV, raising=False)
            for query in queries:
                results = {}
                for limit in (20, 1, 3, 7):
                    with _searching_a_copy(db_path, config) as fresh:
                        hits = fresh.search("alice", query, limit=limit)
                        results[limit] = [h.memory.id for h in hits]
                        assert hits.semantic is hybrid
                for limit in (1, 3, 7):
                    assert results[limit] == results[20][:limit], (query, hybrid, limit)


def test_hits_are_marked_used_like_recall(db_path: Path) -> None:
    start = fixed(__import__("datetime").datetime(2026, 1, 1, tzinfo=__import__("datetime").UTC))
    with MemoryStore(db_path, clock=start) as store:
        memory = store.remember("alice", "report_format", "PDF")
        store.clock = fixed(memory.created_at + timedelta(days=1))
        (hit,) = store.search("alice", "PDF")
        assert hit.memory.access_count == 1
        assert hit.memory.last_accessed_at == memory.created_at + timedelta(days=1)
        assert store.get(memory.id).access_count == 1  # type: ignore[union-attr]


def _set_state(store: MemoryStore, memory_id: str, state: str) -> None:
    with store.storage.lock:
        store.storage.hot.conn.execute(
            "UPDATE memories SET state = ? WHERE id = ?", [state, memory_id]
        )


def test_pending_review_hit_is_renewed_and_superseded_never_returned(store: MemoryStore) -> None:
    old = store.remember("alice", "report_format", "PDF documents")
    new = store.remember("alice", "report_format", "Word documents")
    assert store.get(old.id).state == "superseded"  # type: ignore[union-attr]
    assert [h.memory.id for h in store.search("alice", "documents", limit=10)] == [new.id]
    assert all(h.memory.id != old.id for h in store.search("alice", "PDF", limit=10))
    _set_state(store, new.id, "pending_review")
    (hit,) = store.search("alice", "Word")
    assert hit.memory.state == "active"
    assert store.changes(memory_id=new.id, action="renew")


def test_include_cold_restores(store: MemoryStore) -> None:
    from memkeeper.storage.transitions import Transition, cold_image

    memory = store.remember("alice", "report_format", "PDF with logo")
    image = store.get(memory.id).to_image()  # type: ignore[union-attr]
    store.storage  # noqa: B018
    target = cold_image(image, "demoted", store.now())
    store._core.apply([Transition(memory.id, image, target, "demote", "test")], "test")
    assert store.get(memory.id).state == "cold"  # type: ignore[union-attr]
    assert store.search("alice", "logo") == []
    (hit,) = store.search("alice", "logo", include_cold=True)
    assert hit.memory.state == "active"
    assert store.get(memory.id).state == "active"  # type: ignore[union-attr]


def test_switch_off(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.remember("alice", "report_format", "PDF")
    monkeypatch.setenv("MEMKEEPER_RETRIEVAL", "off")
    assert store.search("alice", "PDF") == []
    assert store.context("alice", query="PDF").text == ""
    monkeypatch.delenv("MEMKEEPER_RETRIEVAL")
    store.config = Config.model_validate({"search": {"enabled": False}})
    assert store.search("alice", "PDF") == []


@pytest.mark.parametrize("failure", ["500", "401", "timeout", "dimension"])
def test_embedding_failures_degrade_to_keyword_only(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    from fake_llm import Reply

    replies: dict[str, Any] = {
        "500": lambda r: error(500),
        "401": lambda r: error(401),
        "timeout": lambda r: Reply(delay=2.0),
        "dimension": wrong_dimension,
    }
    monkeypatch.setenv(KEY_ENV, "fake.key-for-tests")
    config = embed_config("http://127.0.0.1:1", search={"query_timeout_s": 0.3})
    with FakeEmbeddings() as fake:
        config = embed_config(fake.url, search={"query_timeout_s": 0.3})
        with MemoryStore(db_path, config=config) as store:
            memory = store.remember("alice", "report_format", "PDF")
            index_all(store)
            fake.fail_forever(replies[failure])
            (hit,) = store.search("alice", "PDF")
            assert hit.memory.id == memory.id and hit.similarity == 0.0 and hit.keyword == 1.0


def test_context_with_query_has_a_section_each(store: MemoryStore) -> None:
    store.remember("alice", "report_format", "PDF", confidence=0.95)
    store.add_note("alice", "封面加公司logo", confidence=0.8)  # third: not in two slots
    store.remember("alice", "deadline", "Wednesday", namespace="acme", confidence=0.95)
    store.record_episode("alice", "draft proposal", namespace="acme", output_summary="outline")
    store.record_episode("alice", "send report", namespace="acme")
    ctx = store.context("alice", namespace="acme", limit=2, query="公司logo")
    # The profile applies to every project: its report_format is in the slots too.
    assert sorted(m.key for m in ctx.memories) == ["deadline", "report_format"]
    assert [h.memory.value for h in ctx.relevant] == ["封面加公司logo"]
    assert [e.task_name for e in ctx.episodes] == ["draft proposal", "send report"]
    assert "Relevant to this message:" in ctx.text and "Recent episodes:" in ctx.text
    assert ctx.text.index("draft proposal") < ctx.text.index("send report")
    note = ctx.relevant[0].memory
    assert store.get(note.id).access_count == 1  # type: ignore[union-attr]
    # entries already in the slots are not repeated
    again = store.context("alice", namespace="acme", query="Wednesday deadline")
    assert all(h.memory.key != "deadline" for h in again.relevant)


def test_cli_search_prints_components_and_json(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memkeeper.cli import main

    with MemoryStore(db_path) as store:
        store.remember("alice", "report_format", "PDF\x1b[31m", confidence=0.95)
    assert main(["--db", str(db_path), "search", "alice", "PDF"]) == 0
    out = capsys.readouterr().out
    assert "report_format" in out and "\\x1b[31m" in out and "\x1b" not in out
    assert "sim 0.000 kw 1.000 conf 0.95" in out
    assert main(["--db", str(db_path), "search", "alice", "PDF", "--json", "--kind", "fact"]) == 0
    (hit,) = json.loads(capsys.readouterr().out)
    assert hit["memory"]["value"] == "PDF\x1b[31m" and hit["keyword"] == 1.0


def test_recall_evaluation_smoke(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``memkeeper bench --search-eval --eval-size smoke``: the generated set, the index job
    against the stand-in, memkeeper fresh and aged beside the baselines; the issue's targets
    at recall@3 (the full run's figures are in the README)."""
    from memkeeper.cli import main

    monkeypatch.delenv(KEY_ENV, raising=False)
    argv = ["bench", "--search-eval", "--eval-size", "smoke", "--json"]
    assert main(argv) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["users"] == 3 and figures["questions"] >= 30
    assert set(figures["by_kind"]) == {"paraphrase", "keyword", "old", "none"}
    assert "skipped" in figures["endpoint"]
    base = figures["baselines"]
    # the no-match precision of every system (memkeeper's and the baselines')
    for f in (*(base[n] for n in ("bm25", "dense", "rrf")), figures["hybrid_fresh"]):
        assert 0 <= f["no_answer_silent"] <= 1
    assert base["bm25_written"]["recall@3"] >= base["bm25"]["recall@3"]
    # memkeeper's BM25 scorer against the textbook one, equal scores in any order; at
    # recall@1 within one question: a possessive bound to its word ("Farid's") is a term
    # of its own, and "which author is Farid's book by?" then finds "Farid's favourite
    # dish" first on this set (README, "The recall evaluation")
    ties = base["ties_expected"]
    one = 1 / figures["questions"]
    for k in (1, 3, 10):
        slack = one + 0.001 if k == 1 else 0.0  # the figures are rounded to 0.001
        assert ties["keyword_scorer"][f"recall@{k}"] + slack >= ties["bm25"][f"recall@{k}"] > 0

    def r3(name: str) -> float:
        return float(figures[name]["recall@3"])

    assert r3("keyword_fresh") >= base["bm25"]["recall@3"]
    assert r3("hybrid_fresh") >= base["rrf"]["recall@3"]
    assert r3("hybrid_fresh") >= 0.95 * base["dense"]["recall@3"]
    for mode in ("keyword", "hybrid"):
        assert r3(f"{mode}_aged") >= 0.95 * r3(f"{mode}_fresh")
    assert r3("hybrid_aged") > r3("keyword_aged")


def test_the_recall_evaluation_runs_a_real_local_model_beside_the_stand_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--search-eval --model DIR``: memkeeper's hybrid with a local model (the tiny one the
    tests build), and recall by language for it and for keyword-only."""
    from helpers.tiny_model import static_model

    from memkeeper.cli import main

    monkeypatch.delenv(KEY_ENV, raising=False)
    model = static_model(tmp_path / "tiny-model")
    argv = ["bench", "--search-eval", "--eval-size", "smoke", "--model", str(model), "--json"]
    assert main(argv) == 0
    figures = json.loads(capsys.readouterr().out)
    found = figures["models"]["tiny-model"]
    assert 0 <= found["recall@1"] <= found["recall@3"] <= found["recall@10"] <= 1
    for f in (found, figures["keyword_fresh"]):
        assert set(f["recall_by_language"]) == {"en", "zh"}
    # The tiny model reads no Chinese: its Chinese users are searched by keywords alone.
    assert found["recall_by_language"]["zh"] == figures["keyword_fresh"]["recall_by_language"]["zh"]


def test_the_query_embedding_is_timed_apart_from_the_search(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """search() reports the query's embedding call apart from its own work, in the result
    and on the command line's last (stderr) line; keyword-only without a key."""
    from memkeeper.cli import main

    with (
        FakeEmbeddings(delay=0.05) as fake,
        MemoryStore(db_path, config=embed_config(fake.url)) as store,
    ):
        store.remember("alice", "report_format", "PDF files with a logo")
        monkeypatch.delenv(KEY_ENV, raising=False)
        keyword = store.search("alice", "PDF")
        assert not keyword.semantic and keyword.embed_ms == 0 and keyword.search_ms > 0
        index_all(store)
        monkeypatch.setenv(KEY_ENV, "fake.key-for-tests")
        hits = store.search("alice", "PDF logo")
        assert hits.semantic and hits.embed_ms >= 50 and hits.search_ms > 0
        assert set(hits.timing()) == {"embed_ms", "search_ms", "semantic"}
    monkeypatch.delenv(KEY_ENV)
    assert main(["--db", str(db_path), "search", "alice", "PDF"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"1 hit, keyword-only: query embedding 0\.0 ms, search [\d.]+ ms", err)


def test_cached_vectors_follow_every_change(store: MemoryStore) -> None:
    """user_vectors keeps a user's matrix between searches; a changed text, a new vector, a
    replaced one in the reused highest rowid, and an entry back from cold are all seen."""
    from memkeeper.storage.vectors import delete_vectors, user_vectors

    settings = store.config.search
    model, dims = settings.embedding_model, settings.embedding_dimensions

    def current() -> dict[str, list[float]]:
        with store.storage.lock:
            found, matrix = user_vectors(
                store.storage.hot, user_id="alice", namespaces=("",), model=model, dims=dims
            )
        return {
            i: [round(x, 5) for x in row] for i, row in zip(found, matrix.tolist(), strict=True)
        }

    def embed(memory: Memory, seed: str) -> None:
        text = embedding_text(memory.kind, memory.key, memory.value)
        row = (memory.id, model, dims, text_hash(text), fake_vector(seed, dims))
        with store.storage.lock:
            store_vectors(store.storage.hot, [row])

    a = store.remember("alice", "a", "first")
    b = store.remember("alice", "b", "second")
    embed(a, "one")
    assert set(current()) == {a.id}
    embed(b, "two")
    assert set(current()) == {a.id, b.id}
    b2 = store.remember("alice", "b", "second, changed")
    assert set(current()) == {a.id}  # b's vector is stale: left out
    embed(b2, "three")
    c = store.remember("alice", "c", "third")
    assert set(current()) == {a.id, b2.id}
    with store.storage.lock, store.storage.hot.atomic():
        delete_vectors(store.storage.hot, [b2.id])  # the highest rowid is free again...
    embed(c, "four")  # ...and c's new vector takes it: the same highest rowid as before
    assert current()[c.id] == [round(x, 5) for x in fake_vector("four", dims)]


def test_a_dimension_mismatch_is_logged_once_with_both_numbers(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers.logs import capture_logs

    monkeypatch.setenv(KEY_ENV, "fake.key-for-tests")
    with FakeEmbeddings() as fake, MemoryStore(db_path, config=embed_config(fake.url)) as store:
        store.remember("alice", "report_format", "PDF")
        index_all(store)
        fake.fail_forever(wrong_dimension)
        with capture_logs() as logs:
            for query in ("PDF", "report", "format"):
                assert not store.search("alice", query).semantic
    warned = [e for e in logs if e.get("endpoint_dimensions") is not None]
    assert len(warned) == 1
    assert warned[0]["endpoint_dimensions"] == DIMS + 1
    assert warned[0]["embedding_dimensions"] == DIMS


def test_query_embeddings_share_one_pooled_client(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Uncached queries reuse the process's embedder for that endpoint (no client built per
    query), whatever their timeout (each call's own)."""
    monkeypatch.setenv(KEY_ENV, "fake.key-for-tests")
    with FakeEmbeddings() as fake, MemoryStore(db_path, config=embed_config(fake.url)) as store:
        store.remember("alice", "report_format", "PDF")
        index_all(store)
        for query in ("PDF", "report", "format", "pdf report"):
            assert store.search("alice", query).semantic
        assert len(fake.requests) == 4
        assert len(semantic._embedders) == 1
        store.config = embed_config(fake.url, search={"query_timeout_s": 2.0})
        assert store.search("alice", "another query").semantic
        assert len(semantic._embedders) == 1


def test_the_index_job_and_search_share_one_embedder(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index job embeds through the process's pooled embedder, the one search then uses
    for its query — each call with its own timeout: a fake slower than the query's timeout
    but well within [llm]'s still serves the job, while the query falls back to keywords."""
    from memkeeper.maintenance.runner import run_once

    monkeypatch.setenv(KEY_ENV, "fake.key-for-tests")
    with FakeEmbeddings(delay=0.4) as fake:
        config = embed_config(fake.url, search={"query_timeout_s": 0.2})
        with MemoryStore(db_path, config=config) as store:
            memory = store.remember("alice", "report_format", "PDF")
            (result,) = run_once(store, ["index"]).results
            assert result.status == "ok" and result.stats["entries_indexed"] == 1
            assert len(semantic._embedders) == 1  # made by the job, kept for search
            (embedder,) = semantic._embedders.values()
            hits = store.search("alice", "PDF")
            assert not hits.semantic and hits[0].memory.id == memory.id  # 0.4 s > 0.2 s
            assert list(semantic._embedders.values()) == [embedder]


def test_the_readmes_local_embeddings_example(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docs' block, pointed at a local server (the fake, at the block's dimension):
    the index job and search use it, while [llm] keeps its own endpoint and key."""
    import tomllib

    from helpers.docs import all_docs_text

    from memkeeper.maintenance.runner import run_once

    docs = all_docs_text()
    section = docs[docs.index("Local embeddings, without a cloud key") :]
    block = section[
        section.index("```toml\n") + 8 : section.index("```\n", section.index("```toml"))
    ]
    options = tomllib.loads(block)["search"]
    monkeypatch.delenv(KEY_ENV, raising=False)  # no cloud key at all
    monkeypatch.setenv(options["embedding_api_key_env"], "anything")
    with FakeEmbeddings() as fake:
        options["embedding_base_url"] = fake.url
        config = Config.model_validate(
            {"llm": {"base_url": "http://127.0.0.1:9/never", "max_retries": 0}, "search": options}
        )
        with MemoryStore(db_path, config=config) as store:
            memory = store.remember("alice", "report_format", "PDF with the company logo")
            (result,) = run_once(store, ["index"]).results
            assert result.status == "ok" and result.stats["entries_indexed"] == 1
            hits = store.search("alice", "company logo")
            assert hits.semantic and hits[0].memory.id == memory.id and hits[0].similarity > 0
        bodies = [r.body for r in fake.requests]
    assert {b["model"] for b in bodies} == {"nomic-embed-text"}
    assert {b["dimensions"] for b in bodies} == {768}


def test_user_vectors_from_entries_already_read_match_its_own_read(store: MemoryStore) -> None:
    """Search hands user_vectors the entries it read: the same ids and vectors as the
    function's own read, with a changed (stale) entry left out both ways."""
    from memkeeper.storage.vectors import user_vectors

    for i in range(6):
        store.remember("alice", f"k{i}", f"value {i}")
    settings = store.config.search
    index_all(store, dims=settings.embedding_dimensions)
    store.remember("alice", "k3", "changed since")  # its vector is stale now
    args = dict(
        user_id="alice",
        namespaces=("",),
        model=settings.embedding_model,
        dims=settings.embedding_dimensions,
    )
    entries = [
        (m.id, m.kind, m.key, m.value)
        for m in store.list_memories("alice")
        if m.state in ("active", "pending_review")  # as search reads them
    ]
    with store.storage.lock:
        own_ids, own = user_vectors(store.storage.hot, **args)  # type: ignore[arg-type]
        given_ids, given = user_vectors(store.storage.hot, entries=entries, **args)  # type: ignore[arg-type]
    assert own_ids == given_ids and len(own_ids) == 5
    assert own.tolist() == given.tolist()


def test_keyword_only_search_keeps_the_bm25_order(store: MemoryStore) -> None:
    """Without a vector list the keyword list's order is BM25's: its coverage weighs the
    whole list (by its best match), so a short entry with the rarest word stays ahead of a
    longer one holding more of the query's words."""
    for n in range(30):
        store.add_note("alice", f"lunch with the team, week {n}")
    short = store.add_note("alice", "quokka")
    longer = store.add_note(
        "alice", "lunch with the team at the zoo near the lake, quokka sighting, long day out"
    )
    scored = score_all(
        [(m.id, m.key, m.value) for m in store.list_memories("alice")], "quokka lunch team"
    )
    assert [s.id for s in scored[:2]] == [short.id, longer.id]
    assert scored[0].coverage < scored[1].coverage  # the per-entry coverage disagrees
    hits = store.search("alice", "quokka lunch team", limit=2)
    assert [h.memory.id for h in hits] == [short.id, longer.id]
