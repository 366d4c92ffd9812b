"""Search: a user's memories found by meaning and by keywords, relevance first.

Candidates come from two ranked lists over the user's entries in the asked namespace and
the user's profile (the default namespace ``""``), never anyone else's:

* the keyword list — every entry containing a query term, ranked by BM25 over that user's
  own entries (:mod:`memkeeper.store.bm25`; candidates from
  :mod:`memkeeper.storage.keywords`); works offline and without a key;
* the vector list — the ``[search] vector_candidates`` entries whose current vector is
  most similar to the query's embedding (:mod:`memkeeper.store.vector_list`: numpy over the
  user's vectors on SQLite, one pgvector statement on PostgreSQL), at or above ``[search]
  min_similarity`` or an outlier of the user's similarities
  (:func:`memkeeper.store.fusion.admitted`). Without a key, without vectors, or when the
  query cannot be embedded (:mod:`memkeeper.store.semantic`), it is empty.

Each candidate (active or pending review; cold entries with ``include_cold``; superseded
values never) is scored by :mod:`memkeeper.store.fusion`: a fusion of its two lists' scores,
each on its list's own scale (or of their ranks), times a bounded prior of confidence and
recent use. Neither list depends on
``limit``, so the first k hits of a search are the hits of the same search with limit k.
The hits returned are marked used exactly as ``recall`` marks its value
(:func:`memkeeper.store.recall.mark_found` and :func:`~memkeeper.store.recall.restore_found`):
an active entry records a use, a pending-review one is renewed, a cold one is restored.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import replace
from operator import itemgetter
from typing import Any

from memkeeper import logs, validation
from memkeeper.clock import MICROS_PER_DAY, micros, stored_micros
from memkeeper.errors import StorageUnwritable
from memkeeper.records import KEYED_KINDS, KINDS, Memory, SearchHit, SearchResults
from memkeeper.storage import memory_reads
from memkeeper.storage.changelog import image_of
from memkeeper.storage.keywords import small_user_rows
from memkeeper.storage.use_buffer_probe import buffering
from memkeeper.store import fusion, semantic, vector_list
from memkeeper.store.bm25 import Scored, keyword_scores, score_all
from memkeeper.store.core import StoreCore
from memkeeper.store.recall import mark_hits, mark_live, restore_found

log = logs.get_logger("memkeeper.search")

LIVE_STATES = ("active", "pending_review")
"""The hot states search returns (superseded values never)."""


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
    min_confidence: float = 0.0,
) -> SearchResults:
    """The ``limit`` best entries for ``query`` (ids in ``exclude`` and entries below
    ``min_confidence`` left out before ranking, so the limit is of the others), marked
    used, with the query embedding's cost apart from the search's own."""
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
    by_meaning = semantic.can_embed(core.config)  # the vector list reads each entry's kind
    with core.storage.lock:  # a small user's entries, read once for every part below
        every = small_user_rows(
            core.storage.hot,
            table="memories",
            user_id=user_id,
            namespaces=namespaces,
            kinds=wanted,
            states=LIVE_STATES,
            columns=(*SMALL_USER, "kind") if by_meaning else SMALL_USER,
        )
    entries = None
    if every is not None and by_meaning:  # (id, kind, key, value), for the vector list
        entries = list(map(itemgetter(0, VALUE + 1, KEY, VALUE), every))
    vectors = vector_list.similar(core, user_id, namespaces, query, wanted, entries)
    similar, embed_ms = vectors.found, vectors.embed_ms
    # Anchored fusion may take entries a z-score above sure_z_low when keywords are weak
    # (fusion.anchored decides; their facts are read with the others').
    low = core.config.search.sure_z_low
    extra = [(i, 0.0) for i, z in (vectors.zscore or {}).items() if z >= low]
    keyword, facts = _keyword_and_facts(
        core, user_id, namespaces, query, wanted, include_cold, similar + extra, every
    )
    if min_confidence > 0:
        facts = {i: row for i, row in facts.items() if row[CONFIDENCE] >= min_confidence}
    ranked = _rank(core, keyword, vectors, facts, exclude, limit)
    chosen = SearchResults(_found(core, user_id, ranked, facts))
    chosen.embed_ms = embed_ms
    chosen.search_ms = (time.perf_counter() - started) * 1000 - embed_ms
    chosen.semantic = vectors.semantic
    # Why it was keyword-only; nothing to say of a user with no entry at all (an empty
    # memory answers alike wherever it is, MCP's missing database included).
    anything = every is None or bool(every)
    chosen.keyword_only = "" if vectors.semantic or not anything else vectors.why or "no vectors"
    log.debug(
        "search",
        candidates=len(facts),
        hits=len(chosen),
        keyword_only=chosen.keyword_only,
        **chosen.timing(),
    )
    return chosen


Ranked = tuple[str, float, float, float, float, float]
"""(id, score, similarity, keyword 0-1, confidence, recency) of one candidate."""


def _rank(
    core: StoreCore,
    keyword: list[Scored],
    vectors: vector_list.VectorList,
    facts: dict[str, Fact],
    exclude: Collection[str],
    limit: int,
) -> list[Ranked]:
    """The ``limit`` best live candidates scored (:mod:`memkeeper.store.fusion`), best first.

    The prior raises a score by at most ``prior_weight``, so a candidate whose relevance
    times ``1 + prior_weight`` is below the ``limit``-th best relevance cannot be among the
    first ``limit``: only the others are scored in full. The answer is the first ``limit``
    of the whole ranking, whatever the limit.
    """
    settings = core.config.search
    similar, vector_share = vectors.found, vectors.share
    # No calibrated vector scores (fewer vectors than fusion.OUTLIER_MIN_ENTRIES): by rank.
    by_rank = bool(similar) and not vector_share
    # Keyword matches among the most similar entries, though not admitted: it counts too.
    anchored = settings.fusion == "anchored" and not by_rank
    also = (
        []
        if by_rank or settings.fusion != "relative"
        else fusion.keyword_similar([k.id for k in keyword], vector_share)
    )
    keyword_of = {k.id: k for k in keyword}
    similarity_of = dict(similar) | {i: vectors.cosine[i] for i in also}
    list_coverage = max((k.coverage for k in keyword), default=0.0)
    best = keyword[0].score if keyword else 0.0
    # Specificity orders equal keyword scores in a keyword-only search; with similarity
    # the vector list orders them (its steps, up to 2 % each, outweighed it: README).
    # Anchored, the keyword order is kept whole and the vectors only add to it.
    specific = not vectors.semantic or anchored
    scored = [(k.id, k.score, k.adjacency, k.specificity * specific) for k in keyword]
    if anchored:
        fused = fusion.anchored(
            settings, scored, similar, vector_share, list_coverage, vectors.sure, vectors.zscore
        )
        if vectors.zscore:  # a weak keyword list's extra vector candidates
            similarity_of |= {
                i: vectors.cosine[i]
                for i in fused
                if i not in keyword_of and vectors.share.get(i, 0.0) > 0
            }
        # A keyword match closer than the mean shows its cosine (as fusion.keyword_similar).
        similarity_of |= {
            i: vectors.cosine[i] for i in fusion.keyword_similar(keyword_of, vector_share)
        }
    else:
        fused = fusion.relevances(
            settings, scored, similar, vector_share, list_coverage, by_rank=by_rank, also=also
        )
    # In no list, or a weight of 0: nothing about the entry matches.
    relevant = [
        (base, memory_id)
        for memory_id, base in fused.items()
        if base > 0 and memory_id in facts and memory_id not in exclude
    ]
    relevant.sort(reverse=True)
    if len(relevant) > limit:
        floor = relevant[limit - 1][0] / (1 + settings.prior_weight)
        relevant = [r for r in relevant if r[0] >= floor * (1 - 1e-12)]
    now = micros(core.now())
    half_life = settings.recency_half_life_days
    ranked: list[tuple[Ranked, int]] = []
    for base, memory_id in relevant:
        row = facts[memory_id]
        # Its last use (Memory.last_used_at: written, re-confirmed or recalled, whichever
        # came last; every write and use keeps the column so, the jobs select by it).
        last_used = stored_micros(row[LAST_USED])
        days = max(0.0, (now - last_used) / MICROS_PER_DAY)  # as clock.days_between
        recency = 0.5 ** (days / half_life)
        confidence = float(row[CONFIDENCE])
        score = base * (1 + settings.prior_weight * fusion.prior(settings, confidence, recency))
        found = keyword_of.get(memory_id)
        share = found.score / best if found is not None and best > 0 else 0.0
        item = (memory_id, score, similarity_of.get(memory_id, 0.0), share, confidence, recency)
        ranked.append((item, last_used))
    ranked.sort(key=lambda r: (-r[0][1], -r[1], r[0][0]))
    return [r for r, _ in ranked[:limit]]


def _load(core: StoreCore, ranked: list[Ranked], facts: dict[str, Fact]) -> list[SearchHit]:
    """The chosen candidates as hits, their full rows read (one left meanwhile is dropped)."""
    storage = core.storage
    rows: dict[str, Any] = {}
    with storage.lock:
        for table in ("memories", "cold_memories"):
            ids = [r[0] for r in ranked if facts[r[0]][TABLE] == table]
            db = storage.hot if table == "memories" else storage.cold(create=False)
            if ids and db is not None:
                rows.update(memory_reads.rows_by_ids(db, table, ids))
    hits = []
    for memory_id, score, similarity, keyword, confidence, recency in ranked:
        if memory_id in rows:
            memory = Memory.from_image(image_of(rows[memory_id]))
            hits.append(SearchHit(memory, score, similarity, keyword, confidence, recency))
    return hits


def _keyword_and_facts(
    core: StoreCore,
    user_id: str,
    namespaces: Sequence[str],
    query: str,
    kinds: Sequence[str],
    include_cold: bool,
    similar: list[tuple[str, float]],
    every: list[tuple[Any, ...]] | None,
) -> tuple[list[Scored], dict[str, Fact]]:
    """The keyword list (hot and, when asked, cold; BM25 best first), and every live
    candidate's :data:`Fact` by id (hot first)."""
    args: dict[str, Any] = dict(user_id=user_id, namespaces=namespaces, query=query, kinds=kinds)
    storage = core.storage
    with storage.lock:
        if every is not None:  # a small user: one read for statistics, candidates and facts
            keyword = score_all(list(map(itemgetter(0, KEY, VALUE), every)), query)
            wanted = {*(k.id for k in keyword), *(i for i, _ in similar)}
            facts = {r[0]: r[:TABLE] + _HOT for r in every if r[0] in wanted}
        else:
            keyword = keyword_scores(storage.hot, table="memories", states=LIVE_STATES, **args)
            ids = [*(k.id for k in keyword), *(i for i, _ in similar)]
            facts = _facts(_rows(storage.hot, "memories", ids, user_id, namespaces, kinds))
        cold = storage.cold(create=False) if include_cold else None
        if cold is not None:
            cold_scores = keyword_scores(cold, table="cold_memories", states=("cold",), **args)
            cold_ids = [k.id for k in cold_scores if k.id not in facts]
            cold_rows = _rows(cold, "cold_memories", cold_ids, user_id, namespaces, kinds)
            seen = set(facts)
            facts |= _facts(_not_shadowed(storage.hot, cold_rows, user_id))
            keyword = sorted(
                [*keyword, *(k for k in cold_scores if k.id not in seen)],
                key=lambda item: (-item.score, -item.adjacency, -item.specificity, item.id),
            )
    return keyword, facts


