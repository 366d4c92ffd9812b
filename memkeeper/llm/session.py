"""What the chat client and the embedder share: the GLM SDK (``zai-sdk`` or ``zhipuai``, see
:mod:`memkeeper.llm.sdk`) over a pooled httpx client, the endpoint as it may be logged,
closing, and our own bounded retry loop.

The SDK and ``httpx`` are imported when a session is created, not when this module is.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Self

from memkeeper.config import LlmSection
from memkeeper.llm import sdk
from memkeeper.llm.endpoint import describe_endpoint, resolve_base_url
from memkeeper.llm.errors import LlmError, LlmUnavailable
from memkeeper.llm.retries import backoff
from memkeeper.logs import register_secret

if TYPE_CHECKING:
    import httpx


class SdkSession:
    """The SDK client (no retries of its own) over an httpx pool of ``max_connections``.

    ``label`` names the endpoint in messages ("LLM", "embeddings"); ``sleep`` is the backoff
    wait (a test seam). ``config.timeout_seconds`` and ``config.max_retries`` apply.
    """

    def __init__(
        self,
        config: LlmSection,
        *,
        api_key: str,
        label: str,
        max_connections: int,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import httpx  # deferred: only a run that calls the model pays for the SDK

        register_secret(api_key)
        chosen = sdk.load()
        self.config = config
        self.label = label
        self._sleep = sleep
        self._http: httpx.Client = httpx.Client(
            timeout=config.timeout_seconds,
            limits=httpx.Limits(
                max_connections=max(max_connections, 1),
                max_keepalive_connections=max(max_connections, 1),
            ),
        )
        try:
            self._client: Any = sdk.make_client(
                chosen,
                api_key=api_key,
                base_url=resolve_base_url(config.base_url or None),
                timeout=config.timeout_seconds,
                http_client=self._http,
            )
        except Exception as exc:
            self._http.close()
            raise LlmError(f"cannot set up the {label} client ({type(exc).__name__})") from None

    @property
    def endpoint(self) -> str:
        """The endpoint, safe to log."""
        return describe_endpoint(self.config.base_url or None)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def close_when_unused(self) -> None:
        """Close the connection pool once nothing holds this session any more: for a shared
        session its owner lets go of while another thread may still be calling through it."""
        weakref.finalize(self, self._http.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _with_retries(self, attempt: Callable[[int], Any], retries: int | None = None) -> Any:
        """Call ``attempt(attempts_so_far)`` until it returns a result or an LlmError.

        ``attempt`` returns the result, an :class:`LlmError` (raised at once), or a
        ``(problem, retry-after hint)`` pair: waited on with backoff and tried again, up to
        ``retries`` times (``config.max_retries`` unless given: one call's own). Our
        exceptions are raised outside the SDK's ``except`` blocks, so they carry no
        ``__context__`` quoting the server (which may echo the key).
        """
        retries = self.config.max_retries if retries is None else retries
        problem = "no attempt made"
        for number in range(retries + 1):
            outcome = attempt(number + 1)
            if isinstance(outcome, LlmError):
                raise outcome
            if not isinstance(outcome, tuple):
                return outcome
            problem, hint = outcome
            if number < retries:
                self._sleep(backoff(self.config, number, hint))
        raise LlmUnavailable(
            f"the {self.label} endpoint {self.endpoint} is unavailable: {problem} "
            f"(after {retries + 1} attempt{'s' if retries else ''})",
            attempts=retries + 1,
        )
