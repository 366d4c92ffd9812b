"""What an SDK failure means, and how long to wait before trying again.

:func:`classify` maps whatever the GLM SDK (:mod:`memkeeper.llm.sdk`) raised during one
attempt to one of:

* a final error — :class:`LlmAuthError` (401/403), :class:`LlmRequestRejected` (any other 4xx
  but 408/409/429), :class:`LlmBadAnswer` (a body that is not a chat completion), or a plain
  :class:`LlmError` (anything else the SDK raises);
* a :data:`Retry` — 429, 408/409, 5xx, timeouts and connection failures: what went wrong, in
  words, and the server's ``Retry-After`` hint;
* None — not the SDK's: a bug, which the caller lets propagate.

Retries are ours, not the SDK's (it is built with ``max_retries=0``), so each HTTP attempt is
counted against the run's call budget and the backoff is configurable (tests use 10 ms).

The SDK is imported here only inside :func:`classify`, which runs after a call was made, so
it is loaded by then: importing this module loads neither SDK nor ``httpx``.
"""

from __future__ import annotations

import json
import math
import random
import re
from typing import Any

from memkeeper.config import LlmSection
from memkeeper.llm import sdk
from memkeeper.llm.errors import LlmAuthError, LlmBadAnswer, LlmError, LlmRequestRejected
from memkeeper.logs import redact

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""HTTP statuses (besides every 5xx) worth retrying: timeouts, lock conflicts, rate limits."""

AUTH_STATUS = frozenset({401, 403})
MAX_RETRY_AFTER_SECONDS = 30.0
"""A server's ``Retry-After`` is honoured up to this many seconds."""

Retry = tuple[str, float | None]
"""A transient problem worth another attempt: what went wrong, and the server's wait hint."""

_ERRNO_PREFIX = re.compile(r"^\[Errno -?\d+\]\s*")


def _server_detail(exc: Any) -> str:
    """The server's own short error message (e.g. "模型不存在"), redacted and truncated."""
    try:
        body = exc.response.json()
    except Exception:
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str) or not message.strip():
        return ""
    text = redact(" ".join(message.split()))
    return f": {text[:200]}"


def _connection_problem(exc: Any) -> str:
    """What went wrong connecting, in words: "connection refused", "Name or service not known".

    The SDK's own message is only "Connection error."; the cause (an httpx error) says why.
    Its text is one short line from the OS or httpx, never the request, so it is safe to log.
    """
    cause = exc.__cause__ or exc.__context__ or exc
    text = _ERRNO_PREFIX.sub("", " ".join(str(cause).split()))[:200]
    kind = type(cause).__name__
    if not text or text == "Connection error.":
        return f"connection failed ({kind})"
    return f"connection failed ({kind}: {text[0].lower()}{text[1:]})"


def _retry_after(exc: Any) -> float | None:
    value = exc.response.headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, MAX_RETRY_AFTER_SECONDS)


def classify(
    exc: Exception, *, config: LlmSection, endpoint: str, attempts: int
) -> LlmError | Retry | None:
    """What ``exc``, raised by the SDK during attempt number ``attempts``, means.

    A final :class:`LlmError`, a :data:`Retry`, or None when ``exc`` is not the SDK's.
    """
    chosen = sdk.load()  # already loaded: only a client that exists makes calls that fail

    if isinstance(exc, chosen.status_error):
        status = exc.status_code
        if status in AUTH_STATUS:
            return LlmAuthError(
                f"the LLM endpoint {endpoint} refused the API key (HTTP {status}); "
                f"check the key in {config.api_key_env}",
                attempts=attempts,
            )
        if status not in RETRYABLE_STATUS and status < 500:
            return LlmRequestRejected(
                f"the LLM endpoint {endpoint} rejected the request "
                f"(HTTP {status}{_server_detail(exc)})",
                attempts=attempts,
            )
        return f"HTTP {status}{_server_detail(exc)}", _retry_after(exc)
    # APITimeoutError is an APIConnectionError: it must be asked first.
    if isinstance(exc, chosen.timeout_error):
        return f"no answer within {config.timeout_seconds:g} s", None
    if isinstance(exc, chosen.connection_error):
        return _connection_problem(exc), None
    if isinstance(exc, (chosen.validation_error, json.JSONDecodeError, UnicodeError)):
        return LlmBadAnswer(
            f"the LLM endpoint {endpoint} answered with a body that is not a chat "
            "completion (not JSON)",
            attempts=attempts,
        )
    if isinstance(exc, chosen.base_error):
        return LlmError(f"the LLM client failed ({type(exc).__name__})", attempts=attempts)
    return None


def backoff(config: LlmSection, retry: int, hint: float | None) -> float:
    """Seconds to wait before retry number ``retry`` (from 0): exponential with jitter, at
    least the server's hint."""
    base = config.retry_backoff_seconds * (2**retry)
    jittered = base * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not crypto
    return max(jittered, hint or 0.0)
