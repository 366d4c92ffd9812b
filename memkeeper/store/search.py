"""Search: a user's memories found by meaning, ranked as seed 003 §3.3 ranks them.

Candidates come from two signals over the user's entries in the asked namespace and the
user's profile (the default namespace ``""``), never anyone else's:

* keyword — the FTS5 trigram index over key and value (:mod:`memkeeper.storage.keywords`),
  0..1 relative to the best match; works offline and without a key;
* similarity — the cosine of the query's embedding with each entry's current vector
  (:mod:`memkeeper.storage.vectors`, a brute-force dot product over the user's vectors); the
  ``2 * limit`` most similar entries at or above ``[search] min_similarity`` are candidates.
  Without a key, without vectors, or when the query cannot be embedded
  (:mod:`memkeeper.store.semantic`), search is keyword-only.

Each candidate (active or pending review; cold entries with ``include_cold``; superseded
values never) is scored::

    score = weight_similarity·similarity + weight_keyword·keyword
          + weight_confidence·confidence + weight_recency·0.5 ** (days since last use / half-life)

with the ``[search]`` weights, ties going to the more recently used entry. The hits returned
are marked used exactly as ``recall`` marks its value (:func:`memkeeper.store.recall.mark_found`
and :func:`~memkeeper.store.recall.restore_found`): an active entry records a use, a
pending-review one is renewed, a cold one is restored to active.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from memkeeper import logs, validation
from memkeeper.clock import days_between
from memkeeper.errors import StorageUnwritable
from memkeeper.records import KEYED_KINDS, KINDS, Memory, SearchHit, SearchResults
from memkeeper.storage.changelog import image_of
from memkeeper.storage.files import placeholders
from memkeeper.storage.keywords import keyword_scores
from memkeeper.storage.sqlite import immediate_transaction
from memkeeper.storage.vectors import user_vectors
from memkeeper.store import semantic
from memkeeper.store.core import StoreCore
from memkeeper.store.recall import mark_found, restore_found

log = logs.get_logger("memkeeper.search")

LIVE_STATES = ("active", "pending_review")
"""The hot states search returns (superseded values never)."""

MIN_POOL = 50
"""Fewest keyword candidates asked of the index, before ranking."""


def search(
    core: StoreCore,
    user_id: str,
    query: str,
    *,
    namespace: str,
    kinds: Sequence[str] | None,
    limit: int | None,
    include_cold: bool,
    exclude: Collection[str] = (),
) -> SearchResults:
    """The ``limit`` best entries for ``query`` (ids in ``exclude`` left out), marked used,
    with the query embedding's cost apart from the search's own."""
    if not semantic.retrieval_enabled(core.config):
        return SearchResults()
    user_id, namespace = core.owner(user_id, namespace)
    query = core.value("query", query).strip() if query.strip() else ""
    wanted = KINDS if not kinds else tuple(dict.fromkeys(validation.kind(k) for k in kinds))
    limit = core.limit(limit if limit is not None else core.config.search.limit)
    if not query:
        return SearchResults()
    namespaces = tuple(dict.fromkeys((namespace, "")))
    started = time.perf_counter()
    similar, embed_ms, used_vectors = _similar(
        core, user_id, namespaces, query, 2 * limit + len(exclude)
    )
    pool = max(MIN_POOL, 10 * limit + len(exclude))
    keyword, memories = _keyword_and_rows(
        core, user_id, namespaces, query, wanted, include_cold, pool, similar
    )
    now = core.now()
    hits = [
        _hit(core, memory, similar.get(memory.id, 0.0), keyword.get(memory.id, 0.0), now)
        for memory in memories
        if memory.id not in exclude
    ]
    hits.sort(key=lambda h: (-h.score, -h.memory.last_used_at.timestamp(), h.memory.id))
    chosen = SearchResults(_mark(core, hits[:limit]))
    chosen.embed_ms = embed_ms
    chosen.search_ms = (time.perf_counter() - started) * 1000 - embed_ms
    chosen.semantic = used_vectors
    log.debug("search", candidates=len(hits), hits=len(chosen), **chosen.timing())
    return chosen


def _hit(
    core: StoreCore, memory: Memory, similarity: float, keyword: float, now: datetime
) -> SearchHit:
    weights = core.config.search
    days = max(0.0, days_between(memory.last_used_at, now))
    recency = 0.5 ** (days / weights.recency_half_life_days)
    score = (
        weights.weight_similarity * similarity
        + weights.weight_keyword * keyword
        + weights.weight_confidence * memory.confidence
        + weights.weight_recency * recency
    )
    return SearchHit(memory, score, similarity, keyword, memory.confidence, recency)


def _similar(
    core: StoreCore, user_id: str, namespaces: Sequence[str], query: str, top: int
) -> tuple[dict[str, float], float, bool]:
    """The ``top`` entries most similar to ``query`` (id: cosine), the embedding's ms, and
    whether similarity took part (False: keyword-only)."""
    settings = core.config.search
    with core.storage.lock:
        ids, matrix = user_vectors(
            core.storage.hot,
            user_id=user_id,
            namespaces=namespaces,
            model=settings.embedding_model,
            dims=settings.embedding_dimensions,
        )
    if not ids:
        return {}, 0.0, False
    started = time.perf_counter()
    vector = semantic.query_vector(core.config, query)
    embed_ms = (time.perf_counter() - started) * 1000
    if vector is None:
        return {}, embed_ms, False
    import numpy as np

    similarities = matrix @ vector
    best = np.argsort(-similarities, kind="stable")[:top]
    found = {
        ids[i]: float(min(1.0, similarities[i]))
        for i in best
        if similarities[i] >= settings.min_similarity
    }
    return found, embed_ms, True


def _keyword_and_rows(
    core: StoreCore,
    user_id: str,
    namespaces: Sequence[str],
    query: str,
    kinds: Sequence[str],
    include_cold: bool,
    pool: int,
    similar: dict[str, float],
) -> tuple[dict[str, float], list[Memory]]:
    """The keyword scores, and every candidate's row (hot first; cold when asked)."""
    args: dict[str, Any] = dict(
        user_id=user_id, namespaces=namespaces, query=query, kinds=kinds, limit=pool
    )
    storage = core.storage
    with storage.lock:
        keyword = dict(keyword_scores(storage.hot, table="memories", states=LIVE_STATES, **args))
        rows = _rows(storage.hot, "memories", [*keyword, *similar], user_id, namespaces, kinds)
        cold = storage.cold(create=False) if include_cold else None
        if cold is not None:
            cold_scores = keyword_scores(cold, table="cold_memories", states=("cold",), **args)
            keyword.update((i, s) for i, s in cold_scores if i not in keyword)
            ids = [i for i in [*keyword, *similar] if i not in {row["id"] for row in rows}]
            cold_rows = _rows(cold, "cold_memories", ids, user_id, namespaces, kinds)
            rows += _not_shadowed(storage.hot, cold_rows, user_id)
    return keyword, [Memory.from_image(image_of(row)) for row in rows]


