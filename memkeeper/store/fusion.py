"""Ranking search's candidates: fusion of the two lists by their scores, then a bounded prior.

Two ranked lists come in: the keyword list (BM25, :mod:`memkeeper.store.bm25`) and the
vector list (cosine, best first; :func:`admitted` says which entries are in it). An entry's
*relevance* is, by default (``[search] fusion = "relative"``), a relative score fusion —
each list's scores put on one scale by the list's own statistics, each list weighted by its
confidence::

    relevance = weight_keyword · coverage · bm25 / best bm25
              + weight_similarity · (cosine - mean cosine) / (best cosine - mean cosine)

The keyword term is the entry's BM25 as a share of the list's best, times the list's
*coverage* — the share of the query's idf its best match carries
(:class:`memkeeper.store.bm25.Scored`; 1 when a match has every word, about 0.1 when it
shares only a name with a long question). The vector term is the entry's similarity above
the mean similarity of the user's entries to the query, as a share of the best's: the best
scores 1, an entry no closer than the average none. A list the entry is not in adds nothing.

Scores need the user's distribution of similarities: with fewer than
:data:`OUTLIER_MIN_ENTRIES` vectors, and whenever ``fusion = "rrf"``, the lists are fused by
rank instead — reciprocal-rank fusion, ``weight · coverage / (rrf_k + rank)`` per list. Why
scores where they can be had: reciprocal-rank fusion weighs both lists' orders alike. When one
list is sure and the other is not — a paraphrase, whose keyword list is every memory that
shares the person's name, ordered by length — the weak list's order overrides the strong
one's: two neighbouring vector ranks differ by 1/61 - 1/62 = 0.0003, while the keyword
list's first and thirtieth ranks differ by 0.005 even at coverage 0.3. Scores keep the gap
the vector list sees between a clear best and the rest (on the recall evaluation, hybrid
recall@1 0.821 by ranks against 0.85 by scores; README, "Finding memories").

Confidence and recent use then adjust the order among relevant entries as a bounded
multiplier::

    prior = (weight_confidence · confidence + weight_recency · recency)
            / (weight_confidence + weight_recency)                        (0-1)
    score = relevance · (1 + prior_weight · prior)

with ``recency = 0.5 ** (days since last use / recency_half_life_days)``. The prior can raise
a score by at most ``prior_weight`` (1 %): it decides between entries equally relevant and
relevance differences under 1 %, and never lifts an entry that matches nothing (no list, no
relevance, no score). A hit found once is thus at most
``prior_weight · weight_recency / (weight_confidence + weight_recency)`` (0.25 %) ahead the
next time. Ties go to the more recently used entry, then the id.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from memkeeper.config_search import SearchSection


def ranks(scored: Sequence[tuple[str, float] | tuple[str, float, float]]) -> dict[str, int]:
    """1-based ranks of a best-first list of ``(id, score)`` or ``(id, score, tie-break)``;
    entries equal in every part share the better rank."""
    out: dict[str, int] = {}
    previous: tuple[float, ...] | None = None
    rank = 0
    for position, (memory_id, *keys) in enumerate(scored, start=1):
        if previous is None or any(
            abs(k - p) > 1e-12 * max(1.0, abs(p)) for k, p in zip(keys, previous, strict=True)
        ):
            rank = position
            previous = tuple(keys)
        out.setdefault(memory_id, rank)
    return out


OUTLIER_MIN_ENTRIES = 20
"""Fewer vectors than this: no distribution to calibrate against — no outliers (the floor
alone admits) and fusion by rank (scores need the mean and spread of the user's
similarities; on the hand-written set of a dozen entries per user, whose fake trigram
vectors give unrelated texts cosines of 0.5-0.75, scaling by them lost 3 of 42 queries that
ranks find)."""


def outlier_z(settings: SearchSection, entries: int) -> float:
    """The z-score above which an entry is in the vector list whatever its cosine: the
    value that *any* of ``entries`` unrelated entries reaches with a chance of only
    ``[search] outlier_p`` (Bonferroni over a normal distribution: 3.96 for 260 entries at
    1 %). Infinite (the rule off) for ``outlier_p`` 0 or under :data:`OUTLIER_MIN_ENTRIES`."""
    if settings.outlier_p <= 0 or entries < OUTLIER_MIN_ENTRIES:
        return math.inf
    return NormalDist().inv_cdf(1 - settings.outlier_p / entries)


def admitted(settings: SearchSection, similarity: float, z: float, threshold: float) -> bool:
    """Whether an entry is in the vector list: a cosine at or above ``min_similarity``, or a
    similarity so far above the user's others (``z`` of at least :func:`outlier_z`'s
    ``threshold``) that it is clearly the query's — a floor relative to the user's own
    distribution, so a model whose cosines run low (the evaluation's stand-in: a true
    paraphrase at 0.27, 4.5 standard deviations above the rest) still finds it."""
    return similarity >= settings.min_similarity or z >= threshold


@dataclass(frozen=True)
class Signal:
    """An entry's place in one list: its 1-based rank and its share of the list's scale
    (keyword: BM25 / the best BM25; vector: (cosine - mean) / (best - mean))."""

    rank: int
    share: float


@dataclass(frozen=True)
class Fused:
    """One candidate's ranking: its relevance, prior and score."""

    relevance: float
    prior: float
    score: float


def relevance(
    settings: SearchSection,
    keyword: Signal | None,
    vector: Signal | None,
    coverage: float = 1.0,
    *,
    by_rank: bool = False,
) -> float:
    """The entry's relevance from its place in each list (None: not in that list), the
    keyword list weighted by its coverage of the query (0-1); by rank with ``fusion = "rrf"``
    or ``by_rank`` (a vector list too small to calibrate, :data:`OUTLIER_MIN_ENTRIES`)."""
    total = 0.0
    if settings.fusion == "rrf" or by_rank:
        if keyword is not None:
            total += settings.weight_keyword * coverage / (settings.rrf_k + keyword.rank)
        if vector is not None:
            total += settings.weight_similarity / (settings.rrf_k + vector.rank)
        return total
    if keyword is not None:
        total += settings.weight_keyword * coverage * max(0.0, keyword.share)
    if vector is not None:
        total += settings.weight_similarity * max(0.0, vector.share)
    return total


def prior(settings: SearchSection, confidence: float, recency: float) -> float:
    """The seed's confidence x 3 + recent-use bonus, scaled to 0-1."""
    weights = settings.weight_confidence + settings.weight_recency
    if weights <= 0:
        return 0.0
    return (settings.weight_confidence * confidence + settings.weight_recency * recency) / weights


def fuse(
    settings: SearchSection,
    keyword: Signal | None,
    vector: Signal | None,
    confidence: float,
    recency: float,
    coverage: float = 1.0,
    *,
    by_rank: bool = False,
) -> Fused:
    """The candidate's score (0 when it is in neither list)."""
    base = relevance(settings, keyword, vector, coverage, by_rank=by_rank)
    weight = prior(settings, confidence, recency)
    return Fused(base, weight, base * (1 + settings.prior_weight * weight))
