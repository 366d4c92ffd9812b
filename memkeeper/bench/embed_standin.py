"""A local stand-in for an embeddings API, for the bench: an HTTP server on 127.0.0.1.

The index job's throughput depends on the endpoint's latency, not on memkeeper's own work,
so the bench measures it against a server with a known latency (100 ms per call by
default, like a nearby region of a hosted API) instead of the network. The stand-in answers
``POST {url}/embeddings`` in the OpenAI/Zhipu shape with one vector per input
(:func:`standin_vector`): a crude bag-of-words embedding — each of the text's terms
(:func:`standin_terms`: case-folded, lightly stemmed words, single CJK characters) adds a unit
direction seeded by its hash, and a term of a synonym group of the recall evaluation's
vocabulary (:data:`memkeeper.bench.eval_data.CONCEPTS`) adds its group's direction instead,
so "sick" and "allergic", or "住在" and "搬到", point the same way. Deterministic, with some
meaning and no more: a stand-in, not a model. It counts calls and the most calls in flight
at once, so the bench can report the concurrency it actually got.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import numpy as np

from memkeeper.bench.eval_data import CONCEPTS
from memkeeper.store.bm25 import stem

STANDIN_KEY = "standin.bench-only-key"
"""The API key the bench's config uses for the stand-in (it checks nothing)."""


_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_STANDIN_RUNS = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+)")


def standin_terms(text: str) -> list[str]:
    """The stand-in's features before synonyms: runs of letters and digits, case-folded
    and stemmed, and single CJK characters — its own, not search's tokenizer
    (:func:`memkeeper.store.bm25.terms`, the same rules but for English clitics, which search
    drops and the stand-in keeps): a change of search's terms
    must not change the embeddings that search and the dense baseline are measured with
    (the query's would change, the stored entries' not, and the baseline with them)."""
    out: list[str] = []
    for cjk, word in _STANDIN_RUNS.findall(text):
        out += list(cjk) if cjk else [stem(word.lower())]
    return out


def _direction(feature: str, dims: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.blake2b(feature.encode("utf-8", "surrogatepass")).digest()[:8])
    return np.random.default_rng(seed).standard_normal(dims)


@functools.lru_cache(maxsize=1)
def _concept_of() -> dict[str, str]:
    """Each synonym's term (as memkeeper tokenizes it): its group's name."""
    out = {}
    for concept, words in CONCEPTS.items():
        for word in words:
            for term in standin_terms(word):
                out[term] = f"concept:{concept}"
    return out


@functools.lru_cache(maxsize=65536)
def _standin(text: str, dims: int) -> tuple[float, ...]:
    concept_of = _concept_of()
    features = [concept_of.get(term, term) for term in standin_terms(text)] or [text]
    vector = np.zeros(dims)
    for feature in features:
        vector += _direction(feature, dims)
    norm = float(np.linalg.norm(vector))
    return tuple((vector / norm).tolist()) if norm else tuple(_direction(text, dims).tolist())


def standin_vector(text: str, dims: int) -> list[float]:
    """The stand-in's unit vector for ``text`` (see the module docstring)."""
    return list(_standin(text, dims))


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.begin()
        try:
            time.sleep(self.server.latency_s)
            if not self.path.endswith("/embeddings"):
                self._answer(404, {"error": {"message": f"no such path {self.path}"}})
                return
            inputs = body.get("input", [])
            texts = [inputs] if isinstance(inputs, str) else list(inputs)
            dims = int(body.get("dimensions") or 512)
            data = [
                {"object": "embedding", "index": i, "embedding": standin_vector(t, dims)}
                for i, t in enumerate(texts)
            ]
            tokens = sum(max(1, len(t) // 3) for t in texts)
            self._answer(
                200,
                {
                    "object": "list",
                    "model": body.get("model", ""),
                    "data": data,
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                },
            )
        finally:
            self.server.end()

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the bench prints its own progress."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, latency_s: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.latency_s = latency_s
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._count = threading.Lock()

    def begin(self) -> None:
        with self._count:
            self.calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def end(self) -> None:
        with self._count:
            self.in_flight -= 1


class EmbeddingStandIn:
    """The stand-in server, running while the context is open; ``url`` is its base URL."""

    def __init__(self, *, latency_s: float = 0.1) -> None:
        self._server = _Server(latency_s)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="embedding-standin", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def calls(self) -> int:
        return self._server.calls

    @property
    def max_in_flight(self) -> int:
        return self._server.max_in_flight

    def __enter__(self) -> EmbeddingStandIn:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
