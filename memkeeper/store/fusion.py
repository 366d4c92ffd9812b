"""Ranking search's candidates: fusion of the two lists by their scores, then a bounded prior.

Two ranked lists come in: the keyword list (BM25, :mod:`memkeeper.store.bm25`) and the
vector list (cosine, best first; :func:`admitted` says which entries are in it). By default
(``[search] fusion = "anchored"``, :func:`anchored`) the keyword ranking is kept and the
vector list only adds to it, as far as it is sure. With ``fusion = "relative"`` an entry's
*relevance* is a relative score fusion — each list's scores put on one scale by the list's
own statistics, each list weighted by its confidence::

    relevance = weight_keyword · coverage · bm25 / best bm25
              + weight_similarity · (cosine - mean cosine) / (best cosine - mean cosine)

The keyword term is the entry's BM25 as a share of the list's best, times the list's
*coverage* — the share of the query's idf its best match carries
(:class:`memkeeper.store.bm25.Scored`; 1 when a match has every word, about 0.1 when it
shares only a name with a long question). The vector term is the entry's similarity above
the mean similarity of the user's entries to the query, as a share of the best's: the best
scores 1, an entry no closer than the average none. A list the entry is not in adds nothing;
a keyword match not admitted to the vector list adds its similarity all the same when it is
among the ``vector_candidates`` most similar entries and closer than the mean
(:func:`keyword_similar`): the floor keeps entries that no word found out, it does not
blind the ranking to what is known of an entry that a word did find.

Scores need the user's distribution of similarities: with fewer than
:data:`OUTLIER_MIN_ENTRIES` vectors, and whenever ``fusion = "rrf"``, the lists are fused by
rank instead — reciprocal-rank fusion, ``weight · coverage / (rrf_k + rank)`` per list. Why
scores where they can be had: reciprocal-rank fusion weighs both lists' orders alike. When one
list is sure and the other is not — a paraphrase, whose keyword list is every memory that
shares the person's name, ordered by length — the weak list's order overrides the strong
one's: two neighbouring vector ranks differ by 1/61 - 1/62 = 0.0003, while the keyword
list's first and thirtieth ranks differ by 0.005 even at coverage 0.3. Scores keep the gap
the vector list sees between a clear best and the rest (on the recall evaluation, both with
the outlier rule, hybrid recall@1 0.846 by ranks against 0.858 by scores, and 0.775 against
0.796 on another seed; README, "Finding memories").

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
from typing import TYPE_CHECKING, Any

from memkeeper.store.bm25_ties import same

if TYPE_CHECKING:
    from memkeeper.config.search import SearchSection


def ranks(scored: Sequence[tuple[str, float] | tuple[str, float, float]]) -> dict[str, int]:
    """1-based ranks of a best-first list of ``(id, score)`` or ``(id, score, tie-break)``;
    entries equal in every part share the better rank."""
    out: dict[str, int] = {}
    previous: Sequence[float] = ()
    rank = 0
    for position, (memory_id, *keys) in enumerate(scored, start=1):
        if position == 1 or not all(map(same, keys, previous)):
            rank = position
            previous = keys
        out.setdefault(memory_id, rank)
    return out


OUTLIER_MIN_ENTRIES = 20
"""Fewer vectors than this: no distribution to calibrate against — no outliers (the floor
alone admits) and fusion by rank (scores need the mean and spread of the user's
similarities; on the hand-written set of a dozen entries per user, whose fake trigram
vectors give unrelated texts cosines of 0.5-0.75, scaling by them lost 3 of 42 queries that
ranks find)."""


MIN_SPREAD = 1e-3
"""Similarities spread less than this (standard deviation) are one value, not a
distribution: no entry is an outlier of them (a user's entries all alike would otherwise
make float noise of 1e-5 look like five standard deviations)."""


def outlier_z(settings: SearchSection, entries: int) -> float:
    """The z-score above which an entry is in the vector list whatever its cosine: the
    value that *any* of ``entries`` unrelated entries reaches with a chance of only
    ``[search] outlier_p`` (Bonferroni over a normal distribution: 3.96 for 260 entries at
    1 %). Infinite (the rule off) for ``outlier_p`` 0 or under :data:`OUTLIER_MIN_ENTRIES`."""
    if entries < OUTLIER_MIN_ENTRIES:
        return math.inf
    return _bonferroni(settings, entries)


def _bonferroni(settings: SearchSection, tests: int) -> float:
    """The z-score that any of ``tests`` draws of a normal distribution reaches with a
    chance of ``[search] outlier_p`` at most (infinite for ``outlier_p`` 0)."""
    if settings.outlier_p <= 0 or tests < 1:
        return math.inf
    from statistics import NormalDist  # ~5 ms of import that a keyword-only search skips

    return NormalDist().inv_cdf(1 - settings.outlier_p / tests)


def keyword_similar(keyword: Sequence[str], share: dict[str, float]) -> list[str]:
    """The keyword matches (ids, best first) whose similarity counts though the vector list
    did not admit them: every one among the most similar entries (``share``, the
    ``vector_candidates`` of :class:`memkeeper.store.vector_list.VectorList`) closer to the
    query than the user's average entry (a share above 0).

    The floor and the outlier bar (:func:`admitted`) decide which entries *become*
    candidates by meaning alone: an entry no word of the query found must stand out to be
    returned at all. A keyword match is a candidate already, and what its vector says of it
    is evidence of its relevance like its words: leaving it out scored it as if it were no
    closer than average. On the recall evaluation "what is Elif's profession?" shares only
    the name with "Elif works as a radiologist at the hospital" (cosine 0.29, 2.2 standard
    deviations up: under the floor, 0.3, and the bar, 3.96); counted, its similarity puts it
    among the first ten, above the other entries that share only the name, as the dense
    baseline has it. (Until this rule, a keyword match counted only when its similarity was
    an outlier among the keyword list's own matches, which lost these: hybrid recall@10
    0.967-0.988 over seeds 1-10; this rule with the possessive bound to its word,
    :mod:`memkeeper.store.bm25`, 0.975-0.996, and this rule alone less than before: README,
    "Finding memories".)"""
    return [memory_id for memory_id in keyword if share.get(memory_id, 0.0) > 0]


def admitted(
    settings: SearchSection, similarity: Any, z: Any, threshold: float, floor: float | None = None
) -> Any:
    """Whether an entry is in the vector list (elementwise over numpy arrays of cosines and
    z-scores): a cosine at or above ``floor`` (``min_similarity``, or
    ``local_min_similarity`` for the local model), or a
    similarity so far above the user's others (``z`` of at least :func:`outlier_z`'s
    ``threshold``) that it is clearly the query's — a floor relative to the user's own
    distribution, so a model whose cosines run low (the evaluation's stand-in: a true
    paraphrase at 0.27, 4.5 standard deviations above the rest) still finds it."""
    floor = settings.min_similarity if floor is None else floor
    return (similarity >= floor) | (z >= threshold)


def keyword_shares(
    settings: SearchSection, keyword: Sequence[tuple[str, float, float, float]]
) -> dict[str, float]:
    """Each keyword match's share of the list's scale: its BM25 / the best BM25, from a
    best-first list of ``(id, bm25, adjacency, specificity)``. Equal scores whose CJK pairs
    (:attr:`memkeeper.store.bm25.Scored.adjacency`) or, pairs equal, specificities
    (:mod:`memkeeper.store.bm25_ties`) differ are a step apart, the later one's share
    ``1 - 2 · prior_weight`` of the one before, so they order them before the prior can
    (as their ranks do in rank fusion)."""
    if not keyword:
        return {}
    best = keyword[0][1]
    if best <= 0:
        return dict.fromkeys((k[0] for k in keyword), 0.0)
    step = 1 - max(2 * settings.prior_weight, 1e-6)
    # bm25_ties.same, inlined in both loops (they run over every match of every search)
    scores = [k[1] for k in keyword]
    below = [0.0] * len(keyword)  # the next lower score after each entry's
    for i in range(len(keyword) - 2, -1, -1):
        here, after = scores[i], scores[i + 1]
        tie = here == after or abs(here - after) <= 1e-12 * max(1.0, abs(after))
        below[i] = below[i + 1] if tie else after
    out: dict[str, float] = {}
    last = last_pairs = last_specific = math.nan
    factor = 1.0
    for i, (memory_id, score, pairs, specific) in enumerate(keyword):
        if abs(score - last) <= 1e-12 * max(1.0, abs(last)):  # False after nan
            # Pairs or specificities apart (not merely rounded): a step, never under the
            # next score. (bm25_ties.same of each, inlined.)
            if not (
                pairs == last_pairs or abs(pairs - last_pairs) <= 1e-12 * max(1.0, abs(last_pairs))
            ) or not (
                specific == last_specific
                or abs(specific - last_specific) <= 1e-12 * max(1.0, abs(last_specific))
            ):
                floor = below[i] / score * (1 + settings.prior_weight)
                factor = max(factor * step, min(factor, floor))
        else:
            factor = 1.0
        last, last_pairs, last_specific = score, pairs, specific
        if memory_id not in out:
            out[memory_id] = factor * score / best
    return out


def relevances(
    settings: SearchSection,
    keyword: Sequence[tuple[str, float, float, float]],
    vector: Sequence[tuple[str, float]],
    vector_share: dict[str, float],
    coverage: float,
    *,
    by_rank: bool = False,
    also: Sequence[str] = (),
) -> dict[str, float]:
    """The relevance of every entry in either list: the keyword list ``(id, bm25,
    adjacency, specificity)`` and the vector list ``(id, cosine)``, best first, with the
    share of the vector list's scale of each of the most similar entries (``vector_share``);
    the keyword list weighted by its ``coverage`` (0-1). The similarity of the keyword matches
    in ``also`` (:func:`keyword_similar`, not admitted to the vector list) counts too. By
    rank with ``fusion = "rrf"`` or ``by_rank`` (a vector list too small to calibrate,
    :data:`OUTLIER_MIN_ENTRIES`): the vector list's ranks alone."""
    total: dict[str, float] = {}
    w_keyword, w_vector = settings.weight_keyword * coverage, settings.weight_similarity
    if settings.fusion == "rrf" or by_rank:
        k = settings.rrf_k
        for memory_id, rank in ranks(keyword).items():
            total[memory_id] = w_keyword / (k + rank)
        for memory_id, rank in ranks(vector).items():
            total[memory_id] = total.get(memory_id, 0.0) + w_vector / (k + rank)
        return total
    for memory_id, share in keyword_shares(settings, keyword).items():
        total[memory_id] = w_keyword * share
    for memory_id in dict.fromkeys([*(i for i, _ in vector), *also]):
        share = max(0.0, vector_share.get(memory_id, 0.0))
        total[memory_id] = total.get(memory_id, 0.0) + w_vector * share
    return total


