"""Search's vector list: the user's entries most similar to the query, calibrated.

The ``[search] vector_candidates`` entries whose current vector is most similar to the query's
embedding, at or above ``[search] min_similarity`` or an outlier of the user's similarities
(:func:`memkeeper.store.fusion.admitted`), each with its share of the list's scale. Where the
similarities come from depends on the backend, what is done with them does not
(:func:`_vector_list`, the same code on both):

* SQLite: the user's current vectors read (:func:`memkeeper.storage.vectors.user_vectors`,
  kept per process) and compared with numpy, a brute-force dot product;
* PostgreSQL: one pgvector statement over the same vectors on the server
  (:func:`memkeeper.storage.nearest.nearest_entries`): how many, the mean and spread of their
  similarities, the most similar — no vector travels to the client.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from memkeeper.storage.nearest import nearest_entries, ranks_in_database, user_has_vectors
from memkeeper.storage.vectors import has_vectors, user_vectors
from memkeeper.store import fusion, semantic, vector_source
from memkeeper.store.core import StoreCore


class VectorList(NamedTuple):
    """What the vector side gives ranking: ``found``, the admitted entries (id, cosine; best
    first); for each of the ``vector_candidates`` most similar entries, admitted or not, its
    ``share`` of the list's scale ((cosine - mean) / (best - mean) over the user's vectors;
    empty under :data:`memkeeper.store.fusion.OUTLIER_MIN_ENTRIES` vectors: fused by rank)
    and its ``cosine``; the query embedding's ms; and whether similarity took part (False:
    keyword-only)."""

    found: list[tuple[str, float]]
    share: dict[str, float]
    cosine: dict[str, float]
    embed_ms: float = 0.0
    semantic: bool = False
    why: str = ""
    sure: float = 0.0
    """How sure the list is, 0-1 (:func:`memkeeper.store.fusion.sureness`)."""
    zscore: dict[str, float] | None = None
    """Each of the most similar entries' z-score among the user's similarities."""


def _none(embed_ms: float = 0.0, why: str = "") -> VectorList:
    """No vector list: keyword-only (after ``embed_ms`` spent on a failed embedding),
    ``why`` in words."""
    return VectorList([], {}, {}, embed_ms, False, why)


def _not_built(entries: list[Any] | None) -> str:
    """Why a user's search has no vectors though the embedder is there."""
    if entries is not None:
        return (
            f"vectors not built yet: 0 of {len(entries)} entries embedded "
            "(the index job embeds them)"
        )
    return "vectors not built yet: none of these entries is embedded (the index job embeds them)"


def similar(
    core: StoreCore,
    user_id: str,
    namespaces: Sequence[str],
    query: str,
    kinds: Sequence[str],
    entries: list[tuple[str, str, str | None, str]] | None,
) -> VectorList:
    """The vector list (:class:`VectorList`): up to ``vector_candidates`` entries most
    similar to ``query``, admitted by :func:`memkeeper.store.fusion.admitted`, the share of
    the list's scale and the cosine of each of those most similar (admitted or not), the
    embedding's ms, and whether similarity took part (False: keyword-only). Only entries of
    ``kinds`` are in it (a small user's ``entries``, when given, hold those alone already)."""
    settings = core.config.search
    if not semantic.can_embed(core.config):
        why = semantic.missing(core.config)
        if why.startswith("no model"):  # said once per process: how to get the model
            semantic.warn_no_key(core.config)
            return _none(why=why)
        # Keyword-only: the stored vectors stay unread (and numpy unloaded); the warning is
        # for someone who has vectors this search cannot use.
        stored = False
        if semantic.look_for_unused_vectors(core.storage.hot):
            with core.storage.lock:
                stored = has_vectors(core.storage.hot)
        if stored:
            semantic.warn_no_key(core.config)
        return _none(why=why)
    model, dims = vector_source.source(core.config)[1:3]
    if ranks_in_database(core.storage.hot):  # PostgreSQL: the vector list from pgvector
        return _similar_in_database(core, user_id, namespaces, query, kinds)
    with core.storage.lock:
        ids, matrix = user_vectors(
            core.storage.hot,
            user_id=user_id,
            namespaces=namespaces,
            model=model,
            dims=dims,
            entries=entries,
            kinds=None if entries is not None else kinds,
        )
    if not ids:
        return _none(why=_not_built(entries))
    unread = semantic.unreadable(core.config, query)
    if unread:
        return _none(why=unread)
    started = time.perf_counter()
    vector = semantic.query_vector(core.config, query)
    embed_ms = (time.perf_counter() - started) * 1000
    if vector is None:
        return _none(embed_ms, semantic.failing(model) or "the query could not be embedded")
    import numpy as np

    similarities = matrix @ vector
    mean, spread = float(similarities.mean()), float(similarities.std())
    depth = min(settings.vector_candidates, len(ids))
    # Ties by id (ids are sorted): the same list whatever the limit.
    best = np.argsort(-similarities, kind="stable")[:depth]
    top = [ids[i] for i in best.tolist()]
    return _vector_list(core, top, similarities[best], len(ids), mean, spread, embed_ms)


