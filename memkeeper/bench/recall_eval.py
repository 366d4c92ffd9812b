"""The recall evaluation: memkeeper's search against plain baselines, fresh and aged.

On the generated set (:mod:`memkeeper.bench.eval_data`: six users, 240-280 memories each,
written over a year, English and Chinese), for each question with an answer, the rank of
its evidence among the first 10 hits; recall@k is the share of questions whose evidence is
in the first k. Systems, each on the same memories:

* ``keyword`` / ``hybrid`` — memkeeper's ``search`` without and with embeddings (the
  ``index`` job embeds every memory through the bench's local stand-in,
  :mod:`memkeeper.bench.embed_standin`), each on a store **fresh** (every memory written
  now, never used) and **aged** (written on its day over the past year, used on its days);
  questions are asked one after the other, as an agent would, so hits get marked used;
* baselines — ``bm25`` (Okapi BM25, k1 1.2, b 0.75, over lowercased ``\\w`` words and single
  CJK characters of key and value: the textbook version; equal scores in a neutral order,
  a hash of the memory's ref; ``bm25_written`` is the same with equal scores in the order
  the set was written, which puts each person's templated memories — every answer — before
  the fillers, a bias towards the evidence), ``dense`` (cosine with the
  stand-in's vectors) and ``rrf`` (reciprocal-rank fusion of those two, k 60). They know
  nothing of ages, so they have one figure.

Beside them, ``ties_expected``: recall@k *expected* over the order of equal scores (an
entry tied with t others for ranks r..r+t counts (k - r + 1) / (t + 1) of a question at k),
of the textbook BM25 and of memkeeper's own BM25 scorer
(:func:`memkeeper.store.bm25.score_all`) over the same memories: the comparison of the two
scorers that no tie-break, the baseline's hash or memkeeper's prior, makes a coin flip.

For questions that match nothing it reports the *no-match precision*: the share a system
answered with no hit at all (``no_answer_silent``; dense-only and RRF rank every entry, so 0).
With an API key for the configured endpoint, ``endpoint`` adds memkeeper's hybrid with the
real embeddings (fresh and aged). The stand-in knows only the set's synonyms: its "hybrid"
figures measure fusion with a crude embedding, not a real model's quality.
"""

from __future__ import annotations

import hashlib
import math
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from memkeeper.bench.embed_standin import EmbeddingStandIn, standin_vector
from memkeeper.bench.eval_data import EvalMemory, EvalQuestion, EvalSet, generate
from memkeeper.bench.search_eval import index_everything, without_key
from memkeeper.bench.semantic import _standin_key, standin_config
from memkeeper.clock import fixed, to_db
from memkeeper.config import Config
from memkeeper.llm.endpoint import read_api_key
from memkeeper.llm.errors import LlmNotConfigured
from memkeeper.storage.vectors import embedding_text
from memkeeper.store import MemoryStore, semantic
from memkeeper.store.bm25 import score_all
from memkeeper.store.semantic import embeddings_llm

KS = (1, 3, 10)
DEFAULT_SEED = 21
"""The seed of the set the README's figures are of."""
SIZES = {
    "full": dict(users=6, fillers_per_user=160, questions=40),
    "smoke": dict(users=3, fillers_per_user=40, questions=16),
}