def sureness(settings: SearchSection, best_z: float) -> float:
    """How sure the vector list is, 0-1: its best similarity's z-score among the user's
    entries, from ``[search] sure_z_low`` (not at all) to ``sure_z_high`` (fully). A model
    that sees nothing in particular in a question (every entry about as close) scores 0,
    and its list then changes nothing of the keyword ranking."""
    low, high = settings.sure_z_low, settings.sure_z_high
    if not math.isfinite(best_z):
        return 0.0
    if high <= low:
        return 1.0 if best_z >= low else 0.0
    return min(1.0, max(0.0, (best_z - low) / (high - low)))


PASS_FIRST_SURE = 0.5
"""How sure (:func:`sureness`) the vector list must be to pass a strong keyword list's best
match (half sure: its best similarity 5 standard deviations above the mean with the default
``sure_z_low``/``sure_z_high``). Less sure, the best keyword match stays first. On LoCoMo,
letting the fused scores decide the head whatever the sureness was a coin flip — with
all-MiniLM-L6-v2, 21 questions' first hit bettered and 17 worsened; with a static model, 13
and 14, and the adversarial questions' recall@1 fell 0.016 — while the lists sure of their
best pass it rightly more often than not (on LoCoMo, 3 of 4 such swaps; on the generated
recall evaluation, whose paraphrases share only a name with their answer, recall@1 0.633 with
the first always kept and 0.650 with this bar)."""