def _similar_in_database(
    core: StoreCore, user_id: str, namespaces: Sequence[str], query: str, kinds: Sequence[str]
) -> VectorList:
    """:func:`_similar` with the vector list computed by the database (PostgreSQL: the
    same selection, statistics and order as the numpy ranking, in one statement)."""
    settings = core.config.search
    model, dims = vector_source.source(core.config)[1:3]
    storage = core.storage
    with storage.lock:
        if not user_has_vectors(storage.hot, user_id=user_id, model=model, dims=dims):
            return _none(why=_not_built(None))
    unread = semantic.unreadable(core.config, query)
    if unread:
        return _none(why=unread)
    started = time.perf_counter()
    vector = semantic.query_vector(core.config, query)
    embed_ms = (time.perf_counter() - started) * 1000
    if vector is None:
        return _none(embed_ms, semantic.failing(model) or "the query could not be embedded")
    with storage.lock:
        near = nearest_entries(
            storage.hot,
            user_id=user_id,
            namespaces=namespaces,
            kinds=kinds,
            model=model,
            query=vector.tolist(),
            depth=settings.vector_candidates,
        )
    if not near.count:
        return _none(embed_ms, _not_built(None))
    import numpy as np

    top = [memory_id for memory_id, _ in near.top]
    chosen = np.array([similarity for _, similarity in near.top], dtype=np.float64)
    return _vector_list(core, top, chosen, near.count, near.mean, near.spread, embed_ms)


def _vector_list(
    core: StoreCore,
    top: list[str],
    chosen: Any,
    count: int,
    mean: float,
    spread: float,
    embed_ms: float,
) -> VectorList:
    """The vector list from the ``top`` ids (best first) with their similarities ``chosen``
    (a numpy array) among the user's ``count`` vectors of similarities ``mean`` and
    ``spread``: the admitted ones (id, cosine), and every top entry's share of the list's
    scale and cosine (a keyword match among them may count though not admitted:
    :func:`memkeeper.store.fusion.keyword_similar`)."""
    import numpy as np

    settings = core.config.search
    threshold = fusion.outlier_z(settings, count)
    outliers = spread >= fusion.MIN_SPREAD  # else no distribution: the floor alone
    z = (chosen - mean) / spread if outliers else np.zeros_like(chosen)
    local = vector_source.source(core.config).kind == "local"
    floor = settings.local_min_similarity if local else settings.min_similarity
    keep = fusion.admitted(settings, chosen, z, threshold, floor)
    kept = np.flatnonzero(keep).tolist()
    cosines = chosen[keep].tolist()
    found = [(top[i], min(1.0, c)) for i, c in zip(kept, cosines, strict=True)]
    share: dict[str, float] = {}
    if count >= fusion.OUTLIER_MIN_ENTRIES and len(top):  # else no distribution: by rank
        # Every entry of the top, admitted or not (fusion.keyword_similar).
        scale = float(chosen[0]) - mean
        share = {
            memory_id: (c - mean) / scale if scale > 1e-9 else 1.0
            for memory_id, c in zip(top, chosen.tolist(), strict=True)
        }
    cosine = {memory_id: min(1.0, c) for memory_id, c in zip(top, chosen.tolist(), strict=True)}
    best_z = float(z[0]) if outliers and len(top) else 0.0
    sure = fusion.sureness(settings, best_z) if share else 0.0
    zscore = dict(zip(top, z.tolist(), strict=True)) if share and outliers else None
    return VectorList(found, share, cosine, embed_ms, True, "", sure, zscore)
