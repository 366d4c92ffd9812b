"""The summarizer's LLM client: the ``zhipuai`` SDK, our own retries, and per-run budgets.

:class:`LlmClient` wraps ``zhipuai.ZhipuAI`` (which speaks the OpenAI chat-completions
protocol, so any OpenAI-compatible endpoint works by base URL) and turns everything it can
raise into a few exceptions of ours, each with a message that names the cause and never the
API key:

* :class:`LlmAuthError` — 401/403: the key is wrong; a job stops for this run.
* :class:`LlmUnavailable` — 429, 408/409, 5xx, timeouts and connection failures, still failing
  after ``[llm] max_retries`` retries with exponential backoff.
* :class:`LlmRequestRejected` — any other 4xx (unknown model, prompt too long...).
* :class:`LlmBadAnswer` — an answer that is not a chat completion (not JSON, wrong shape).
* :class:`SummaryRejected` — raised by the summarizer's quality gate, not by the client.

Retries are ours, not the SDK's (it is built with ``max_retries=0``), so each HTTP attempt is
counted against the run's call budget and the backoff is configurable (tests use 10 ms).

The key comes from the environment variable named by ``[llm] api_key_env``; it is registered
with :func:`memkeeper.logs.register_secret` the moment it is read. The SDK sends it as
``Authorization: Bearer <key>`` (this SDK version only signs a JWT when token caching is
switched on, which we leave off), so the raw key is what must never leak.

:class:`Budget` holds a run's caps on calls and tokens, globally and per user, and is safe to
share between the worker threads of one run.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import zhipuai

from memkeeper.config import LlmSection
from memkeeper.errors import MemkeeperError
from memkeeper.logs import redact, register_secret

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""HTTP statuses (besides every 5xx) worth retrying: timeouts, lock conflicts, rate limits."""

AUTH_STATUS = frozenset({401, 403})
MAX_RETRY_AFTER_SECONDS = 30.0
"""A server's ``Retry-After`` is honoured up to this many seconds."""

DEFAULT_BASE_URL = "https://open.bigmodel.cn/api/paas/v4"


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


def read_api_key(config: LlmSection, environ: Mapping[str, str] | None = None) -> str:
    """The API key from the environment, registered as a secret; LlmNotConfigured if absent."""
    env = os.environ if environ is None else environ
    key = (env.get(config.api_key_env) or "").strip()
    if not key:
        raise LlmNotConfigured(
            f"no API key: the environment variable {config.api_key_env} is not set "
            "([llm] api_key_env names it); summarization is skipped"
        )
    register_secret(key)
    # A Zhipu key looks like "<id>.<secret>": never print the secret half on its own either.
    for part in key.split("."):
        if len(part) >= 8:
            register_secret(part)
    return key


def describe_endpoint(base_url: str | None) -> str:
    """The endpoint as safe to log: scheme, host, port and path, never user:password@."""
    url = base_url or os.environ.get("ZHIPUAI_BASE_URL") or DEFAULT_BASE_URL
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _server_detail(exc: zhipuai.APIStatusError) -> str:
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


_ERRNO_PREFIX = re.compile(r"^\[Errno -?\d+\]\s*")


def _connection_problem(exc: zhipuai.APIConnectionError) -> str:
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


def _retry_after(exc: zhipuai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, MAX_RETRY_AFTER_SECONDS)


