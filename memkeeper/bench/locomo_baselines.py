"""The LoCoMo evaluation's baselines on the same turns as memkeeper's search
(:mod:`memkeeper.bench.locomo`): Okapi BM25 (k1 1.2, b 0.75, lowercased words and single CJK
characters), dense-only (cosine with the model's vectors, as the index job stored them) and
reciprocal-rank fusion of the two (BM25's list and dense's first 100, k 60)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memkeeper.config import Config
from memkeeper.storage.vectors import user_vectors
from memkeeper.store import MemoryStore, semantic

if TYPE_CHECKING:
    from memkeeper.bench.locomo import Conversation

DEPTH = 10
"""Turns kept of each ranking (recall up to @10)."""
RRF_K = 60
DENSE_DEPTH = 100


def baselines(
    path: Path, config: Config, conversation: Conversation, refs: dict[str, list[str]]
) -> dict[str, list[list[str]]]:
    """BM25, and with vectors dense and RRF, each question's first 10 turns."""
    texts = {memory_id: _text_of(conversation, ids[0]) for memory_id, ids in refs.items()}
    order = list(texts)
    docs = [Counter(_words(texts[i])) for i in order]
    out: dict[str, list[list[str]]] = {"bm25": []}
    scorer = _Bm25(docs)
    bm25_lists = []
    for q in conversation.questions:
        scores = scorer.scores(set(_words(q.question)))
        ranked = sorted((i for i in range(len(order)) if scores[i] > 0), key=lambda i: -scores[i])
        bm25_lists.append(ranked)
        out["bm25"].append(_turns(refs, [order[i] for i in ranked]))
    matrix, ids = _vectors(path, config, conversation.name)
    if matrix is None:
        return out
    import numpy as np

    position = {memory_id: n for n, memory_id in enumerate(ids)}
    embedder_queries = _query_vectors(config, [q.question for q in conversation.questions])
    out["dense"], out["rrf"] = [], []
    for q_vector, ranked in zip(embedder_queries, bm25_lists, strict=True):
        sims = matrix @ q_vector
        dense = [ids[i] for i in np.argsort(-sims, kind="stable")]
        out["dense"].append(_turns(refs, dense))
        fused: Counter[str] = Counter()
        for rank, i in enumerate(ranked, start=1):
            fused[order[i]] += 1 / (RRF_K + rank)
        for rank, memory_id in enumerate(dense[:DENSE_DEPTH], start=1):
            if memory_id in position:
                fused[memory_id] += 1 / (RRF_K + rank)
        out["rrf"].append(_turns(refs, [m for m, _ in fused.most_common()]))
    return out


def _text_of(conversation: Conversation, dia_id: str) -> str:
    return next(t.text for t in conversation.turns if t.dia_id == dia_id)


def _turns(refs: dict[str, list[str]], memory_ids: Sequence[str]) -> list[str]:
    return [d for m in memory_ids for d in refs.get(m, [])][:DEPTH]


def _vectors(path: Path, config: Config, user: str) -> tuple[Any, list[str]]:
    from memkeeper.store import vector_source

    found = vector_source.source(config)
    if not found.available:
        return None, []
    with MemoryStore(path, config=config) as store, store.storage.lock:
        ids, matrix = user_vectors(
            store.storage.hot, user_id=user, namespaces=("",), model=found.model, dims=found.dims
        )
    return (matrix, ids) if ids else (None, [])


def _query_vectors(config: Config, questions: list[str]) -> list[Any]:
    return [semantic.query_vector(config, q) for q in questions]


_WORD = re.compile(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff]")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class _Bm25:
    """Okapi BM25 (k1 1.2, b 0.75) over a fixed set of documents."""

    def __init__(self, docs: list[Counter[str]]) -> None:
        self.docs = docs
        self.lengths = [sum(d.values()) for d in docs]
        self.avgdl = sum(self.lengths) / max(1, len(docs))
        self.df = Counter(t for d in docs for t in d)

    def scores(self, terms: set[str]) -> list[float]:
        n = len(self.docs)
        idf = {t: math.log(1 + (n - self.df[t] + 0.5) / (self.df[t] + 0.5)) for t in terms}
        out = []
        for doc, length in zip(self.docs, self.lengths, strict=True):
            score = 0.0
            norm = 1.2 * (1 - 0.75 + 0.75 * length / self.avgdl)
            for t in terms:
                tf = doc.get(t, 0)
                if tf:
                    score += idf[t] * tf * 2.2 / (tf + norm)
            out.append(score)
        return out
