"""Equal BM25 scores ordered by specificity (issue 21): a paraphrase shares only the name.

"what is Elif's profession?" shares only *elif* with "Elif works as a radiologist at the
hospital" and with every "remind Elif to bring the ... on Friday" of the same length: the
same score. Before, the prior (confidence, recent use) and then the id ordered them;
now the entry whose words the other matches do not share comes first.
"""

from __future__ import annotations

import pytest

from memkeeper import MemoryStore
from memkeeper.config import Config
from memkeeper.store import bm25_index, fusion
from memkeeper.store.bm25 import reset, score_all

QUERY = "what is Elif's profession?"
EVIDENCE = "Elif works as a radiologist at the hospital"
PLACES = ("museum", "garden", "bridge")
FILLERS = [f"remind Elif to bring the {place} on Friday" for place in PLACES]
OTHERS = [f"talked about the weather, number {i}" for i in range(6)]


@pytest.fixture(autouse=True)
def fresh_caches() -> None:
    reset()
    bm25_index.reset()


def test_equal_scores_put_the_specific_entry_first() -> None:
    rows = [  # ids: by id alone (before), the evidence came last
        *((f"a{i}", None, text) for i, text in enumerate(FILLERS)),
        ("x", None, EVIDENCE),
        *((f"o{i}", None, text) for i, text in enumerate(OTHERS)),
    ]
    scored = score_all(rows, QUERY)
    assert [s.id for s in scored][:1] == ["x"]
    assert len({round(s.score, 12) for s in scored}) == 1  # one score: only the order moves
    assert scored[0].specificity > scored[1].specificity > 0


def test_a_different_score_is_never_reordered() -> None:
    """Specificity orders equal scores only: a longer entry (a lower BM25) stays under."""
    rows = [
        ("filler", None, FILLERS[0]),
        ("long", None, EVIDENCE + " in the north of the city since last spring"),
        *((f"o{i}", None, text) for i, text in enumerate(OTHERS)),
    ]
    assert [s.id for s in score_all(rows, QUERY)] == ["filler", "long"]


def test_keyword_only_search_finds_the_specific_tie_before_the_confident_ones(
    store: MemoryStore,
) -> None:
    """The tie-break comes before the prior: the fillers' higher confidence put them first."""
    for text in FILLERS:
        store.add_note("u", text, confidence=0.9)
    evidence = store.add_note("u", EVIDENCE, confidence=0.5)
    for text in OTHERS:
        store.add_note("u", text)
    hits = store.search("u", QUERY, limit=1)  # keyword-only: no key
    assert [h.memory.id for h in hits] == [evidence.id]


def test_the_steps_between_ties_never_fall_under_the_next_score() -> None:
    """Each tie a step (``1 - 2 · prior_weight``) under the one before, so the prior cannot
    undo it; but never so far that the prior could lift the next lower score above it."""
    settings = Config().search
    step = 1 - 2 * settings.prior_weight
    apart = fusion.keyword_shares(settings, [("a", 2.0, 0, 3), ("b", 2.0, 0, 2), ("c", 1.0, 0, 0)])
    assert apart == pytest.approx({"a": 1.0, "b": step, "c": 0.5})
    close = [("a", 1.0, 0, 3), ("b", 1.0, 0, 2), ("c", 1.0, 0, 1), ("d", 0.99, 0, 0)]
    shares = fusion.keyword_shares(settings, close)
    assert shares["a"] > shares["b"] >= shares["c"]
    assert shares["c"] >= shares["d"] * (1 + settings.prior_weight) * (1 - 1e-12)
