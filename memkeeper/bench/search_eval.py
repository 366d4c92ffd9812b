"""The search evaluation: recall@3 on a small hand-written set, keyword-only and by meaning.

The set (``memkeeper/bench/data/search_eval.json``, shipped with the package) has about 60
memories of several users and namespaces, in Chinese and English, and about 40 queries, each
with the entries it should find — a quarter of them paraphrases that share no keyword with
the entry. recall@3 is the share of a query's expected entries among its top 3 hits,
averaged over the queries.

``memkeeper bench --search-eval`` (:func:`run_search_eval`) runs it against the configured
embeddings endpoint — GLM's ``embedding-3`` by default, or any OpenAI-compatible one through
``[llm] base_url`` — in a temporary database: keyword-only first, then the ``index`` job
embeds every entry for real, then the same queries by meaning. Without a key it is skipped.
It also reports how similar each query is to the entries it should find and to the others,
which is what ``[search] min_similarity`` should sit between for that model. The test suite
runs the same functions against a fake embeddings server (tests/test_search.py).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from memkeeper.config import Config
from memkeeper.llm.endpoint import read_api_key
from memkeeper.llm.errors import LlmNotConfigured
from memkeeper.maintenance.runner import run_once
from memkeeper.records import Memory
from memkeeper.storage.vectors import user_vectors
from memkeeper.store import MemoryStore, semantic

NO_KEY_ENV = "MEMKEEPER_SEARCH_EVAL_NO_KEY"
"""An environment variable never set: the key variable of the keyword-only half."""

MAX_INDEX_RUNS = 20


def load_eval_set() -> dict[str, Any]:
    """The evaluation set: ``memories`` (each with a ``ref``) and ``queries`` (``expect``)."""
    text = resources.files("memkeeper.bench").joinpath("data/search_eval.json").read_text("utf-8")
    return json.loads(text)


def insert_memories(store: MemoryStore, eval_set: dict[str, Any]) -> dict[str, Memory]:
    """Write the set's memories through the API; each stored memory by its ``ref``."""
    refs = {}
    for e in eval_set["memories"]:
        if e["kind"] == "note":
            memory = store.add_note(
                e["user"], e["value"], namespace=e["namespace"], confidence=e["confidence"]
            )
        else:
            memory = store.remember(
                e["user"],
                e["key"],
                e["value"],
                namespace=e["namespace"],
                kind=e["kind"],
                confidence=e["confidence"],
            )
        refs[e["ref"]] = memory
    return refs


def recall_at_3(
    store: MemoryStore, eval_set: dict[str, Any], refs: dict[str, Memory]
) -> tuple[float, list[str]]:
    """recall@3 over the set's queries, and the queries that missed an expected entry."""
    by_id = {m.id: ref for ref, m in refs.items()}
    total, misses = 0.0, []
    for q in eval_set["queries"]:
        hits = store.search(q["user"], q["query"], namespace=q["namespace"], limit=3)
        found = {by_id[h.memory.id] for h in hits}
        share = len(found & set(q["expect"])) / len(q["expect"])
        total += share
        if share < 1:
            misses.append(q["query"])
    return total / len(eval_set["queries"]), misses


def similarity_spread(
    store: MemoryStore, eval_set: dict[str, Any], refs: dict[str, Memory]
) -> dict[str, Any]:
    """Cosines of each query with the entries it should find and with the user's others
    (in the same namespaces search looks at): quantiles of both, to place min_similarity."""
    import numpy as np

    settings = store.config.search
    expected, others = [], []
    for q in eval_set["queries"]:
        vector = semantic.query_vector(store.config, q["query"])
        if vector is None:
            continue
        with store.storage.lock:
            ids, matrix = user_vectors(
                store.storage.hot,
                user_id=q["user"],
                namespaces=tuple(dict.fromkeys((q["namespace"], ""))),
                model=settings.embedding_model,
                dims=settings.embedding_dimensions,
            )
        wanted = {refs[ref].id for ref in q["expect"]}
        for memory_id, cosine in zip(ids, (matrix @ vector).tolist(), strict=True):
            (expected if memory_id in wanted else others).append(cosine)

    def quantiles(values: list[float]) -> dict[str, float] | None:
        if not values:
            return None
        points = np.quantile(np.asarray(values), [0.0, 0.1, 0.5, 0.9, 1.0])
        return dict(
            zip(("min", "p10", "p50", "p90", "max"), np.round(points, 3).tolist(), strict=True)
        )

    return {"expected": quantiles(expected), "others": quantiles(others)}