FACTS = ("id", "key", "confidence", "last_used_at")
"""The columns ranking reads of every candidate (the chosen few are read whole)."""

KEY, CONFIDENCE, LAST_USED = (FACTS.index(c) for c in ("key", "confidence", "last_used_at"))
TABLE = len(FACTS)

SMALL_USER = (*FACTS, "value")
"""A small user's columns, read for every entry of the user at every search (with ``kind``
after them when the search is by meaning too): the statistics, the candidates and their
facts. Nothing more: 1,000 values fewer for 500 entries (the owner's namespace and the kind
they were selected by) took about 0.1 ms off each search on PostgreSQL."""
VALUE = len(FACTS)
_HOT = ("memories",)

Fact = tuple[Any, ...]
"""A candidate's :data:`FACTS` and, at :data:`TABLE`, the table it is in: a tuple, not a
dict (a small user's 100-200 candidates a search, built from the rows as read)."""


def _facts(rows: list[Any]) -> dict[str, Fact]:
    """Rows (dicts of :data:`FACTS` and ``table``) as :data:`Fact` tuples by id."""
    return {row["id"]: (*(row[column] for column in FACTS), row["table"]) for row in rows}


def _rows(
    db: Any,
    table: str,
    ids: Sequence[str],
    user_id: str,
    namespaces: Sequence[str],
    kinds: Sequence[str],
) -> list[Any]:
    """The :data:`FACTS` (with ``kind`` and ``namespace``, which a cold row's shadowing
    reads) of these ids that belong to the user, namespaces and kinds, and are live, each
    with the ``table`` it is in."""
    found = memory_reads.owned_live_columns(
        db, table, (*FACTS, "kind", "namespace"), ids, user_id, namespaces, kinds, LIVE_STATES
    )
    return [row | {"table": table} for row in found]


