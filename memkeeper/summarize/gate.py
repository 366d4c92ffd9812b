"""What the summarizer accepts: the quality gate over an LLM answer.

:func:`check_summary` refuses empty, truncated (``finish_reason`` ``length``), filtered,
non-JSON and implausibly short answers. Text work over the answer's fields; it needs nothing
of the LLM client but the :class:`~memkeeper.llm.errors.SummaryRejected` it raises.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from memkeeper.llm.errors import SummaryRejected

if TYPE_CHECKING:
    from memkeeper.llm.answer import LlmAnswer

REJECTED_FINISH_REASONS = frozenset(
    {"length", "sensitive", "content_filter", "network_error", "tool_calls"}
)


def _json_object(text: str) -> object:
    candidate = text.strip()
    fenced = re.match(r"^```[a-zA-Z]*\s*(.*?)\s*```$", candidate, re.S)
    if fenced:
        candidate = fenced.group(1)
    try:
        return json.loads(candidate)
    except ValueError:
        pass
    start, end = candidate.find("{"), candidate.rfind("}")
    if 0 <= start < end:
        try:
            return json.loads(candidate[start : end + 1])
        except ValueError:
            return None
    return None


def check_summary(answer: LlmAnswer, *, min_chars: int, max_bytes: int) -> str:
    """The summary text of an answer that passes the quality gate; SummaryRejected if not.

    Refused: a finish reason saying the answer was cut off or filtered, an empty answer, one
    that is not a JSON object with a non-empty ``summary`` string (a list of strings is
    accepted as lines), one shorter than ``min_chars`` characters, or one over ``max_bytes``.
    """
    return check_answer(answer, min_chars=min_chars, max_bytes=max_bytes)[0]


def check_answer(
    answer: LlmAnswer, *, min_chars: int, max_bytes: int
) -> tuple[str, dict[str, object]]:
    """:func:`check_summary`, and the whole JSON object (where extraction finds its
    ``memories``, checked by :mod:`memkeeper.summarize.extract_gate`)."""
    reason = (answer.finish_reason or "").lower()
    if reason in REJECTED_FINISH_REASONS:
        what = "truncated" if reason == "length" else "not a complete answer"
        raise SummaryRejected(f"answer {what} (finish_reason {reason!r})")
    if not answer.text.strip():
        raise SummaryRejected("empty answer")
    data = _json_object(answer.text)
    summary = data.get("summary") if isinstance(data, dict) else None
    if isinstance(summary, list) and all(isinstance(line, str) for line in summary):
        summary = "\n".join(line.strip() for line in summary if line.strip())
    if not isinstance(summary, str):
        raise SummaryRejected('answer is not a JSON object with a "summary" string')
    summary = summary.strip()
    if len(summary) < min_chars:
        raise SummaryRejected(
            f"implausibly short summary ({len(summary)} characters < {min_chars})"
        )
    if len(summary.encode("utf-8")) > max_bytes:
        raise SummaryRejected(f"summary longer than {max_bytes} bytes")
    assert isinstance(data, dict)
    return summary, data
