"""Token estimates and the conversation's language, from text alone.

A CJK character counts about one token, other text about four characters per token: good
enough to keep prompts under ``input_budget_tokens`` without a tokenizer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

_CJK = re.compile(
    "[\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
    "\U00020000-\U0003ffff]"
)
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]")
_KANA = re.compile("[\u3040-\u30ff]")
_HANGUL = re.compile("[\uac00-\ud7af]")
_LETTER = re.compile(r"[^\W\d_]")


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: one per CJK character, one per four other characters."""
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


def split_to_tokens(text: str, budget: int) -> list[str]:
    """``text`` cut into consecutive pieces of at most ``budget`` estimated tokens each."""
    budget = max(budget, 1)
    if estimate_tokens(text) <= budget:
        return [text]
    pieces: list[str] = []
    start, cjk, other = 0, 0, 0
    for index, char in enumerate(text):
        is_cjk = bool(_CJK.match(char))
        cost = cjk + is_cjk + math.ceil((other + (not is_cjk)) / 4)
        if cost > budget and index > start:
            pieces.append(text[start:index])
            start, cjk, other = index, 0, 0
        cjk += is_cjk
        other += not is_cjk
    pieces.append(text[start:])
    return pieces


def detect_language(texts: Sequence[str]) -> str | None:
    """The conversation's script-level language when it is clear: Chinese, Japanese, Korean.

    None means "not a CJK language": the prompt then asks for the conversation's own language
    without naming it (the model recognises Latin-script languages reliably).
    """
    sample = "".join(texts)[:50_000]
    han, kana, hangul = (len(p.findall(sample)) for p in (_HAN, _KANA, _HANGUL))
    letters = len(_LETTER.findall(sample))
    if letters == 0 or (han + kana + hangul) < 0.2 * letters:
        return None
    if hangul > han + kana:
        return "Korean"
    if kana and kana >= 0.1 * (han + kana):
        return "Japanese"
    return "Chinese"
