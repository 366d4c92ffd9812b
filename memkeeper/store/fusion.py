"""Ranking search's candidates: reciprocal-rank fusion, then a bounded prior.

Two ranked lists come in: the keyword list (BM25, :mod:`memkeeper.store.bm25`) and the
vector list (cosine, best first, at or above ``[search] min_similarity``). An entry's
*relevance* is its reciprocal-rank fusion over the lists it is in::

    relevance = weight_keyword · coverage / (rrf_k + keyword rank)
              + weight_similarity / (rrf_k + vector rank)

(a list the entry is not in adds nothing; equal scores share a rank — in the keyword
list, equal scores whose CJK pairs' BM25 is equal too; ``coverage`` is the
share of the query's idf the keyword list's *best* match carries,
:class:`memkeeper.store.bm25.Scored`: the list's confidence, the same for all its entries,
so it never reorders the keyword list — a list whose best match is one name of a long
question counts for less beside the vector list than one matching every word).
Confidence and recent use then adjust the order among relevant entries as a bounded
multiplier::

    prior = (weight_confidence · confidence + weight_recency · recency)
            / (weight_confidence + weight_recency)                        (0-1)
    score = relevance · (1 + prior_weight · prior)

with ``recency = 0.5 ** (days since last use / recency_half_life_days)``. The prior can raise
a score by at most ``prior_weight`` (1 %), less than the gap between two neighbouring ranks
among a list's first forty (1/61 against 1/62 is 1.6 %): it decides between entries equally
relevant (equal ranks, or rank r in one list against rank r in the other) and relevance
differences under 1 %, and never lifts an entry that matches nothing (no list, no
relevance, no score). A hit found once is thus at most
``prior_weight · weight_recency / (weight_confidence + weight_recency)`` (0.25 %) ahead the
next time. Ties go to the more recently used entry, then the id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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


@dataclass(frozen=True)
class Fused:
    """One candidate's ranking: its relevance, prior and score."""

    relevance: float
    prior: float
    score: float


def relevance(
    settings: SearchSection,
    keyword_rank: int | None,
    vector_rank: int | None,
    coverage: float = 1.0,
) -> float:
    """Reciprocal-rank fusion of the entry's ranks (None: not in that list), the keyword
    rank's share scaled by the match's coverage of the query (0-1)."""
    total = 0.0
    if keyword_rank is not None:
        total += settings.weight_keyword * coverage / (settings.rrf_k + keyword_rank)
    if vector_rank is not None:
        total += settings.weight_similarity / (settings.rrf_k + vector_rank)
    return total


def prior(settings: SearchSection, confidence: float, recency: float) -> float:
    """The seed's confidence x 3 + recent-use bonus, scaled to 0-1."""
    weights = settings.weight_confidence + settings.weight_recency
    if weights <= 0:
        return 0.0
    return (settings.weight_confidence * confidence + settings.weight_recency * recency) / weights


def fuse(
    settings: SearchSection,
    keyword_rank: int | None,
    vector_rank: int | None,
    confidence: float,
    recency: float,
    coverage: float = 1.0,
) -> Fused:
    """The candidate's score (0 when it is in neither list)."""
    base = relevance(settings, keyword_rank, vector_rank, coverage)
    weight = prior(settings, confidence, recency)
    return Fused(base, weight, base * (1 + settings.prior_weight * weight))
