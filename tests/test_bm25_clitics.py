"""English clitics in keyword terms (issue 21): "Farid's" is ``farid`` and ``farid's``.

As a term of its own, a possessive's ``s`` matched every entry with a possessive in it,
whoever it was about: on the recall evaluation "Dev's favourite dish is dumplings" came
before "Farid works as a radiologist at the hospital" for "what is Farid's profession?".
"""

from __future__ import annotations

import pytest

from memkeeper.store import bm25_index
from memkeeper.store.bm25 import query_terms, reset, score_all, terms


@pytest.fixture(autouse=True)
def fresh_caches() -> None:
    reset()
    bm25_index.reset()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Farid's dish", ["farid", "dish", "farid's"]),
        ("Farid\u2019s dish", ["farid", "dish", "farid's"]),
        ("FARID'S DISHES", ["farid", "dish", "farid's"]),
        ("the dogs's bone", ["the", "dog", "bone", "dog's"]),  # bound to the stemmed word
        ("it isn't, we'll see, I'm", ["it", "isn", "we", "see", "i"]),
        ("O'Brien", ["o", "brien"]),  # not a clitic: a name
        ("the 90's", ["the", "90", "s"]),  # after a digit: left alone
    ],
)
def test_clitics_are_not_terms(text: str, expected: list[str]) -> None:
    assert terms(text) == expected


def test_a_possessive_matches_the_name_and_not_every_possessive() -> None:
    rows = [
        ("dev", None, "Dev's favourite dish: pho"),
        ("farid", None, "Farid works as a radiologist at the hospital"),
        *((f"n{i}", None, f"talked about the garden, number {i}") for i in range(6)),
    ]
    query = "what is Farid's profession?"
    assert "s" not in query_terms(query).terms
    assert [s.id for s in score_all(rows, query)] == ["farid"]


def test_a_possessive_finds_the_same_possessive_first() -> None:
    """ "Farid's celebration" shares ``farid's`` with "Farid's birthday party" (its pattern
    for the candidates' SQL is the word, which every such entry holds)."""
    rows = [
        ("party", None, "Farid's birthday party at the aquarium"),
        ("race", None, "Farid trains for the marathon in Boston"),
        ("dev", None, "Dev's birthday party at the vineyard"),
        *((f"n{i}", None, f"talked about the garden, number {i}") for i in range(6)),
    ]
    wanted = query_terms("where is Farid's celebration?")
    assert wanted.patterns[wanted.terms.index("farid's")] == "farid"
    assert [s.id for s in score_all(rows, "where is Farid's celebration?")] == ["party", "race"]