def _rows(
    db: Any,
    table: str,
    ids: Sequence[str],
    user_id: str,
    namespaces: Sequence[str],
    kinds: Sequence[str],
) -> list[Any]:
    """The rows of these ids that belong to the user, namespaces and kinds, and are live."""
    ids = list(dict.fromkeys(ids))
    if not ids:
        return []
    states = "state = 'cold' AND cold_reason != 'superseded'"
    if table == "memories":
        states = f"state IN ({placeholders(len(LIVE_STATES))})"
    params = [*ids, user_id, *namespaces, *kinds]
    if table == "memories":
        params += LIVE_STATES
    return list(
        db.query(
            f"SELECT * FROM {table} WHERE id IN ({placeholders(len(ids))}) AND user_id = ?"
            f" AND namespace IN ({placeholders(len(namespaces))})"
            f" AND kind IN ({placeholders(len(kinds))}) AND {states}",
            params,
        )
    )


def _not_shadowed(hot: Any, cold_rows: list[Any], user_id: str) -> list[Any]:
    """Cold rows whose key has no live value in the hot file (a note never has)."""
    keyed = [row for row in cold_rows if row["kind"] in KEYED_KINDS and row["key"]]
    if not keyed:
        return cold_rows
    live = {
        (row["namespace"], row["key"])
        for row in hot.query(
            "SELECT namespace, key FROM memories WHERE user_id = ?"
            f" AND key IN ({placeholders(len(keyed))})"
            f" AND state IN ({placeholders(len(LIVE_STATES))})",
            [user_id, *(row["key"] for row in keyed), *LIVE_STATES],
        )
    }
    return [row for row in cold_rows if (row["namespace"], row["key"]) not in live]


def _mark(core: StoreCore, hits: list[SearchHit]) -> list[SearchHit]:
    """Mark the hits used as recall would; a hit changed or erased meanwhile is left out."""
    try:
        marked = _mark_hot(core, [h for h in hits if h.memory.state != "cold"])
        for hit in hits:
            if hit.memory.state == "cold":
                marked[hit.memory.id] = _restore(core, hit.memory.id)
    except StorageUnwritable as exc:
        semantic.warn_once("unwritable", "search hits' use could not be recorded", cause=str(exc))
        return hits
    return [replace(h, memory=marked[h.memory.id]) for h in hits if marked.get(h.memory.id)]


def _mark_hot(core: StoreCore, hits: list[SearchHit]) -> dict[str, Memory | None]:
    marked: dict[str, Memory | None] = {}
    if not hits:
        return marked
    storage = core.storage
    ids = [h.memory.id for h in hits]
    with storage.lock, immediate_transaction(storage.hot):
        now = core.now()
        rows = storage.hot.query(
            f"SELECT * FROM memories WHERE id IN ({placeholders(len(ids))})"
            f" AND state IN ({placeholders(len(LIVE_STATES))})",
            [*ids, *LIVE_STATES],
        )
        for row in list(rows):
            marked[row["id"]] = mark_found(core, image_of(row), now, by="search")
    return marked


def _restore(core: StoreCore, memory_id: str) -> Memory | None:
    """Bring a cold hit back to active, as recall does; None if it left cold storage."""
    cold = core.storage.cold(create=False)
    with core.storage.lock:
        rows = (
            []
            if cold is None
            else list(cold.query("SELECT * FROM cold_memories WHERE id = ?", [memory_id]))
        )
    return restore_found(core, image_of(rows[0]), by="search") if rows else None