def _not_shadowed(hot: Any, cold_rows: list[Any], user_id: str) -> list[Any]:
    """Cold rows whose key has no live value in the hot file (a note never has)."""
    keyed = [row for row in cold_rows if row["kind"] in KEYED_KINDS and row["key"]]
    if not keyed:
        return cold_rows
    live = memory_reads.live_keys(hot, user_id, [row["key"] for row in keyed], LIVE_STATES)
    return [row for row in cold_rows if (row["namespace"], row["key"]) not in live]


def _found(
    core: StoreCore, user_id: str, ranked: list[Ranked], facts: dict[str, Fact]
) -> list[SearchHit]:
    """The chosen candidates as hits, marked used. All hot and the store not buffering its
    uses (the usual case): the rows the marking reads under its write lock are the hits' rows
    (one read fewer: a round trip on PostgreSQL); otherwise read, then marked."""
    if not ranked:
        return []
    if buffering(core.storage) is not None or any(facts[r[0]][TABLE] != "memories" for r in ranked):
        return _mark(core, _load(core, ranked, facts))
    try:
        marked = mark_live(core, [r[0] for r in ranked], {user_id})
    except StorageUnwritable as exc:
        semantic.warn_once("unwritable", "search hits' use could not be recorded", cause=str(exc))
        return _load(core, ranked, facts)
    return [
        SearchHit(marked[memory_id], score, similarity, keyword, confidence, recency)
        for memory_id, score, similarity, keyword, confidence, recency in ranked
        if memory_id in marked
    ]


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
    return dict(mark_hits(core, [h.memory for h in hits]))


def _restore(core: StoreCore, memory_id: str) -> Memory | None:
    """Bring a cold hit back to active, as recall does; None if it left cold storage."""
    cold = core.storage.cold(create=False)
    with core.storage.lock:
        rows = {} if cold is None else memory_reads.rows_by_ids(cold, "cold_memories", [memory_id])
    row = rows.get(memory_id)
    return restore_found(core, image_of(row), by="search") if row else None
