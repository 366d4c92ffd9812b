"""The cheap run finder (store/text_runs.py) gives exactly what the one-pattern regex gives."""

from __future__ import annotations

import random
import re

import pytest

from memkeeper.store import text_runs
from memkeeper.store.text_runs import _CJK_CHARS, _CJK_RANGES, runs

REFERENCE = re.compile(rf"([{_CJK_CHARS}]+)|([^\W_{_CJK_CHARS}]+)")
"""The definition: what runs() must return, as re.findall does."""

TRICKY = [
    "",
    "report_format reports PDF",
    "Carla's café in Zürich, naïve façade",
    "北京 上海",
    "我住在北京hello世界",
    "abc漢字def",
    "カタ・カナ",
    "\u30a0アイ",
    "か\u3099き",
    "한국어 텍스트_test",
    "\uff46\uff55\uff4c\uff4c \uff57\uff49\uff44\uff54\uff48",
    "𠀀𠀁 emoji 🙂 mixed",
    "a\u3040b\u30fb\u30fbc",
    "\u30fb",
    "\u30fb\u30fb漢",
    "漢\u30fb",
    "x_y__z",
    "٣٤٥ arabic digits عربى",
    "\u3000全角スペース\u3000",
]

ALPHABET = (
    "abcXYZ019_ -.,'\n\t"
    "éüßñ"
    "漢字北京我你"
    "かなアイウー"
    "한국"
    "\u3040\u3097\u3099\u309c\u30a0\u30fb\ud7a4\ufa6e\ufada"
    "\u3000\u300c\u300d"
    "🙂𠀀"
    "\u0301"
)


@pytest.mark.parametrize("text", TRICKY)
def test_the_tricky_texts_split_as_the_pattern_splits_them(text: str) -> None:
    assert runs(text) == REFERENCE.findall(text)


def test_random_texts_split_as_the_pattern_splits_them() -> None:
    rng = random.Random(20261202)
    for _ in range(3000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 30)))
        assert runs(text) == REFERENCE.findall(text), repr(text)


def test_the_non_word_cjk_list_matches_this_pythons_unicode_tables() -> None:
    word = re.compile(r"[^\W_]")
    missing = [
        chr(code)
        for low, high in _CJK_RANGES
        for code in range(low, high + 1)
        if not word.match(chr(code))
    ]
    listed = re.compile(f"[{text_runs._CJK_NON_WORD}]")
    assert all(listed.match(char) for char in missing)
    in_list = [
        chr(code)
        for low, high in _CJK_RANGES
        for code in range(low, high + 1)
        if listed.match(chr(code))
    ]
    assert in_list == missing


def test_the_ranges_are_the_pattern_blocks() -> None:
    blocks = re.findall(r"(.)-(.)", _CJK_CHARS)
    assert [(ord(a), ord(b)) for a, b in blocks] == list(_CJK_RANGES)
