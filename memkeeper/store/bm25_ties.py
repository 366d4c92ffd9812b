"""Equal BM25 scores ordered by how specific each entry is among the query's matches.

A paraphrase ("which food makes Ann sick?") shares only the person's name with its evidence
("Ann is allergic to peanuts"): every entry holding the name and of the same length has the
same BM25 score, five to thirteen of them on the recall evaluation, whose order was the
prior's (confidence, recent use) and then the id's — a coin flip. Among exactly equal scores
(and equal CJK pairs, :attr:`memkeeper.store.bm25.Scored.adjacency`) an entry's
*specificity* decides first: the mean idf of its own distinct terms within the query's
matches (the keyword list)::

    specificity(d) = Σ_{t ∈ d} ln(1 + (M - m_t + 0.5) / (m_t + 0.5)) / |d|

with ``M`` the matches and ``m_t`` how many of them hold ``t``. An entry whose other words
the name's other entries share ("remind Ann to bring the museum on Friday", one of many
alike) is less specific than one whose words are its own ("Ann is allergic to peanuts").
Language-neutral (terms are words or CJK characters alike), of the matches only (the same
for a small user's rows and a large user's candidates, and another user's rows never count),
and computed only when two matches tie. It never changes a score: it orders entries whose
scores are equal, as the pairs do.

Search uses it when it is keyword-only (:func:`memkeeper.store.fusion.keyword_shares`: ties
a step apart, before the prior, never under the next lower score); with similarity the
vector list orders equal keyword scores. On the recall evaluation (README, "Finding
memories"), seeds 1-10, 21 and 31-35: keyword-only recall@10 expected over what stays tied
3.5-10 questions (of 240) higher on every seed, recall@1 and @3 within 1.5 of before
(summed over the seeds: @1 -0.5, @3 +20); the hybrid with it lost one question at
recall@1 on 5 seeds, without it is unchanged. A character-trigram overlap with the query
(Dice), screened first on seeds 21, 1, 2, 3 and 5, ordered them no better than chance
(expected recall@1 0.012 down to 0.001 up, @10 0.007 down to 0.020 up): a paraphrase
shares no word but the name with its evidence.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memkeeper.store.bm25 import Scored


def order_ties(scored: list[Scored], terms_of: Callable[[str], Counter[str]]) -> list[Scored]:
    """``scored`` best first (score, then adjacency), with each entry that ties another its
    specificity (the mean idf, within the matches, of its distinct terms) and the ties in
    its order (then by id); ``terms_of`` gives a match's term counts by id."""
    _by_rank(scored, specificity=False)
    tied = _tied(scored)
    if not tied:
        return scored
    matches = list(map(terms_of, map(_ID, scored)))
    held = Counter(chain.from_iterable(matches))  # each term once per match holding it
    n = len(scored)
    # One logarithm per distinct count (a few), not per term (every match's own words).
    by_count = {m: math.log(1 + (n - m + 0.5) / (m + 0.5)) for m in set(held.values())}
    idf = dict(zip(held, map(by_count.__getitem__, held.values()), strict=True))
    new, get = tuple.__new__, idf.__getitem__
    out = [  # each tied match's specificity (this runs for every match of every search)
        new(type(item), (*item[:4], sum(map(get, terms)) / len(terms) if terms else 0.0))
        if i in tied
        else item
        for i, (item, terms) in enumerate(zip(scored, matches, strict=True))
    ]
    _by_rank(out, specificity=True)
    return out


_ID, _SCORE, _ADJACENCY, _SPECIFICITY = (itemgetter(i) for i in (0, 1, 3, 4))


def _by_rank(scored: list[Scored], *, specificity: bool) -> None:
    """Sort best first: by score, adjacency, (``specificity``,) then id. One stable sort
    per field, the least significant first, each keyed by a C getter: a third of the time
    of one sort keyed by a tuple built per entry (222 matches: 0.025 against 0.075 ms)."""
    scored.sort(key=_ID)
    if specificity:
        scored.sort(key=_SPECIFICITY, reverse=True)
    scored.sort(key=_ADJACENCY, reverse=True)
    scored.sort(key=_SCORE, reverse=True)


def _tied(scored: Sequence[Scored]) -> set[int]:
    """Positions of the entries equal to a neighbour in score and adjacency (:func:`same`,
    inlined: this runs for every pair of neighbours of every search)."""
    out: set[int] = set()
    for i in range(1, len(scored)):
        a, b = scored[i - 1], scored[i]
        x, y = a.score, b.score
        if not (x == y or abs(x - y) <= 1e-12 * max(1.0, abs(y))):
            continue
        x, y = a.adjacency, b.adjacency
        if x == y or abs(x - y) <= 1e-12 * max(1.0, abs(y)):
            out.update((i - 1, i))
    return out


def same(a: float, b: float) -> bool:
    """Whether two scores are equal but for float rounding (how ties are told, here and in
    :func:`memkeeper.store.fusion.keyword_shares`)."""
    return abs(a - b) <= 1e-12 * max(1.0, abs(b))
