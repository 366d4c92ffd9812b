"""BM25's statistics for a small user (issue 21): the keyword scores are textbook Okapi BM25
over memkeeper's terms — the exact mean length in terms, not an estimate from characters.

The estimate (the user's mean in characters times the candidates' terms per character)
is what a large user's SQL aggregate allows; a small user's rows are all read, so the
mean is known. On CJK entries with ASCII keys (``allergy_440_123``: 15 characters, 3
terms; a CJK value: a term per character) the estimate was off by a few percent and moved
"卡拉对鸡蛋过敏" from second to third for "卡拉忌口什么" on the recall evaluation (seed 21),
against textbook BM25 over the same memories.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest

from memkeeper.store.bm25 import K1, B, entry_counts, query_terms, score_all


def _textbook(rows: list[tuple[str, str | None, str]], query: str) -> dict[str, float]:
    """Okapi BM25 (k1 1.2, b 0.75, idf ln(1 + (N - df + 0.5) / (df + 0.5))) over the rows'
    terms, every statistic counted from the rows themselves."""
    counts = {i: entry_counts(key, value) for i, key, value in rows}
    avgdl = sum(c.length for c in counts.values()) / len(rows)
    wanted = query_terms(query).terms
    df = Counter(t for c in counts.values() for t in wanted if t in c.terms)
    out = {}
    for memory_id, c in counts.items():
        score = 0.0
        for t in wanted:
            if tf := c.terms.get(t, 0):
                idf = math.log(1 + (len(rows) - df[t] + 0.5) / (df[t] + 0.5))
                score += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * c.length / avgdl))
        if score:
            out[memory_id] = score
    return out


ROWS = [
    ("egg", "allergy_440_123", "卡拉对鸡蛋过敏"),
    ("harmonica", None, "卡拉每周末弹奏口琴"),
    ("race", None, "卡拉正在准备上海马拉松"),
    ("dog", "pet_618_302", "卡拉领养了一只柯基"),
    ("harbour", None, "卡拉问港口还开不开门"),
    *((f"note{i}", None, f"安娜问{i}号公园还开不开门") for i in range(8)),
    ("city", "city_ann_oslo", "Ann moved to Oslo last spring"),
]


@pytest.mark.parametrize("query", ["卡拉忌口什么", "卡拉公园", "Ann Oslo"])
def test_a_small_users_scores_are_textbook_bm25(query: str) -> None:
    found = {s.id: s.score for s in score_all(ROWS, query)}
    expected = _textbook(ROWS, query)
    assert found.keys() == expected.keys()
    for memory_id, score in expected.items():
        assert found[memory_id] == pytest.approx(score, rel=1e-12), memory_id
