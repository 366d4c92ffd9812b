"""Extraction's first two sieves (seed 003 §3.2): worth keeping? which kind, under which key?

Pure work over the gate's candidates and the session's messages; the third sieve (conflict
with what is stored) runs inside the summary's commit (:mod:`memkeeper.summarize.extract_commit`).

**Sieve 1, worth keeping.** Dropped and counted (``dropped_<reason>`` in the run's stats):

* ``low_confidence``: the model's confidence is below ``min_confidence`` (default 0.7);
* ``not_lasting``: the model says its scope is this session, or every message it cites
  speaks of this session ("this time", "这次", "today"...) and none of lasting ("from now on",
  "以后", "always", "记住"...; the lists are :mod:`~memkeeper.summarize.extract_prompt`);
* ``mood``: a kind other than fact, preference or decision (a mood, a remark), or a key or
  value about a mood or feeling;
* ``not_from_user``: none of the cited messages is the user's (what the assistant said is
  not what the user stated).

**Sieve 2, which kind.** A preference stays a preference; a fact or a decision is a fact. The
key is normalized so that the same thing said twice gets the same key: NFKC (full-width
letters and digits become half-width), case-folded, every run of characters other than
letters and digits becomes one ``_``, leading and trailing ``_`` dropped: ``Report Format``,
``report-format`` and the same in full-width letters are all ``report_format``.

Candidates with the same key in one session are one statement: the newest (by its latest
message) wins; earlier ones with the same value add their messages to it, those with another
value were changed within the session (``dropped_changed_in_session``). A value stated in two
or more of the user's messages is *confirmed* (seed 003 §4.1): its confidence is raised to
:data:`CONFIRMED_CONFIDENCE`. One statement is a model's reading of the user's words, at most
:data:`STATED_ONCE_CONFIDENCE`, so that a later confirmation can raise it.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memkeeper.summarize.extract_gate import Candidate
from memkeeper.summarize.extract_prompt import (
    KINDS_ASKED,
    LASTING_MARKERS,
    MOOD_MARKERS,
    SESSION_MARKERS,
)
from memkeeper.summarize.transcript import SourceMessage

CONFIRMED_CONFIDENCE = 0.95
"""Confidence of a value the user stated twice, or again later (seed 003: stated ≈ 0.95)."""

STATED_ONCE_CONFIDENCE = 0.9
"""Highest confidence of a value extracted from one statement."""

_NOT_WORD = re.compile(r"[\W_]+")


@dataclass(frozen=True)
class Extracted:
    """A candidate through sieves 1 and 2: what sieve 3 remembers (or not)."""

    kind: str
    key: str
    value: str
    confidence: float
    message_ids: tuple[int, ...]
    stated_at: str
    """Stored time of the latest message stating it (what "newer than stored" compares)."""
    confirmed: bool
    asked_kind: str


def normalize_key(key: str) -> str:
    """The documented key rule: NFKC, case-folded, non-alphanumeric runs to one ``_``."""
    text = unicodedata.normalize("NFKC", key).casefold()
    return _NOT_WORD.sub("_", text).strip("_")


def _has(text: str, markers: Sequence[str]) -> bool:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return any(marker in folded for marker in markers)


def session_only(texts: Sequence[str]) -> bool:
    """Whether every text speaks of this session only and none of something lasting."""
    return bool(texts) and all(
        _has(text, SESSION_MARKERS) and not _has(text, LASTING_MARKERS) for text in texts
    )


def _drop_reason(
    candidate: Candidate, said: Sequence[SourceMessage], min_confidence: float
) -> str | None:
    if candidate.kind not in KINDS_ASKED or _has(
        f"{candidate.key} {candidate.value}", MOOD_MARKERS
    ):
        return "mood"
    if not said:
        return "not_from_user"
    if candidate.confidence < min_confidence:
        return "low_confidence"
    if candidate.scope != "lasting" or session_only([m.content for m in said]):
        return "not_lasting"
    return None


def sift(
    candidates: Sequence[Candidate],
    messages: Mapping[int, SourceMessage],
    *,
    min_confidence: float,
) -> tuple[list[Extracted], Counter[str]]:
    """Sieves 1 and 2: the candidates worth keeping, one per key, and what was dropped why."""
    dropped: Counter[str] = Counter()
    kept: dict[str, list[tuple[Candidate, tuple[SourceMessage, ...]]]] = {}
    for candidate in candidates:
        said = tuple(
            messages[i]
            for i in candidate.message_ids
            if i in messages and messages[i].role == "user"
        )
        reason = _drop_reason(candidate, said, min_confidence)
        key = normalize_key(candidate.key)
        if reason is None and not key:
            reason = "no_key"
        if reason is not None:
            dropped[reason] += 1
            continue
        kept.setdefault(key, []).append((candidate, said))
    result = []
    for key, group in kept.items():
        group.sort(key=lambda pair: max(m.id for m in pair[1]))
        winner, said = group[-1]
        ids = {m.id for m in said}
        stamps = [m.created_at for m in said]
        for other, other_said in group[:-1]:
            if other.value == winner.value:
                ids.update(m.id for m in other_said)
                stamps += [m.created_at for m in other_said]
            else:
                dropped["changed_in_session"] += 1
        confirmed = len(ids) >= 2
        confidence = (
            max(winner.confidence, CONFIRMED_CONFIDENCE)
            if confirmed
            else min(winner.confidence, STATED_ONCE_CONFIDENCE)
        )
        result.append(
            Extracted(
                kind="preference" if winner.kind == "preference" else "fact",
                key=key,
                value=winner.value,
                confidence=confidence,
                message_ids=tuple(sorted(ids)),
                stated_at=max(stamps),
                confirmed=confirmed,
                asked_kind=winner.kind,
            )
        )
    return result, dropped
