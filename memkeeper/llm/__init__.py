"""The summarizer's LLM client: the GLM SDK, our own retries, and per-run budgets.

:class:`LlmClient` wraps ``zai.ZhipuAiClient`` (or ``zhipuai.ZhipuAI`` where that SDK is the
one installed, see :mod:`~memkeeper.llm.sdk`), which speaks the OpenAI chat-completions
protocol, so any OpenAI-compatible endpoint works by base URL) and turns everything it can
raise into a few exceptions of ours, each with a message that names the cause and never the
API key:

* :class:`LlmAuthError` — 401/403: the key is wrong; a job stops for this run.
* :class:`LlmUnavailable` — 429, 408/409, 5xx, timeouts and connection failures, still failing
  after ``[llm] max_retries`` retries with exponential backoff.
* :class:`LlmRequestRejected` — any other 4xx (unknown model, prompt too long...).
* :class:`LlmBadAnswer` — an answer that is not a chat completion (not JSON, wrong shape).
* :class:`SummaryRejected` — raised by the summarizer's quality gate, not by the client.

The modules, one concern each: :mod:`~memkeeper.llm.errors` (the exceptions),
:mod:`~memkeeper.llm.retries` (which SDK failure is which, backoff),
:mod:`~memkeeper.llm.client` (the client), :mod:`~memkeeper.llm.answer` (a completion
reduced to an :class:`LlmAnswer`), :mod:`~memkeeper.llm.endpoint` (the key and the endpoint)
and :mod:`~memkeeper.llm.usage` (:class:`Usage` of one piece of work, and the run's
:class:`Budget` of calls and tokens, globally and per user, safe to share between threads).

The SDK loads lazily: it and ``httpx`` are imported when an :class:`LlmClient` is
created, never by importing this package, so code that only names these classes (the job
registry, the CLI) does not pay for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memkeeper.llm.answer import LlmAnswer
    from memkeeper.llm.client import LlmClient
    from memkeeper.llm.endpoint import DEFAULT_BASE_URL, describe_endpoint, read_api_key
    from memkeeper.llm.errors import (
        LlmAuthError,
        LlmBadAnswer,
        LlmError,
        LlmNotConfigured,
        LlmRequestRejected,
        LlmUnavailable,
        SummaryRejected,
    )
    from memkeeper.llm.retries import AUTH_STATUS, MAX_RETRY_AFTER_SECONDS, RETRYABLE_STATUS
    from memkeeper.llm.usage import Budget, Usage

_HOME = {
    "LlmAnswer": "answer",
    "LlmClient": "client",
    **dict.fromkeys(("DEFAULT_BASE_URL", "describe_endpoint", "read_api_key"), "endpoint"),
    **dict.fromkeys(
        (
            "LlmAuthError",
            "LlmBadAnswer",
            "LlmError",
            "LlmNotConfigured",
            "LlmRequestRejected",
            "LlmUnavailable",
            "SummaryRejected",
        ),
        "errors",
    ),
    **dict.fromkeys(("AUTH_STATUS", "MAX_RETRY_AFTER_SECONDS", "RETRYABLE_STATUS"), "retries"),
    **dict.fromkeys(("Budget", "Usage"), "usage"),
}
"""Which module defines each name: a name loads its module on first use, so importing one
module of the package (``memkeeper.llm.endpoint``: does search have a key?) does not import
the client, its retries and the config schema (start-up: README, Performance)."""


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


__all__ = [
    "AUTH_STATUS",
    "DEFAULT_BASE_URL",
    "MAX_RETRY_AFTER_SECONDS",
    "RETRYABLE_STATUS",
    "Budget",
    "LlmAnswer",
    "LlmAuthError",
    "LlmBadAnswer",
    "LlmClient",
    "LlmError",
    "LlmNotConfigured",
    "LlmRequestRejected",
    "LlmUnavailable",
    "SummaryRejected",
    "Usage",
    "describe_endpoint",
    "read_api_key",
]