def anchored(
    settings: SearchSection,
    keyword: Sequence[tuple[str, float, float, float]],
    vector: Sequence[tuple[str, float]],
    vector_share: dict[str, float],
    coverage: float,
    sure: float,
    zscore: dict[str, float] | None = None,
) -> dict[str, float]:
    """``fusion = "anchored"``: the keyword ranking, which the vector list only adds to.

    A keyword match keeps its keyword relevance (coverage x BM25 share, as keyword-only),
    raised by ``weight_vector_reorder x sure x`` its vector share (0-1): the vector list
    reorders keyword matches within that margin. An entry of the vector list (``vector``,
    admitted by :func:`admitted`) adds ``weight_vector_added x sure x`` the best keyword
    relevance (at least ``weak_keyword_relevance``: a list whose best match shares only a
    common word with the query is weak) x its share: a clear vector hit joins the keyword
    matches or passes weak ones, never a strong one. ``sure`` is :func:`sureness`: where
    the model is unsure (a weak model, a question about nothing it knows) the ranking is the
    keyword-only one. With no
    keyword match at all, the vector list alone ranks (by share).

    A weak keyword list (its best relevance under ``weak_keyword_relevance``: "where does
    the user live?" matching only "the") has little to protect: the vector list adds as if
    it were sure in proportion (``1 - best / weak_keyword_relevance``), and entries whose
    z-score (``zscore``, of the most similar entries) reaches ``sure_z_low`` join it though
    not admitted.

    A strong keyword list's best match stays first (:func:`_keep_first`) while the vector
    list is less than :data:`PASS_FIRST_SURE` sure: the vectors add below it and reorder the
    rest."""
    total = {i: coverage * share for i, share in keyword_shares(settings, keyword).items()}
    before = dict(total)
    lift = settings.weight_vector_reorder * sure
    if lift > 0:
        for memory_id, relevance in total.items():
            total[memory_id] = relevance * (1 + lift * max(0.0, vector_share.get(memory_id, 0.0)))
    best = max(total.values(), default=0.0)
    weak = settings.weak_keyword_relevance
    strength = min(1.0, best / weak) if weak > 0 else 1.0
    scale = max(best, weak)
    added = settings.weight_vector_added * max(sure, 1 - strength) * scale if best > 0 else 1.0
    candidates = [memory_id for memory_id, _ in vector]
    if 0 < strength < 1 and zscore:  # a weak list; none at all: the admitted alone
        candidates += [i for i, z in zscore.items() if z >= settings.sure_z_low]
    if added > 0:
        for memory_id in dict.fromkeys(candidates):
            share = max(0.0, vector_share.get(memory_id, 0.0))
            total[memory_id] = total.get(memory_id, 0.0) + added * share
    if strength >= 1 and sure < PASS_FIRST_SURE:
        _keep_first(settings, before, total)
    return total


def _keep_first(settings: SearchSection, before: dict[str, float], total: dict[str, float]) -> None:
    """Keep the keyword list's best match first in ``total`` (relevances with the vectors'
    additions; ``before``, the keyword relevances alone, best first): when the vectors have
    raised another entry to within the prior's reach of it (``prior_weight``), it is raised
    to stay that far ahead. Where they raised none so far, the order is keyword-only's,
    the prior deciding near-ties as it does there."""
    first = next(iter(before), None)
    if first is None:
        return
    others = max((v for i, v in total.items() if i != first), default=0.0)
    unaided = max((v for i, v in before.items() if i != first), default=0.0)
    reach = 1 + settings.prior_weight
    if others > unaided and others * reach > total[first]:
        total[first] = others * reach


def prior(settings: SearchSection, confidence: float, recency: float) -> float:
    """The seed's confidence x 3 + recent-use bonus, scaled to 0-1."""
    weights = settings.weight_confidence + settings.weight_recency
    if weights <= 0:
        return 0.0
    return (settings.weight_confidence * confidence + settings.weight_recency * recency) / weights
