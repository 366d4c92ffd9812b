"""Plain-text rendering of records for the CLI (the ``--json`` forms use ``to_dict``).

Stored text comes from agents, import files and LLMs, not from the operator: printed raw, an
ANSI or OSC escape in a value could recolour, retitle or rewrite the operator's terminal, and
a newline could forge a line of output. Every command that prints stored text in its text
form passes it through :func:`shown`, which escapes control characters the way ``explain``
does (Python's ``repr`` escapes: ``\\x1b``, ``\\n``, ``\\x9b``, ``\\u202e``) and cuts very long
text with a visible marker. ``--json`` output keeps the exact text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from memkeeper.records import Memory

VALUE_LIMIT = 1000
"""Characters of one stored text shown in full views (recall, get, remember, history)."""

LINE_LIMIT = 60
"""Characters of a value shown in a one-line listing (list, review list)."""

# C0 controls (ESC, CR, LF, BEL...), DEL and the C1 controls (CSI 0x9b, OSC 0x9d...), the
# Unicode line and paragraph separators, the bidirectional overrides and isolates that can
# reorder what a line appears to say, and lone surrogates (which a terminal cannot encode).
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]


def shown(text: Any, limit: int | None = VALUE_LIMIT, *, flat: bool = False) -> str:
    """``text`` made safe to print on a terminal: escaped, and cut with a marker if long.

    Control characters become their ``repr`` escapes (``\\x1b[31m`` prints as the six
    characters ``\\x1b[31m``); text longer than ``limit`` characters is cut there and ends in
    ``… (+N chars)`` naming how many were left out. ``flat`` first folds every run of
    whitespace into one space (for one-line listings). ``None`` prints as an empty string.
    """
    if text is None:
        return ""
    text = str(text)
    if flat:
        text = " ".join(text.split())
    more = 0
    if limit is not None and len(text) > limit:
        more = len(text) - limit
        text = text[:limit]
    text = _UNSAFE.sub(_escape, text)
    return f"{text}… (+{more} chars)" if more else text


def shown_lines(text: str, limit: int | None = VALUE_LIMIT) -> str:
    """Multi-line text produced by memkeeper (``explain``): each line escaped on its own."""
    return "\n".join(shown(line, limit) for line in text.split("\n"))


def owner(user_id: str | None, namespace: str | None) -> str:
    """``user`` or ``user/namespace``, escaped."""
    if user_id is None:
        return "-"
    return shown(user_id + (f"/{namespace}" if namespace else ""), LINE_LIMIT)


def memory_label(kind: str | None, key: str | None) -> str:
    """``fact 'city'`` or ``note`` (the key quoted, as explain does)."""
    if key is None:
        return kind or "-"
    return f"{kind} '{shown(key, LINE_LIMIT)}'"


def memory_line(memory: Memory) -> str:
    """One memory as one line: id, state, kind, owner, key = value."""
    state = memory.state + (f"({memory.cold_reason})" if memory.cold_reason else "")
    label = f"{shown(memory.key, LINE_LIMIT)} = " if memory.key is not None else ""
    pin = " [pinned]" if memory.pinned else ""
    return (
        f"{memory.id}  {shown(state, LINE_LIMIT):<16} {memory.kind:<10} "
        f"{owner(memory.user_id, memory.namespace):<16} "
        f"{label}{shown(memory.value, LINE_LIMIT, flat=True)}{pin}"
    )


def memory_block(memory: Memory) -> str:
    """One memory in full, one field per line."""
    fields = memory.to_dict()
    width = max(len(name) for name in fields)
    return "\n".join(f"{name:<{width}}  {shown(str(value))}" for name, value in fields.items())


def memory_table(memories: Sequence[Memory]) -> str:
    if not memories:
        return "(no memories)"
    return "\n".join(memory_line(memory) for memory in memories)


_PLURALS = {"memories": "memory", "entries": "entry", "changes": "change", "times": "time"}


def counted(count: int, plural: str) -> str:
    """``1 memory``, ``2 memories``, ``0 episodes``: a count with its noun in agreement."""
    if count == 1:
        return f"1 {_PLURALS.get(plural, plural.removesuffix('s'))}"
    return f"{count} {plural}"