def run_recall_eval(
    config: Config,
    *,
    size: str = "full",
    seed: int = DEFAULT_SEED,
    models: Sequence[tuple[str, Config]] = (),
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """The evaluation's figures (see the module docstring) on the set generated from
    ``seed`` (another seed: other people, things, ages and questions from the same
    templates — a check that a change helps beyond the one set it was studied on); with
    ``models`` (label, config of a local model), memkeeper's hybrid with each real model
    too, on the fresh store."""
    data = generate(seed=seed, **SIZES[size])  # type: ignore[arg-type]
    answered = [q for q in data.questions if q.expect is not None]
    figures: dict[str, Any] = {
        "size": size,
        "seed": seed,
        "users": len({m.user for m in data.memories}),
        "memories": len(data.memories),
        "questions": len(answered),
        "by_kind": dict(Counter(q.kind for q in data.questions)),
        "no_answer_questions": len(data.questions) - len(answered),
    }
    dims = config.search.embedding_dimensions
    say("baselines: BM25, dense, RRF")
    figures["baselines"] = baselines(data, dims)
    with tempfile.TemporaryDirectory(prefix="memkeeper-recall-eval-") as tmp:
        with EmbeddingStandIn(latency_s=0.0) as standin, _standin_key():
            standin_cfg = standin_config(config, standin.url)
            for age in ("fresh", "aged"):
                path = Path(tmp) / f"{age}.db"
                say(f"memkeeper, {age} store: writing {len(data.memories)} memories")
                refs = build_store(path, standin_cfg, data, aged=age == "aged")
                for mode in ("keyword", "hybrid"):
                    say(f"memkeeper {mode}, {age}")
                    run_cfg = standin_cfg if mode == "hybrid" else without_key(standin_cfg)
                    figures[f"{mode}_{age}"] = _ask(path, run_cfg, data, refs)
        figures["endpoint"] = _endpoint(config, data, Path(tmp), say)
        figures["models"] = {}
        for label, model_config in models:
            say(f"memkeeper hybrid with {label}, fresh")
            path = Path(tmp) / f"model-{len(figures['models'])}.db"
            refs = build_store(path, model_config, data, aged=False)
            figures["models"][label] = _ask(path, model_config, data, refs)
    return figures


def _endpoint(
    config: Config, data: EvalSet, tmp: Path, say: Callable[[str], None]
) -> dict[str, Any]:
    llm = embeddings_llm(config)
    try:
        read_api_key(llm)
    except LlmNotConfigured:
        return {"skipped": f"no API key: set {llm.api_key_env} to add the endpoint"}
    out: dict[str, Any] = {"model": config.search.embedding_model}
    for age in ("fresh", "aged"):
        path = tmp / f"endpoint-{age}.db"
        say(f"memkeeper hybrid with {config.search.embedding_model}, {age}")
        refs = build_store(path, config, data, aged=age == "aged")
        out[f"hybrid_{age}"] = _ask(path, config, data, refs)
    return out


def build_store(path: Path, config: Config, data: EvalSet, *, aged: bool) -> dict[str, str]:
    """Write the set's memories (on their days when ``aged``, else all now) and embed them
    with the index job; each memory's id by its ref."""
    refs: dict[str, str] = {}
    semantic.reset()
    with MemoryStore(path, config=config, clock=fixed(data.now), actor="bench") as store:
        for m in data.memories:
            store.clock = fixed(m.created if aged else data.now)
            refs[m.ref] = _write(store, m)
        if aged:
            _mark_uses(store, data.memories, refs)
        store.clock = fixed(data.now)
        index_everything(store)
    return refs


def _write(store: MemoryStore, m: EvalMemory) -> str:
    if m.kind == "note":
        return store.add_note(m.user, m.value, confidence=m.confidence).id
    assert m.key is not None
    return store.remember(m.user, m.key, m.value, kind=m.kind, confidence=m.confidence).id


def _mark_uses(store: MemoryStore, memories: Sequence[EvalMemory], refs: dict[str, str]) -> None:
    """Record each memory's past uses (its last use and how many), as recall would have."""
    rows = [
        (to_db(m.used[-1]), len(m.used), to_db(m.used[-1]), refs[m.ref]) for m in memories if m.used
    ]
    with store.storage.lock, store.storage.hot.conn as conn:
        conn.executemany(
            "UPDATE memories SET last_accessed_at = ?, access_count = ?,"
            " last_used_at = max(last_used_at, ?) WHERE id = ?",
            rows,
        )


def _ask(path: Path, config: Config, data: EvalSet, refs: dict[str, str]) -> dict[str, Any]:
    """Every question against a copy of ``path`` (hits get marked used, as in real use)."""
    copy = path.with_name(path.stem + "-run.db")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.copy(path, copy)
    semantic.reset()
    ranks: list[tuple[EvalQuestion, int | None]] = []
    silent = 0
    with MemoryStore(copy, config=config, clock=fixed(data.now), actor="bench") as store:
        for q in data.questions:
            hits = [h.memory.id for h in store.search(q.user, q.query, limit=max(KS))]
            if q.expect is None:
                silent += not hits
                continue
            wanted = refs[q.expect]
            ranks.append((q, hits.index(wanted) + 1 if wanted in hits else None))
    return _recall(ranks) | {"no_answer_silent": round(silent / _no_answers(data), 3)}


def _no_answers(data: EvalSet) -> int:
    return max(1, sum(q.expect is None for q in data.questions))


def _recall(ranks: Sequence[tuple[EvalQuestion, int | None]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in KS:
        out[f"recall@{k}"] = round(sum(r is not None and r <= k for _, r in ranks) / len(ranks), 3)
    languages = sorted({_language(q) for q, _ in ranks})
    out["recall_by_language"] = {
        language: {
            f"recall@{k}": round(
                sum(r is not None and r <= k for q, r in ranks if _language(q) == language)
                / sum(_language(q) == language for q, _ in ranks),
                3,
            )
            for k in KS
        }
        for language in languages
    }
    kinds = sorted({q.kind for q, _ in ranks})
    out["recall@10_by_kind"] = {
        kind: round(
            sum(r is not None for q, r in ranks if q.kind == kind)
            / sum(q.kind == kind for q, _ in ranks),
            3,
        )
        for kind in kinds
    }
    return out


def _language(question: EvalQuestion) -> str:
    """``en`` or ``zh``: the language of the question's user (``eval-zh-2``)."""
    return question.user.split("-")[1] if question.user.count("-") >= 2 else "?"


_WORD = re.compile(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff]")


def _plain_terms(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def baselines(data: EvalSet, dims: int) -> dict[str, Any]:
    """Okapi BM25, dense-only and their reciprocal-rank fusion, per user, over key + value."""
    import numpy as np

    ranks: dict[str, list[tuple[EvalQuestion, int | None]]] = {
        "bm25": [],
        "bm25_written": [],
        "dense": [],
        "rrf": [],
    }
    silent = 0
    expected: dict[str, Counter[int]] = {"bm25": Counter(), "keyword_scorer": Counter()}
    for user, memories in _by_user(data.memories):
        rows = [(m.ref, m.key, m.value) for m in memories]
        texts = [embedding_text(m.kind, m.key, m.value) for m in memories]
        docs = [Counter(_plain_terms(t)) for t in texts]
        lengths = [sum(d.values()) for d in docs]
        avgdl = sum(lengths) / len(lengths)
        df = Counter(t for d in docs for t in d)
        matrix = np.asarray([standin_vector(t, dims) for t in texts])
        neutral = [hashlib.sha256(m.ref.encode()).hexdigest() for m in memories]
        for q in (q for q in data.questions if q.user == user):
            terms = set(_plain_terms(q.query))
            scores = [
                _bm25(d, n, terms, df, len(docs), avgdl) for d, n in zip(docs, lengths, strict=True)
            ]
            matching = [i for i in range(len(docs)) if scores[i] > 0]
            # Equal scores in a neutral order (a hash of the ref); the write order, kept as
            # a second figure, puts the set's answers (written before the fillers) first.
            bm25 = sorted(matching, key=lambda i: (-scores[i], neutral[i]))
            written = sorted(matching, key=lambda i: -scores[i])
            sims = matrix @ np.asarray(standin_vector(q.query, dims))
            dense = list(np.argsort(-sims, kind="stable"))
            fused = Counter[int]()
            for ranking in (bm25, dense[:100]):
                for rank, i in enumerate(ranking, start=1):
                    fused[int(i)] += 1 / (60 + rank)
            rrf = [i for i, _ in fused.most_common()]
            if q.expect is None:
                silent += not bm25
                continue
            wanted = next(i for i, m in enumerate(memories) if m.ref == q.expect)
            textbook = {memories[i].ref: scores[i] for i in matching}
            _expected_at(expected["bm25"], textbook, q.expect)
            scorer = {found.id: found.score for found in score_all(rows, q.query)}
            _expected_at(expected["keyword_scorer"], scorer, q.expect)
            systems = (("bm25", bm25), ("bm25_written", written), ("dense", dense), ("rrf", rrf))
            for name, ranking in systems:
                top = [int(i) for i in ranking[: max(KS)]]
                ranks[name].append((q, top.index(wanted) + 1 if wanted in top else None))
    out = {name: _recall(r) for name, r in ranks.items()}
    out["bm25"]["no_answer_silent"] = round(silent / _no_answers(data), 3)
    for name in ("dense", "rrf"):  # they rank every entry: never silent
        out[name]["no_answer_silent"] = 0.0
    answered = max(1, sum(q.expect is not None for q in data.questions))
    out["ties_expected"] = {
        name: {f"recall@{k}": round(found[k] / answered, 3) for k in KS}
        for name, found in expected.items()
    }
    return out


def _expected_at(into: Counter[int], scores: dict[str, float], wanted: str) -> None:
    """Add to ``into[k]`` the chance that ``wanted`` is in the first k when entries of equal
    score (within 1e-9, relative) come in any order."""
    score = scores.get(wanted, 0.0)
    if score <= 0:
        return
    above = sum(v > score * (1 + 1e-9) for v in scores.values())
    tied = sum(abs(v - score) <= score * 1e-9 for v in scores.values())
    for k in KS:
        into[k] += min(1.0, max(0.0, (k - above) / tied))


def _bm25(
    doc: Counter[str], length: int, terms: set[str], df: Counter[str], n: int, avgdl: float
) -> float:
    score = 0.0
    for t in terms:
        tf = doc.get(t, 0)
        if tf:
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            score += idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * length / avgdl))
    return score


def _by_user(memories: Sequence[EvalMemory]) -> Iterator[tuple[str, list[EvalMemory]]]:
    users: dict[str, list[EvalMemory]] = {}
    for m in memories:
        users.setdefault(m.user, []).append(m)
    yield from users.items()


def table(figures: dict[str, Any]) -> str:
    """The figures for people."""
    lines = [
        f"recall evaluation ({figures['size']}, seed {figures.get('seed', DEFAULT_SEED)}): "
        f"{figures['users']} users, "
        f"{figures['memories']} memories, {figures['questions']} questions "
        f"({', '.join(f'{k} {v}' for k, v in sorted(figures['by_kind'].items()))}); "
        "embeddings: the bench's local stand-in",
        f"{'system':<22} {'R@1':>6} {'R@3':>6} {'R@10':>6}   R@10 by kind; no-match precision",
    ]
    names = ("bm25", "bm25_written", "dense", "rrf")
    rows = [(f"baseline {n}", figures["baselines"][n]) for n in names if n in figures["baselines"]]
    rows += [
        (f"memkeeper {mode} {age}", figures[f"{mode}_{age}"])
        for mode in ("keyword", "hybrid")
        for age in ("fresh", "aged")
    ]
    endpoint = figures.get("endpoint", {})
    rows += [
        (f"endpoint hybrid {a}", endpoint[f"hybrid_{a}"])
        for a in ("fresh", "aged")
        if f"hybrid_{a}" in endpoint
    ]
    for name, f in rows:
        kinds = ", ".join(f"{k} {v}" for k, v in f["recall@10_by_kind"].items())
        silent = f.get("no_answer_silent")
        lines.append(
            f"{name:<22} {f['recall@1']:>6} {f['recall@3']:>6} {f['recall@10']:>6}   {kinds}"
            + (f"; {silent}" if silent is not None else "")
        )
    ties = figures["baselines"].get("ties_expected")
    if ties:
        lines.append(
            "equal scores in any order, expected R@1/R@3/R@10: "
            + "; ".join(
                f"{label} {' / '.join(str(ties[n][f'recall@{k}']) for k in KS)}"
                for n, label in (("bm25", "baseline bm25"), ("keyword_scorer", "memkeeper's"))
            )
        )
    if "skipped" in endpoint:
        lines.append(f"endpoint: skipped ({endpoint['skipped']})")
    for label, f in figures.get("models", {}).items():
        lines.append(
            f"memkeeper hybrid with {label}, fresh: R@1/R@3/R@10 {f['recall@1']} / "
            f"{f['recall@3']} / {f['recall@10']}"
        )
    rows_by_language = [
        ("keyword", figures["keyword_fresh"]),
        *((label, f) for label, f in figures.get("models", {}).items()),
    ]
    for name, f in rows_by_language:
        parts = [
            f"{language} {' / '.join(str(v[f'recall@{k}']) for k in KS)}"
            for language, v in f.get("recall_by_language", {}).items()
        ]
        lines.append(f"by language, {name} (fresh), R@1/R@3/R@10: " + "; ".join(parts))
    return "\n".join(lines)
