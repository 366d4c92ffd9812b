"""A text's runs for keyword scoring: CJK runs and word runs, found cheaply.

BM25 (:mod:`memkeeper.store.bm25`) scores a CJK run character by character (with its
two-character pieces as a tie-break) and a word run as one stemmed word. :func:`runs` finds
them without the one regular expression that says it directly, whose compilation cost about
10 ms of every ``memkeeper search`` process (README, Performance: start-up).
"""

from __future__ import annotations

import re

_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
r"""The CJK blocks: kana, the ideographs (with extension A and the compatibility block) and
Hangul syllables. A text's runs are maximal runs of these characters (scored character by
character) and maximal runs of other word characters except ``_`` (scored as words): what
``re.findall(rf"([{_CJK_CHARS}]+)|([^\W_{_CJK_CHARS}]+)", text)`` gives (:func:`runs`)."""

_CJK_RANGES = (
    (0x3040, 0x30FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
)

_CJK_NON_WORD = "\u3040\u3097-\u309c\u30a0\u30fb\ud7a4-\ud7af\ufa6e-\ufa6f\ufada-\ufaff"
"""The characters of the CJK blocks that are not word characters (unassigned, combining
sound marks, the katakana dots): a CJK run includes them. tests/test_bm25_runs.py checks the
list against this Python's Unicode tables."""

_PIECES = re.compile(rf"[^\W_]+|[{_CJK_NON_WORD}]+")
"""Word runs and runs of the CJK non-word characters: a regular expression that compiles in
well under a millisecond. The one-pattern form above spends about 10 ms compiling its two
CJK classes (``re`` expands each BMP range character by character), a fifth of ``memkeeper
search``'s start-up (README, Performance: start-up)."""


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def runs(text: str) -> list[tuple[str, str]]:
    """The text's runs in order, each ``(cjk, "")`` or ``("", word)`` (see :data:`_CJK_CHARS`).

    Each piece :data:`_PIECES` finds is split where it passes between CJK and other
    characters; a CJK part that starts where the previous one ended (a CJK non-word
    character between two pieces) joins it.
    """
    out: list[tuple[str, str]] = []
    cjk_end = -1
    for found in _PIECES.finditer(text):
        piece = found.group()
        if piece.isascii():
            out.append(("", piece))
            continue
        start, i, n = found.start(), 0, len(piece)
        while i < n:
            cjk = _is_cjk(piece[i])
            j = i + 1
            while j < n and _is_cjk(piece[j]) == cjk:
                j += 1
            part = piece[i:j]
            if not cjk:
                out.append(("", part))
            elif start + i == cjk_end and out and out[-1][0]:
                out[-1] = (out[-1][0] + part, "")
            else:
                out.append((part, ""))
            if cjk:
                cjk_end = start + j
            i = j
    return out
