"""The LoCoMo retrieval evaluation: memkeeper's search on long real conversations.

LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0, not shipped: the bench takes the path of the
public ``locomo10.json``, or of a directory of one conversation per ``*.json``) holds long
conversations between two people over many dated sessions, and questions whose evidence is a
list of turns (``dia_id`` ``D<session>:<turn>``). For each conversation the bench stores each
turn as one note of its own user, ``"<speaker>: <text>"`` (plus ``" [image: <caption>]"``
for a shared photo), written at its session's date; embeds them with the index job; and asks
every question through ``search`` (limit 10). recall@k is |evidence ∩ first k| / |evidence|,
averaged over the questions of categories 1-4 (multi-hop, temporal, open-domain,
single-hop); category 5 (adversarial: the answer is not in the conversation, the evidence
is the turn the question twists) is reported apart.

Systems, each on the same turns: memkeeper ``keyword`` (no vectors) and ``hybrid`` (with
each model's vectors); baselines ``bm25`` (Okapi BM25, k1 1.2, b 0.75, lowercased words),
``dense`` (cosine with the same model's vectors) and ``rrf`` (reciprocal-rank fusion of BM25
and dense's first 100, k 60). Questions are asked one after the other on a copy of the store,
so hits are marked used as an agent's would be.

A few evidence ids are malformed in the public data (``"D8:6; D9:17"`` in one string,
``"D:11:26"``, ``"D30:05"``): they are split and normalized; ids that name no turn are
dropped and counted (``evidence_dropped``); a question left without evidence is skipped.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memkeeper.bench.locomo_baselines import baselines
from memkeeper.bench.measure import quantile
from memkeeper.clock import fixed
from memkeeper.config import Config
from memkeeper.maintenance.runner import run_once
from memkeeper.store import MemoryStore, semantic

KS = (1, 3, 5, 10)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ANSWERED = (1, 2, 3, 4)
"""The categories whose recall is the overall figure (5 is reported apart)."""
MAX_INDEX_RUNS = 50


@dataclass(frozen=True)
class Turn:
    dia_id: str
    text: str
    when: datetime


@dataclass(frozen=True)
class Question:
    question: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    name: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    dropped: int
    """Evidence ids that name no turn."""


_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_WHEN = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", re.I)
_MONTHS = {
    month: number
    for number, month in enumerate(
        (
            *("january", "february", "march", "april", "may", "june", "july"),
            *("august", "september", "october", "november", "december"),
        ),
        start=1,
    )
}


def evidence_ids(raw: Sequence[str]) -> list[str]:
    """The normalized ``D<n>:<m>`` ids of one question's evidence strings."""
    return [f"D{int(a)}:{int(b)}" for item in raw for a, b in _EVIDENCE.findall(str(item))]


