"""A fake OpenAI-compatible embeddings server on 127.0.0.1, for the real zhipuai client.

``FakeEmbeddings`` answers ``POST {url}/embeddings`` with deterministic vectors from
:func:`fake_vector`: a hash-seeded projection of the text's character trigrams (and
characters), so texts sharing pieces get similar vectors and the same text always gets the
same one. It is a :class:`tests.fake_llm.FakeLLM` (same ``script``, ``requests``,
``max_in_flight``, ``delay``) whose default responder embeds; scripted failures:

* ``error(500)`` / ``error(401)`` (from :mod:`tests.fake_llm`), ``Reply(delay=...)`` for a
  timeout, and here: :func:`wrong_dimension`, :func:`nan_values`, :func:`fewer_vectors`;
* ``fake.fail_forever(reply_factory)`` answers every request with a failure.

Use :func:`embed_config` for a config pointing at it with short timeouts and backoff.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from typing import Any

from fake_llm import FakeLLM, Recorded, Reply

from memkeeper.config import Config

DIMS = 64
"""The dimension tests ask for (small, to keep the fake fast)."""


def _features(text: str) -> list[str]:
    folded = " ".join(text.lower().split())
    padded = f" {folded} "
    grams = [padded[i : i + 3] for i in range(max(len(padded) - 2, 1))]
    return grams + [c for c in folded if not c.isspace()]


def _direction(feature: str, dims: int) -> list[float]:
    digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=32).digest()
    out = []
    for i in range(dims):
        byte = digest[i % 32] ^ (i * 37 & 0xFF)
        out.append(1.0 if byte & 1 else -1.0)
    return out


def fake_vector(text: str, dims: int = DIMS) -> list[float]:
    """The fake's embedding of ``text``: a sum of hashed ±1 directions of its character
    trigrams and characters, L2-normalized. Deterministic; similar texts, similar vectors."""
    total = [0.0] * dims
    for feature in _features(text) or [""]:
        for i, value in enumerate(_direction(feature, dims)):
            total[i] += value
    norm = math.sqrt(sum(v * v for v in total)) or 1.0
    if norm == 1.0 and not any(total):
        total[0] = 1.0
    return [v / norm for v in total]


def embeddings_body(vectors: list[list[float]], *, model: str = "embedding-3") -> bytes:
    """An embeddings answer in the OpenAI/Zhipu shape (NaN written as JSON's NaN)."""
    body = {
        "object": "list",
        "model": model,
        "data": [
            {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)
        ],
        "usage": {
            "prompt_tokens": 7 * len(vectors),
            "completion_tokens": 0,
            "total_tokens": 7 * len(vectors),
        },
    }
    return json.dumps(body).encode()


def inputs_of(request: Recorded) -> list[str]:
    value = request.body.get("input", [])
    return [value] if isinstance(value, str) else list(value)


def dims_of(request: Recorded) -> int:
    return int(request.body.get("dimensions") or DIMS)


def embed_reply(request: Recorded) -> Reply:
    """The default answer: :func:`fake_vector` of each input, of the asked dimension."""
    if not request.path.endswith("/embeddings"):
        return Reply(status=404, body=b'{"error": {"message": "not here"}}')
    vectors = [fake_vector(text, dims_of(request)) for text in inputs_of(request)]
    return Reply(body=embeddings_body(vectors, model=request.body.get("model", "")))


def wrong_dimension(request: Recorded) -> Reply:
    vectors = [fake_vector(text, dims_of(request) + 1) for text in inputs_of(request)]
    return Reply(body=embeddings_body(vectors))


def nan_values(request: Recorded) -> Reply:
    vectors = [fake_vector(text, dims_of(request)) for text in inputs_of(request)]
    vectors[-1][0] = math.nan
    return Reply(body=embeddings_body(vectors))


def fewer_vectors(request: Recorded) -> Reply:
    vectors = [fake_vector(text, dims_of(request)) for text in inputs_of(request)]
    return Reply(body=embeddings_body(vectors[:-1]))


class FakeEmbeddings(FakeLLM):
    """The fake embeddings server (a context manager). ``fail_forever`` scripts failures."""

    def __init__(self, *, delay: float = 0.0) -> None:
        self.failure: Callable[[Recorded], Reply] | None = None
        super().__init__(self._respond, delay=delay)

    def fail_forever(self, failure: Callable[[Recorded], Reply] | None) -> None:
        """Answer every request with ``failure(request)`` (None: embed again)."""
        self.failure = failure

    def _respond(self, request: Recorded) -> Reply:
        if self.failure is not None:
            return self.failure(request)
        return embed_reply(request)

    def embedded_texts(self) -> list[str]:
        return [t for r in self.requests for t in inputs_of(r)]


def embed_config(url: str, *, search: dict[str, Any] | None = None, **llm: Any) -> Config:
    """A config whose LLM (and so embeddings) endpoint is the fake at ``url``."""
    section: dict[str, Any] = {
        "base_url": url,
        "timeout_seconds": 1.0,
        "max_retries": 1,
        "retry_backoff_seconds": 0.01,
    }
    section.update(llm)
    options = {"embedding_dimensions": DIMS}
    options.update(search or {})
    return Config.model_validate({"llm": section, "search": options})