def _without_key(config: Config) -> Config:
    os.environ.pop(NO_KEY_ENV, None)
    llm = config.llm.model_copy(update={"api_key_env": NO_KEY_ENV})
    search = config.search.model_copy(update={"embedding_api_key_env": ""})
    return config.model_copy(update={"llm": llm, "search": search})


def run_search_eval(config: Config, say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The evaluation against ``config``'s embeddings endpoint; ``skipped`` without a key."""
    try:
        read_api_key(config.llm)
    except LlmNotConfigured:
        return {"skipped": f"no API key: set {config.llm.api_key_env} to run the evaluation"}
    eval_set = load_eval_set()
    search = config.search
    with tempfile.TemporaryDirectory(prefix="memkeeper-search-eval-") as tmp:
        path = Path(tmp) / "eval.db"
        semantic.reset()
        with MemoryStore(path, config=_without_key(config), actor="bench") as store:
            refs = insert_memories(store, eval_set)
            say("keyword-only")
            keyword_only, keyword_misses = recall_at_3(store, eval_set, refs)
        with MemoryStore(path, config=config, actor="bench") as store:
            say(f"embedding {len(refs)} memories with {search.embedding_model}")
            index = _index_everything(store)
            say("by meaning")
            hybrid, hybrid_misses = recall_at_3(store, eval_set, refs)
            spread = similarity_spread(store, eval_set, refs)
    return {
        "model": search.embedding_model,
        "dimensions": search.embedding_dimensions,
        "min_similarity": search.min_similarity,
        "memories": len(eval_set["memories"]),
        "queries": len(eval_set["queries"]),
        "paraphrases": sum(q["paraphrase"] for q in eval_set["queries"]),
        "keyword_only": {"recall_at_3": round(keyword_only, 3), "missed": keyword_misses},
        "hybrid": {"recall_at_3": round(hybrid, 3), "missed": hybrid_misses},
        "index": index,
        "similarity": spread,
    }


def _index_everything(store: MemoryStore) -> dict[str, Any]:
    """Run the index job until no entry is stale; its totals (a failed batch is reported,
    and the evaluation goes on with what was embedded)."""
    totals = {"runs": 0, "entries_indexed": 0, "entries_failed": 0, "embed_tokens": 0}
    for _ in range(MAX_INDEX_RUNS):
        (result,) = run_once(store, ["index"]).results
        totals["runs"] += 1
        for name in ("entries_indexed", "entries_failed", "embed_tokens"):
            totals[name] += int(result.stats.get(name, 0))
        if result.status != "ok":
            totals["error"] = result.error or result.status
            break
        if not result.stats.get("more_stale") or not result.stats.get("entries_indexed"):
            break
    return totals


def table(figures: dict[str, Any]) -> str:
    """The evaluation's figures for people."""
    if "skipped" in figures:
        return f"search evaluation skipped: {figures['skipped']}"
    spread = figures["similarity"]

    def line(name: str) -> str:
        q = spread[name]
        if q is None:
            return "n/a"
        return f"min {q['min']}, p10 {q['p10']}, median {q['p50']}, p90 {q['p90']}, max {q['max']}"

    index = figures["index"]
    return "\n".join(
        [
            f"search evaluation: {figures['memories']} memories, {figures['queries']} queries "
            f"({figures['paraphrases']} paraphrases), {figures['model']} at "
            f"{figures['dimensions']} dimensions",
            f"recall@3 keyword-only  {figures['keyword_only']['recall_at_3']}",
            f"recall@3 by meaning    {figures['hybrid']['recall_at_3']}"
            f"  (min_similarity {figures['min_similarity']})",
            f"indexed {index['entries_indexed']} entries in {index['runs']} run(s), "
            f"{index['entries_failed']} failed, {index['embed_tokens']} tokens"
            + (f"; error: {index['error']}" if "error" in index else ""),
            f"similarity to expected entries  {line('expected')}",
            f"similarity to the others        {line('others')}",
            "missed by meaning: " + ("; ".join(figures["hybrid"]["missed"]) or "none"),
        ]
    )
