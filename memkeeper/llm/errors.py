"""What can go wrong talking to the LLM, as a few exceptions of ours.

Each message names the cause and never the API key (every message goes through
:func:`memkeeper.logs.redact`). Which SDK failure becomes which exception is decided in
:mod:`memkeeper.llm.retries`.
"""

from __future__ import annotations

from memkeeper.errors import MemkeeperError
from memkeeper.logs import redact


class LlmError(MemkeeperError):
    """Something went wrong talking to the summarizer's LLM."""

    def __init__(self, message: str, *, attempts: int = 0) -> None:
        super().__init__(redact(message))
        self.attempts = attempts


class LlmNotConfigured(LlmError):
    """No API key: the environment variable named by ``[llm] api_key_env`` is unset or empty."""


class LlmAuthError(LlmError):
    """The endpoint refused the API key (HTTP 401 or 403)."""


class LlmUnavailable(LlmError):
    """Rate limits, server errors, timeouts or connection failures outlasted our retries."""


class LlmRequestRejected(LlmError):
    """The endpoint refused this request (a 4xx other than auth and rate limits)."""


class LlmBadAnswer(LlmError):
    """The endpoint answered with something that is not a usable chat completion."""


class SummaryRejected(LlmError):
    """The quality gate refused an answer: empty, truncated, not JSON, implausibly short..."""
