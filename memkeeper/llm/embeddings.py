"""Embeddings through the ``zhipuai`` SDK, with the chat client's retries and errors.

:class:`Embedder` posts lists of texts to ``{base_url}/embeddings``
(``client.embeddings.create``), so any OpenAI-compatible embeddings endpoint works by base
URL. The key, base URL, retries and error classification are the summarizer's
(:mod:`memkeeper.llm.retries`); the timeout is the caller's (a query's embedding waits a few
seconds, the index job longer).

Every answer is checked before anyone sees it: one vector per input, each of the asked
dimension, every component finite and not all zero. Anything else is :class:`LlmBadAnswer`
(final, not retried: the same request would get the same answer). Vectors come back as
float32 and L2-normalized, so similarity is a dot product.

``zhipuai``, ``httpx`` and ``numpy`` are imported when an embedder is created, not when this
module is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memkeeper.config import LlmSection
from memkeeper.llm.errors import LlmBadAnswer, LlmError
from memkeeper.llm.retries import Retry, classify
from memkeeper.llm.session import SdkSession

if TYPE_CHECKING:
    import numpy


class DimensionMismatch(LlmBadAnswer):
    """The endpoint's vectors have another dimension than ``[search] embedding_dimensions``:
    a configuration error, the same for every batch, so the index job fails on it."""

    def __init__(self, endpoint: str, *, expected: int, got: int, attempts: int) -> None:
        super().__init__(
            f"the embeddings endpoint {endpoint} returns vectors of {got} dimensions, but "
            f"[search] embedding_dimensions is {expected}: set embedding_dimensions = {got} "
            f"(or use a model that gives {expected})",
            attempts=attempts,
        )
        self.expected = expected
        self.got = got


@dataclass(frozen=True)
class Embedded:
    """One successful call: a vector per input (float32, unit length), and what it cost."""

    vectors: list[numpy.ndarray]
    attempts: int
    tokens: int

    @property
    def retries(self) -> int:
        return self.attempts - 1


class Embedder(SdkSession):
    """Embeddings of lists of texts; safe to share between threads (httpx's client is).

    ``sleep`` is the backoff wait (a test seam); ``max_connections`` sizes the pool so that
    that many concurrent calls never queue inside httpx; ``max_retries`` overrides
    ``[llm] max_retries`` (a query's embedding is tried once).
    """

    def __init__(
        self,
        config: LlmSection,
        *,
        api_key: str,
        model: str,
        dimensions: int,
        timeout_s: float,
        max_connections: int = 4,
        max_retries: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if dimensions <= 0:
            raise ValueError(f"dimensions must be positive, not {dimensions}")
        update: dict[str, Any] = {"timeout_seconds": timeout_s}
        if max_retries is not None:
            update["max_retries"] = max_retries
        self.model = model
        self.dimensions = dimensions
        # The same section with this embedder's timeout: classify() words timeouts with it.
        super().__init__(
            config.model_copy(update=update),
            api_key=api_key,
            label="embeddings",
            max_connections=max_connections,
            sleep=sleep,
        )

    def embed(self, texts: Sequence[str]) -> list[numpy.ndarray]:
        """One vector per text (float32, unit length); raises an LlmError otherwise."""
        return self.embed_counted(texts).vectors

    def embed_counted(
        self,
        texts: Sequence[str],
        *,
        timeout_s: float | None = None,
        max_retries: int | None = None,
    ) -> Embedded:
        """:meth:`embed`, with the attempts and tokens the call took.

        ``timeout_s`` and ``max_retries`` are this call's (the embedder's own unless given),
        so one pooled embedder serves a search (one short try) and the index job (the
        summarizer's timeout and retries) alike. Retries transient failures with the
        summarizer's backoff. Like the chat client, our exceptions are raised outside the
        SDK's ``except`` blocks, so they carry no ``__context__`` quoting the server (which
        may echo the key).
        """
        batch = [str(text) for text in texts]
        if not batch:
            return Embedded([], 0, 0)
        config = self.config
        if timeout_s is not None and timeout_s != config.timeout_seconds:
            config = config.model_copy(update={"timeout_seconds": timeout_s})
        return self._with_retries(
            lambda attempts: self._attempt(batch, attempts, config), max_retries
        )

    def _attempt(
        self, batch: list[str], attempts: int, config: LlmSection
    ) -> Embedded | LlmError | Retry:
        try:
            # The answer as plain JSON: the SDK's typed parsing builds a model object per
            # float (about 200 ms of CPU for 32 vectors of 512 dimensions, under the GIL),
            # which held the index job to a third of the throughput its concurrency allows.
            answer = self._client.embeddings.create(
                model=self.model,
                input=batch,
                dimensions=self.dimensions,
                disable_strict_validation=True,
                timeout=config.timeout_seconds,
            )
        except Exception as exc:
            outcome = classify(exc, config=config, endpoint=self.endpoint, attempts=attempts)
            if outcome is None:
                raise  # not the SDK's: a bug, with its own traceback
            return outcome
        vectors, problem = self._vectors_of(answer, len(batch))
        if isinstance(problem, int):
            return DimensionMismatch(
                self.endpoint, expected=self.dimensions, got=problem, attempts=attempts
            )
        if problem:
            return LlmBadAnswer(
                f"the embeddings endpoint {self.endpoint} answered with unusable vectors: "
                f"{problem}",
                attempts=attempts,
            )
        return Embedded(vectors, attempts, _tokens_of(answer))

    def _vectors_of(self, answer: Any, expected: int) -> tuple[list[numpy.ndarray], str | int]:
        """The answer's vectors in input order, normalized; or a problem in words (or, for
        vectors of another dimension, that dimension)."""
        import numpy as np

        data = _field(answer, "data")
        if not isinstance(data, list):
            return [], "no list of vectors"
        if len(data) != expected:
            return [], f"{len(data)} vectors for {expected} inputs"
        indexes = [_field(item, "index") for item in data]
        if all(isinstance(i, int) for i in indexes):
            if sorted(indexes) != list(range(expected)):
                return [], "vector indexes do not match the inputs"
            data = [item for _, item in sorted(zip(indexes, data, strict=True))]
        vectors = []
        for position, item in enumerate(data):
            try:
                vector = np.asarray(_field(item, "embedding"), dtype=np.float64)
            except (TypeError, ValueError):
                return [], f"vector {position} is not a list of numbers"
            if vector.ndim == 1 and vector.shape[0] > 0 and vector.shape[0] != self.dimensions:
                return [], int(vector.shape[0])
            if vector.ndim != 1 or vector.shape[0] != self.dimensions:
                return [], f"vector {position} is not a list of {self.dimensions} numbers"
            if not np.isfinite(vector).all():
                return [], f"vector {position} has NaN or infinite components"
            norm = float(np.linalg.norm(vector))
            if norm == 0.0 or not np.isfinite(norm):
                return [], f"vector {position} has no direction (all zero)"
            vectors.append((vector / norm).astype(np.float32))
        return vectors, ""


def _field(value: Any, name: str) -> Any:
    """``value[name]`` of a JSON object (None when absent or not an object)."""
    return value.get(name) if isinstance(value, dict) else None


def _tokens_of(answer: Any) -> int:
    usage = _field(answer, "usage")
    for name in ("total_tokens", "prompt_tokens"):
        value = _field(usage, name)
        if isinstance(value, int) and value >= 0:
            return value
    return 0
