"""The LLM client: chat completions through the GLM SDK (:mod:`memkeeper.llm.sdk`), with our
own retries.

The SDK and ``httpx`` are imported when a client is created, not when this module is:
importing :mod:`memkeeper.llm` (or the summarize job, or the job registry) costs neither.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memkeeper.config import LlmSection
from memkeeper.llm.answer import LlmAnswer, answer_of
from memkeeper.llm.endpoint import read_api_key
from memkeeper.llm.errors import LlmError
from memkeeper.llm.retries import Retry, classify
from memkeeper.llm.session import SdkSession

if TYPE_CHECKING:
    pass


class LlmClient(SdkSession):
    """Chat completions through the GLM SDK, with bounded retries of our own.

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
        super().__init__(
            config, api_key=api_key, label="LLM", max_connections=max_connections, sleep=sleep
        )

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
        return self._with_retries(lambda attempts: self._attempt(messages, limit, attempts))

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