def session_time(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as an aware datetime (UTC)."""
    found = _WHEN.search(text or "")
    if not found:
        raise ValueError(f"not a LoCoMo session date: {text!r}")
    hour, minute, half, day, month, year = found.groups()
    hour_24 = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return datetime(int(year), _MONTHS[month.lower()], int(day), hour_24, int(minute), tzinfo=UTC)


def load(path: Path) -> list[Conversation]:
    """The conversations of ``path``: a JSON file (one conversation, or a list of them, each
    with its ``conversation`` object as in the public file) or a directory of such files."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    out: list[Conversation] = []
    for file in files:
        data = json.loads(file.read_text("utf-8"))
        items = data if isinstance(data, list) else [data]
        for n, item in enumerate(items):
            name = str(
                item.get("sample_id") or (file.stem if len(items) == 1 else f"{file.stem}-{n}")
            )
            out.append(_conversation(name, item))
    if not out:
        raise ValueError(f"{path}: no LoCoMo conversation found")
    return out


def _conversation(name: str, item: dict[str, Any]) -> Conversation:
    body = item.get("conversation", item)
    turns: list[Turn] = []
    sessions = sorted(
        (int(k.split("_")[1]), v)
        for k, v in body.items()
        if re.fullmatch(r"session_\d+", k) and isinstance(v, list)
    )
    for number, session in sessions:
        when = session_time(body.get(f"session_{number}_date_time", ""))
        for turn in session:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [image: {turn['blip_caption']}]"
            (dia_id,) = evidence_ids([turn["dia_id"]]) or [str(turn["dia_id"])]
            turns.append(Turn(dia_id, text, when))
    known = {t.dia_id for t in turns}
    questions, dropped = [], 0
    for qa in item.get("qa", []):
        ids = evidence_ids(qa.get("evidence", []))
        kept = tuple(dict.fromkeys(i for i in ids if i in known))
        dropped += len(ids) - len([i for i in ids if i in known])
        if kept:
            questions.append(Question(str(qa["question"]), int(qa["category"]), kept))
    return Conversation(name, tuple(turns), tuple(questions), dropped)


def keyword_only(config: Config) -> Config:
    """``config`` with no embedder at all: a local model at a path that does not exist."""
    search = config.search.model_copy(
        update={"embedder": "local", "local_model_path": "/nonexistent/memkeeper-keyword-only"}
    )
    return config.model_copy(update={"search": search})


def with_local_model(config: Config, path: str) -> Config:
    """``config`` embedding with the local model in directory ``path``."""
    search = config.search.model_copy(update={"embedder": "local", "local_model_path": path})
    return config.model_copy(update={"search": search})


def build(path: Path, config: Config, conversation: Conversation) -> dict[str, list[str]]:
    """Store the conversation's turns (each at its session's date) and embed them; the
    dia_ids each memory id holds (a turn repeated word for word may share a memory)."""
    semantic.reset()
    refs: dict[str, list[str]] = {}
    with MemoryStore(path, config=config, clock=fixed(conversation.turns[0].when)) as store:
        for turn in conversation.turns:
            store.clock = fixed(turn.when)
            memory = store.add_note(conversation.name, turn.text)
            refs.setdefault(memory.id, []).append(turn.dia_id)
        store.clock = fixed(conversation.turns[-1].when)
        for _ in range(MAX_INDEX_RUNS):
            (result,) = run_once(store, ["index"]).results
            if result.status != "ok" or not result.stats.get("more_stale"):
                break
    return refs


def ask(
    path: Path,
    config: Config,
    conversation: Conversation,
    refs: dict[str, list[str]],
    timings: dict[str, list[float]] | None = None,
) -> list[list[str]]:
    """Each question's first 10 hits (dia_ids), asked on a copy of ``path``; each search's
    query embedding and search ms (the embedding excluded) appended to ``timings``'
    ``embed_ms`` and ``search_ms`` when given."""
    copy = path.with_name(path.stem + "-ask.db")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.copy(path, copy)
    semantic.reset()
    if not semantic.can_embed(config):
        semantic.said_elsewhere()  # keyword-only on purpose: no warning
    out = []
    with MemoryStore(copy, config=config, clock=fixed(conversation.turns[-1].when)) as store:
        for q in conversation.questions:
            hits = store.search(conversation.name, q.question, limit=max(KS))
            if timings is not None:
                timings.setdefault("embed_ms", []).append(hits.embed_ms)
                timings.setdefault("search_ms", []).append(hits.search_ms)
            out.append([d for h in hits for d in refs.get(h.memory.id, [])][: max(KS)])
    return out


def recall(conversation: Conversation, lists: list[list[str]]) -> dict[str, Any]:
    """recall@k by category, overall (categories 1-4) and adversarial (5)."""
    by: dict[str, list[list[float]]] = {}
    for q, found in zip(conversation.questions, lists, strict=True):
        wanted = set(q.evidence)
        shares = [len(wanted & set(found[:k])) / len(wanted) for k in KS]
        by.setdefault(CATEGORIES.get(q.category, str(q.category)), []).append(shares)
        if q.category in ANSWERED:
            by.setdefault("overall", []).append(shares)
    return by


def summarize(per_question: dict[str, list[list[float]]]) -> dict[str, Any]:
    out = {}
    for name, rows in per_question.items():
        out[name] = {
            f"@{k}": round(sum(r[i] for r in rows) / len(rows), 3) for i, k in enumerate(KS)
        }
        out[name]["questions"] = len(rows)
    return out


def run_locomo(
    path: Path,
    config: Config,
    *,
    models: Sequence[tuple[str, Config]] = (),
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """The evaluation's figures: per system (keyword, and for each named model hybrid,
    dense and RRF; BM25), overall and per conversation."""
    conversations = load(path)
    runs = list(models) or [("configured", config)]
    pooled: dict[str, dict[str, list[list[float]]]] = {}
    per_conversation: dict[str, dict[str, Any]] = {}
    timings: dict[str, dict[str, list[float]]] = {}

    def add(system: str, conversation: Conversation, lists: list[list[str]]) -> None:
        found = recall(conversation, lists)
        for name, rows in found.items():
            pooled.setdefault(system, {}).setdefault(name, []).extend(rows)
        per_conversation.setdefault(conversation.name, {})[system] = summarize(found)

    with tempfile.TemporaryDirectory(prefix="memkeeper-locomo-") as tmp:
        for conversation in conversations:
            turns, questions = len(conversation.turns), len(conversation.questions)
            say(f"{conversation.name}: {turns} turns, {questions} questions")
            base = Path(tmp) / f"{_safe(conversation.name)}-keyword.db"
            refs = build(base, keyword_only(config), conversation)
            add(
                "memkeeper keyword",
                conversation,
                ask(
                    base,
                    keyword_only(config),
                    conversation,
                    refs,
                    timings.setdefault("memkeeper keyword", {}),
                ),
            )
            add(
                "bm25",
                conversation,
                baselines(base, keyword_only(config), conversation, refs)["bm25"],
            )
            for label, model_config in runs:
                say(f"{conversation.name}: embedding with {label}")
                db = Path(tmp) / f"{_safe(conversation.name)}-{_safe(label)}.db"
                refs = build(db, model_config, conversation)
                if not semantic.can_embed(model_config):
                    say(f"{label}: no embedder ({semantic.missing(model_config)}); skipped")
                    continue
                system = f"memkeeper hybrid {label}"
                add(
                    system,
                    conversation,
                    ask(db, model_config, conversation, refs, timings.setdefault(system, {})),
                )
                for name, lists in baselines(db, model_config, conversation, refs).items():
                    if name != "bm25":
                        add(f"{name} {label}", conversation, lists)
    return {
        "conversations": [c.name for c in conversations],
        "turns": sum(len(c.turns) for c in conversations),
        "questions": sum(len(c.questions) for c in conversations),
        "evidence_dropped": sum(c.dropped for c in conversations),
        "systems": {system: summarize(found) for system, found in pooled.items()},
        "per_conversation": per_conversation,
        "latency_ms": {system: _latency(found) for system, found in timings.items()},
    }


def _latency(timings: dict[str, list[float]]) -> dict[str, float]:
    """p50 and p90 of each timing (ms) over every question asked."""
    out: dict[str, float] = {}
    for name, values in timings.items():
        ordered = sorted(values)
        for p in (50, 90):
            at = quantile(ordered, p / 100) if ordered else 0.0
            out[f"{name.removesuffix('_ms')}_p{p}_ms"] = at
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60]


def table(figures: dict[str, Any]) -> str:
    """The figures for people: overall recall@k, adversarial @1 and @10, per category @10,
    per conversation @10."""
    lines = [
        f"LoCoMo retrieval: {len(figures['conversations'])} conversations, {figures['turns']} "
        f"turns, {figures['questions']} questions ({figures['evidence_dropped']} evidence ids "
        "naming no turn dropped); recall of the evidence turns",
        f"{'system':<34} {'@1':>6} {'@3':>6} {'@5':>6} {'@10':>6}  {'adv@1':>6} {'adv@10':>6}  "
        + " ".join(f"{CATEGORIES[c][:9]:>9}" for c in ANSWERED),
    ]
    for system, found in figures["systems"].items():
        overall = found.get("overall", {})
        adversarial = found.get("adversarial", {})
        adv = f"{adversarial.get('@1', '-'):>6} {adversarial.get('@10', '-'):>6}"
        cats = " ".join(f"{found.get(CATEGORIES[c], {}).get('@10', '-'):>9}" for c in ANSWERED)
        lines.append(
            f"{system:<34} "
            + " ".join(f"{overall.get(f'@{k}', '-'):>6}" for k in KS)
            + f"  {adv}  {cats}"
        )
    lines.append("latency per question, ms (the query embedding, then the search without it):")
    for system, found in figures.get("latency_ms", {}).items():
        lines.append(
            f"  {system}: embedding p50 {found.get('embed_p50_ms', 0.0)}, p90 "
            f"{found.get('embed_p90_ms', 0.0)}; search p50 {found.get('search_p50_ms', 0.0)}, "
            f"p90 {found.get('search_p90_ms', 0.0)}"
        )
    lines.append("per conversation, overall @10 (adversarial @10):")
    for name, systems in figures["per_conversation"].items():
        parts = [
            f"{system} {s.get('overall', {}).get('@10', '-')} "
            f"({s.get('adversarial', {}).get('@10', '-')})"
            for system, s in systems.items()
        ]
        lines.append(f"  {name}: " + "; ".join(parts))
    return "\n".join(lines)
