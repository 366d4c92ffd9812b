"""Normalized text: what "the same value said another way" means for the ``merge`` job.

:func:`normalize` folds the differences that never change a value's meaning:

* full-width and half-width forms (NFKC: ``ＰＤＦ`` is ``PDF``, ``，`` is ``,``);
* case (``casefold``: ``PDF`` is ``pdf``, ``Straße`` is ``strasse``);
* punctuation (every Unicode ``P*`` character, ``_`` and ``-`` included, becomes a space),
  except the few that carry meaning: ``% ‰ # @ &`` and a minus sign before a digit
  (``-5`` is not ``5``); symbols (``+``, ``$``, ``°``) are not punctuation and stay;
* whitespace (runs collapse to one space, ends are trimmed, and a space next to a CJK
  character goes: ``报告 用 PDF`` is ``报告用pdf``).

Keys are normalized the same way (``report_format`` and ``Report Format`` are one key).
Pure text work: no database.
"""

# Full-width characters are examples here on purpose.
# ruff: noqa: RUF002

from __future__ import annotations

import functools
import re
import unicodedata

_CJK = "\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_SPACE_BY_CJK = re.compile(f"(?<=[{_CJK}]) | (?=[{_CJK}])")
_MINUS_BEFORE_DIGIT = re.compile(r"-(?=\d)")
_MEANINGFUL = frozenset("%‰#@&")


@functools.cache
def _punctuation_table() -> dict[int, str]:
    """Every punctuation character that says nothing, mapped to a space (built once)."""
    return {
        code: " "
        for code in range(0x30000)
        if unicodedata.category(chr(code)).startswith("P") and chr(code) not in _MEANINGFUL
    }


def normalize(text: str) -> str:
    """``text`` with width, case, punctuation and whitespace differences folded away."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = _MINUS_BEFORE_DIGIT.sub("\u2212", folded)  # a minus sign is a symbol: it stays
    collapsed = " ".join(folded.translate(_punctuation_table()).split())
    return _SPACE_BY_CJK.sub("", collapsed)


def normalize_key(key: str | None) -> str | None:
    """A key normalized like a value (None for a note, which has no key)."""
    return None if key is None else normalize(key)