class LlmClient:
    """Chat completions through the ``zhipuai`` SDK, with bounded retries of our own.

    One client per job run; safe to share between threads (httpx's client is). ``sleep`` is
    the backoff wait (a test seam); ``max_connections`` sizes the connection pool so that
    ``max_concurrency`` calls never queue inside httpx.
    """

    def __init__(
        self,
        config: LlmSection,
        *,
        api_key: str,
        max_connections: int = 10,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        register_secret(api_key)
        self.config = config
        self._sleep = sleep
        self._http = httpx.Client(
            timeout=config.timeout_seconds,
            limits=httpx.Limits(
                max_connections=max(max_connections, 1),
                max_keepalive_connections=max(max_connections, 1),
            ),
        )
        try:
            self._client = zhipuai.ZhipuAI(
                api_key=api_key,
                # None: the SDK reads ZHIPUAI_BASE_URL, else uses Zhipu's own endpoint.
                base_url=config.base_url or None,
                timeout=config.timeout_seconds,
                max_retries=0,
                http_client=self._http,
            )
        except Exception as exc:
            self._http.close()
            raise LlmError(f"cannot set up the LLM client ({type(exc).__name__})") from None

    @classmethod
    def from_config(
        cls,
        config: LlmSection,
        *,
        max_connections: int = 10,
        environ: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> LlmClient:
        """A client with the key read from the environment (LlmNotConfigured when absent)."""
        key = read_api_key(config, environ)
        return cls(config, api_key=key, max_connections=max_connections, sleep=sleep)

    @property
    def endpoint(self) -> str:
        """The endpoint, safe to log."""
        return describe_endpoint(self.config.base_url or None)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> LlmClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _backoff(self, retry: int, hint: float | None) -> float:
        base = self.config.retry_backoff_seconds * (2**retry)
        jittered = base * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not crypto
        return max(jittered, hint or 0.0)

    def _request(self, messages: Sequence[dict[str, str]], max_tokens: int) -> Any:
        config = self.config
        extra: dict[str, Any] = {}
        if config.disable_thinking:
            extra["thinking"] = {"type": "disabled"}
        if config.json_mode:
            extra["response_format"] = {"type": "json_object"}
        return self._client.chat.completions.create(
            model=config.model,
            messages=[dict(m) for m in messages],
            temperature=config.temperature,
            max_tokens=max_tokens,
            stream=False,
            **extra,
        )

    def complete(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int | None = None
    ) -> LlmAnswer:
        """One chat completion; retries transient failures, raises an LlmError otherwise.

        Our exceptions are raised outside the SDK's ``except`` blocks, so they carry no
        ``__context__``: the SDK's exceptions quote the server's answer, which may echo the
        key, and must not travel along with ours.
        """
        limit = max_tokens or self.config.max_output_tokens
        retries = self.config.max_retries
        problem = "no attempt made"
        for attempt in range(retries + 1):
            attempts = attempt + 1
            outcome = self._attempt(messages, limit, attempts)
            if isinstance(outcome, LlmAnswer):
                return outcome
            if isinstance(outcome, LlmError):
                raise outcome
            problem, hint = outcome
            if attempt < retries:
                self._sleep(self._backoff(attempt, hint))
        raise LlmUnavailable(
            f"the LLM endpoint {self.endpoint} is unavailable: {problem} "
            f"(after {retries + 1} attempt{'s' if retries else ''})",
            attempts=retries + 1,
        )

    def _attempt(
        self, messages: Sequence[dict[str, str]], limit: int, attempts: int
    ) -> LlmAnswer | LlmError | tuple[str, float | None]:
        """One HTTP attempt: the answer, a final error, or (problem, retry hint) to retry."""
        try:
            completion = self._request(messages, limit)
        except zhipuai.APIStatusError as exc:
            status = exc.status_code
            if status in AUTH_STATUS:
                return LlmAuthError(
                    f"the LLM endpoint {self.endpoint} refused the API key (HTTP {status}); "
                    f"check the key in {self.config.api_key_env}",
                    attempts=attempts,
                )
            if status not in RETRYABLE_STATUS and status < 500:
                return LlmRequestRejected(
                    f"the LLM endpoint {self.endpoint} rejected the request "
                    f"(HTTP {status}{_server_detail(exc)})",
                    attempts=attempts,
                )
            return f"HTTP {status}{_server_detail(exc)}", _retry_after(exc)
        except zhipuai.APITimeoutError:
            return f"no answer within {self.config.timeout_seconds:g} s", None
        except zhipuai.APIConnectionError as exc:
            return _connection_problem(exc), None
        except (zhipuai.APIResponseValidationError, json.JSONDecodeError, UnicodeError):
            return LlmBadAnswer(
                f"the LLM endpoint {self.endpoint} answered with a body that is not a chat "
                "completion (not JSON)",
                attempts=attempts,
            )
        except zhipuai.ZhipuAIError as exc:
            return LlmError(f"the LLM client failed ({type(exc).__name__})", attempts=attempts)
        return _answer_of(completion, self.config.model, attempts, self.endpoint)


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


def _answer_of(completion: Any, model: str, attempts: int, endpoint: str) -> LlmAnswer:
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


@dataclass
class _Usage:
    calls: int = 0
    tokens: int = 0
    reserved_calls: int = 0
    reserved_tokens: int = 0


@dataclass
class Budget:
    """Per-run caps on LLM calls and tokens, globally and per user (thread-safe).

    A unit of work first :meth:`reserve`\\ s its estimated calls and tokens (an upper bound);
    when it is done it :meth:`settle`\\ s with what it actually used. Work that cannot reserve
    waits for the next run.
    """

    max_calls: int
    max_tokens: int
    max_calls_per_user: int
    max_tokens_per_user: int
    total: _Usage = field(default_factory=_Usage)
    users: dict[str, _Usage] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _fits(self, usage: _Usage, calls: int, tokens: int, max_calls: int, max_tok: int) -> bool:
        return (
            usage.calls + usage.reserved_calls + calls <= max_calls
            and usage.tokens + usage.reserved_tokens + tokens <= max_tok
        )

    def reserve(self, user_id: str, calls: int, tokens: int) -> bool:
        """Set aside ``calls`` and ``tokens`` for ``user_id``; False (nothing reserved) if over."""
        with self._lock:
            user = self.users.setdefault(user_id, _Usage())
            if not (
                self._fits(self.total, calls, tokens, self.max_calls, self.max_tokens)
                and self._fits(
                    user, calls, tokens, self.max_calls_per_user, self.max_tokens_per_user
                )
            ):
                return False
            for usage in (self.total, user):
                usage.reserved_calls += calls
                usage.reserved_tokens += tokens
            return True

    def settle(
        self, user_id: str, reserved_calls: int, reserved_tokens: int, calls: int, tokens: int
    ) -> None:
        """Release a reservation and record what was actually used."""
        with self._lock:
            user = self.users.setdefault(user_id, _Usage())
            for usage in (self.total, user):
                usage.reserved_calls -= reserved_calls
                usage.reserved_tokens -= reserved_tokens
                usage.calls += calls
                usage.tokens += tokens

    def remaining(self, user_id: str) -> tuple[int, int]:
        """Calls and tokens ``user_id`` could still reserve in this run."""
        with self._lock:
            user = self.users.get(user_id, _Usage())
            calls = min(
                self.max_calls - self.total.calls - self.total.reserved_calls,
                self.max_calls_per_user - user.calls - user.reserved_calls,
            )
            tokens = min(
                self.max_tokens - self.total.tokens - self.total.reserved_tokens,
                self.max_tokens_per_user - user.tokens - user.reserved_tokens,
            )
            return max(calls, 0), max(tokens, 0)
