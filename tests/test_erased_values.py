"""Erased values are found in any case and Unicode form, word for word, from their hashes.

Pure tests of :mod:`memkeeper.storage.erased_values`: which texts carry a value, which values
are too common to look for, what redaction leaves, and that no plaintext is kept.
"""

# Full-width letters on purpose: NFKC folds them.
# ruff: noqa: RUF001

from __future__ import annotations

import random
import secrets

import pytest

from memkeeper.storage import erased_values
from memkeeper.storage.erased_values import Matcher, hashed, identifies, redact

SECRET = secrets.token_bytes(32)


def matcher(*values: str) -> Matcher:
    rows = [hashed(SECRET, value, "k") for value in values]
    return Matcher.of(SECRET, [row for row in rows if row is not None])


@pytest.mark.parametrize(
    "text",
    [
        "I live in Beijing.",
        "BEIJING!",
        "beijing,",
        "moved to Ｂｅｉｊｉｎｇ last year",
        "(Beijing)",
    ],
)
def test_a_value_is_found_in_any_case_and_width(text: str) -> None:
    assert matcher("Beijing").carries(text)


@pytest.mark.parametrize("text", ["Beijinger", "Bei jing", "Beijin", "Nanjing"])
def test_only_the_same_words_carry_it(text: str) -> None:
    assert not matcher("Beijing").carries(text)


def test_words_of_a_longer_value_must_all_be_there_in_order() -> None:
    found = matcher("New York City")
    assert found.carries("a flat in new  york, city centre")
    assert not found.carries("New York")
    assert not found.carries("City of New York")


def test_han_characters_are_words_of_their_own() -> None:
    found = matcher("北京")
    assert found.carries("我住在北京。")
    assert found.carries("北京的冬天很冷")
    assert not found.carries("南京")


@pytest.mark.parametrize(
    ("value", "looked_for"),
    [
        ("yes", False),
        ("none", False),
        ("red", False),
        ("2024", False),
        ("猫", False),
        ("Paris", True),
        ("北京", True),
        ("dark red", True),
        ("1987-05-04", True),
    ],
)
def test_values_too_common_to_identify_anything_are_not_looked_for(
    value: str, looked_for: bool
) -> None:
    assert identifies(value) is looked_for
    assert (hashed(SECRET, value, "k") is not None) is looked_for


def test_redaction_keeps_the_other_words_and_returns_the_spans() -> None:
    text = "Flew BEIJING to Shanghai, then beijing again."
    spans = matcher("Beijing").spans(text)
    redacted, taken = redact(text, spans)
    assert redacted == "Flew [erased] to Shanghai, then [erased] again."
    assert taken == ["BEIJING", "beijing"]


def test_a_row_holds_no_plaintext_and_another_secret_matches_nothing() -> None:
    row = hashed(SECRET, "Beijing", "k")
    assert row is not None and "beijing" not in repr(row).lower()
    other = Matcher.of(secrets.token_bytes(32), [row])
    assert not other.carries("Beijing")


def test_the_meaningless_list_and_weights_are_documented() -> None:
    doc = erased_values.__doc__ or ""
    assert "fewer than five letters or digits" in doc and erased_values.MIN_WEIGHT == 5


def test_passing_over_texts_by_the_first_words_never_changes_what_is_found() -> None:
    """The shortcut of a forget (texts without any value's first word are passed over) finds
    exactly what the words alone find, in any case, width, script or decomposition."""
    values = ["Beijing", "New York City", "北京", "Café Noir", "Zürich"]
    rows = [row for value in values if (row := hashed(SECRET, value, "k")) is not None]
    plain = Matcher.of(SECRET, rows)
    quick = Matcher.of(SECRET, rows, plain=values)
    assert quick.first_words and not plain.first_words
    pieces = [
        "Beijing",
        "BEIJING",
        "Ｂｅｉｊｉｎｇ",
        "beijinger",
        "new york city",
        "NEW  york, city",
        "我住在北京",
        "南京",
        "Cafe\u0301 noir",
        "café NOIR",
        "Zu\u0308rich",
        "zürich",
        "tea",
        "report",
        "!",
        " ",
    ]
    rnd = random.Random(7)
    for _ in range(2000):
        text = " ".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 6)))
        assert quick.spans(text) == plain.spans(text), text
