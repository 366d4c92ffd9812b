"""The hand-written search set, and helpers the recall evaluation shares.

The set (``memkeeper/bench/data/search_eval.json``, shipped with the package) has about 60
memories of several users and namespaces, in Chinese and English, and about 40 queries, each
with the entries it should find — a quarter of them paraphrases that share no keyword with
the entry. recall@3 is the share of a query's expected entries among its top 3 hits,
averaged over the queries; the test suite runs it keyword-only and against a fake
embeddings server (tests/test_search.py). ``memkeeper bench --search-eval`` runs the larger
generated evaluation of :mod:`memkeeper.bench.recall_eval`, which uses
:func:`without_key` and :func:`index_everything` from here.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from typing import Any

from memkeeper.config import Config
from memkeeper.maintenance.runner import run_once
from memkeeper.records import Memory
from memkeeper.store import MemoryStore

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


def without_key(config: Config) -> Config:
    os.environ.pop(NO_KEY_ENV, None)
    llm = config.llm.model_copy(update={"api_key_env": NO_KEY_ENV})
    search = config.search.model_copy(update={"embedding_api_key_env": ""})
    return config.model_copy(update={"llm": llm, "search": search})


def index_everything(store: MemoryStore) -> dict[str, Any]:
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
