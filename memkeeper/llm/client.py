"""The LLM client: chat completions through the ``zhipuai`` SDK, with our own retries.

``zhipuai`` and ``httpx`` are imported when a client is created, not when this module is:
importing :mod:`memkeeper.llm` (or the summarize job, or the job registry) costs neither.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memkeeper.config import LlmSection
from memkeeper.llm.answer import LlmAnswer, answer_of
from memkeeper.llm.endpoint import describe_endpoint, read_api_key
from memkeeper.llm.errors import LlmError, LlmUnavailable
from memkeeper.llm.retries import Retry, backoff, classify
from memkeeper.logs import register_secret

if TYPE_CHECKING:
    import httpx
    import zhipuai


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
        import httpx  # deferred: only a run that calls the LLM pays for the SDK
        import zhipuai

        register_secret(api_key)
        self.config = config
        self._sleep = sleep
        self._http: httpx.Client = httpx.Client(
            timeout=config.timeout_seconds,
            limits=httpx.Limits(
                max_connections=max(max_connections, 1),
                max_keepalive_connections=max(max_connections, 1),
            ),
        )
        try:
            self._client: zhipuai.ZhipuAI = zhipuai.ZhipuAI(
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
                self._sleep(backoff(self.config, attempt, hint))
        raise LlmUnavailable(
            f"the LLM endpoint {self.endpoint} is unavailable: {problem} "
            f"(after {retries + 1} attempt{'s' if retries else ''})",
            attempts=retries + 1,
        )

    def _attempt(
        self, messages: Sequence[dict[str, str]], limit: int, attempts: int
    ) -> LlmAnswer | LlmError | Retry:
        """One HTTP attempt: the answer, a final error, or (problem, retry hint) to retry."""
        try:
            completion = self._request(messages, limit)
        except Exception as exc:
            outcome = classify(exc, config=self.config, endpoint=self.endpoint, attempts=attempts)
            if outcome is None:
                raise  # not the SDK's: a bug, with its own traceback
            return outcome
        return answer_of(completion, self.config.model, attempts, self.endpoint)
