"""The bench's measurements of retrieval by meaning, against the local embeddings stand-in.

* :func:`index_throughput` — one run of the ``index`` job on the generated database, the
  stand-in answering each call after a fixed latency (100 ms by default): entries embedded
  per second, beside the ideal the settings allow (``index_batch`` times ``index_concurrency``
  per latency), and the concurrency the stand-in saw.
* :func:`search_with_vectors` — ``search`` for a user with 500 entries that all have
  the stand-in's vectors (stored directly, as the index job stores them): similarity and
  keywords both take part. The query's embedding (a call to the
  stand-in, then a cache hit) is timed apart and left out, as the targets ask: p50 / p99
  of ``search_ms`` alone, with ``embed_ms`` reported beside it.

Both point the config's LLM endpoint at the stand-in with a key in an environment variable
of the bench's own, set only while they run.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from memkeeper.bench.embed_standin import STANDIN_KEY, EmbeddingStandIn, standin_vector
from memkeeper.bench.generate import AGENT_PREFIX
from memkeeper.bench.measure import (
    SEARCH_USER_ENTRIES,
    fill_search_user,
    quantile,
    search_query,
)
from memkeeper.bench.workers import running_clock
from memkeeper.config import Config
from memkeeper.maintenance.runner import run_once
from memkeeper.storage.vectors import embedding_text, store_vectors, text_hash
from memkeeper.store import MemoryStore

KEY_ENV = "MEMKEEPER_BENCH_STANDIN_KEY"
"""Where the stand-in's key is put while the bench talks to it."""

INDEX_LATENCY_S = 0.1
"""The stand-in's answer time per call in the index measurement (the issue's 100 ms)."""


def standin_config(config: Config, url: str) -> Config:
    """``config`` with its LLM endpoint at the stand-in and the bench's key variable."""
    llm = config.llm.model_copy(
        update={"base_url": url, "api_key_env": KEY_ENV, "max_retries": 1, "timeout_seconds": 10}
    )
    search = config.search.model_copy(
        update={"embedding_base_url": "", "embedding_api_key_env": ""}
    )
    return config.model_copy(update={"llm": llm, "search": search})


@contextlib.contextmanager
def _standin_key() -> Iterator[None]:
    before = os.environ.get(KEY_ENV)
    os.environ[KEY_ENV] = STANDIN_KEY
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(KEY_ENV, None)
        else:
            os.environ[KEY_ENV] = before


def index_throughput(
    path: Path, config: Config, now: datetime, *, latency_s: float = INDEX_LATENCY_S
) -> dict[str, Any]:
    """One ``index`` run on ``path`` against the stand-in answering in ``latency_s``."""
    with EmbeddingStandIn(latency_s=latency_s) as standin, _standin_key():
        bench_config = standin_config(config, standin.url)
        store = MemoryStore(path, config=bench_config, clock=running_clock(now), actor="bench")
        try:
            began = time.perf_counter()
            (result,) = run_once(store, ["index"], now=now).results
            seconds = time.perf_counter() - began
        finally:
            store.close()
        calls, in_flight = standin.calls, standin.max_in_flight
    settings = config.search
    indexed = int(result.stats.get("entries_indexed", 0))
    ideal = settings.index_batch * settings.index_concurrency / latency_s
    rate = indexed / seconds if seconds else 0.0
    return {
        "status": result.status,
        "latency_ms": round(latency_s * 1000),
        "batch": settings.index_batch,
        "concurrency": settings.index_concurrency,
        "entries_indexed": indexed,
        "entries_failed": int(result.stats.get("entries_failed", 0)),
        "more_stale": bool(result.stats.get("more_stale", False)),
        "calls": calls,
        "max_in_flight": in_flight,
        "seconds": round(seconds, 2),
        "entries_per_s": round(rate, 1),
        "ideal_entries_per_s": round(ideal, 1),
        "percent_of_ideal": round(100 * rate / ideal, 1) if ideal else None,
    }


def search_with_vectors(path: Path, config: Config, now: datetime, searches: int) -> dict[str, Any]:
    """``search`` by meaning and keywords for a user with 500 indexed entries."""
    user = f"{AGENT_PREFIX}semantic"
    with EmbeddingStandIn(latency_s=0.0) as standin, _standin_key():
        bench_config = standin_config(config, standin.url)
        clock = running_clock(now)
        store = MemoryStore(path, config=bench_config, clock=clock, actor="bench")
        try:
            fill_search_user(store, user)
            _store_vectors(store, user)
            search_ms, embed_ms, semantic = [], [], 0
            for n in range(searches):
                hits = store.search(user, search_query(n))
                search_ms.append(hits.search_ms)
                embed_ms.append(hits.embed_ms)
                semantic += hits.semantic
        finally:
            store.close()
    search_ms.sort()
    embed_ms.sort()
    return {
        "searches": searches,
        "entries": SEARCH_USER_ENTRIES,
        "by_meaning": semantic,
        "p50_ms": quantile(search_ms, 0.5),
        "p99_ms": quantile(search_ms, 0.99),
        "max_ms": round(search_ms[-1], 2),
        "embed_p50_ms": quantile(embed_ms, 0.5),
        "embed_max_ms": round(embed_ms[-1], 2),
    }


def _store_vectors(store: MemoryStore, user: str) -> None:
    """Give ``user``'s entries the stand-in's vectors, as the index job would store them
    (indexing the whole generated database first would take the bench an hour)."""
    settings = store.config.search
    rows = []
    for memory in store.list_memories(user):
        text = embedding_text(memory.kind, memory.key, memory.value)
        vector = standin_vector(text, settings.embedding_dimensions)
        rows.append(
            (
                memory.id,
                settings.embedding_model,
                settings.embedding_dimensions,
                text_hash(text),
                vector,
            )
        )
    with store.storage.lock:
        store_vectors(store.storage.hot, rows)
