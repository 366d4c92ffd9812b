"""One chat completion, reduced to what the summarizer needs (no SDK types escape)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memkeeper.llm.errors import LlmBadAnswer


@dataclass(frozen=True)
class LlmAnswer:
    """One chat completion, reduced to what the summarizer needs."""

    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    model: str
    attempts: int = 1

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def _fields_of(completion: Any) -> tuple[Any, Any, Any, Any] | None:
    """(content, finish_reason, usage, model) of a completion; None if it is not one."""
    if completion is None or isinstance(completion, str | bytes):
        return None
    try:
        choice = completion.choices[0]
        return (
            choice.message.content,
            choice.finish_reason,
            getattr(completion, "usage", None),
            getattr(completion, "model", None),
        )
    except (AttributeError, IndexError, KeyError, TypeError):
        return None


def _count(usage: Any, name: str) -> int:
    value = getattr(usage, name, 0)
    return value if isinstance(value, int) and value > 0 else 0


def answer_of(completion: Any, model: str, attempts: int, endpoint: str) -> LlmAnswer:
    """Reduce an SDK completion to an :class:`LlmAnswer`; LlmBadAnswer if it is not one."""
    fields = _fields_of(completion)
    if fields is None or not isinstance(fields[0], str | None):
        raise LlmBadAnswer(
            f"the LLM endpoint {endpoint} answered with something that is not a chat completion",
            attempts=attempts,
        )
    content, finish_reason, usage, answered_model = fields
    return LlmAnswer(
        text=content or "",
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
        prompt_tokens=_count(usage, "prompt_tokens"),
        completion_tokens=_count(usage, "completion_tokens"),
        model=str(answered_model or model),
        attempts=attempts,
    )
