"""The extraction gate: the ``memories`` of an answer, checked before any sieve sees them.

One bad candidate rejects the whole answer, and so the whole session: nothing of it is
written (no summary, no memory) and it is due again next run, where the refusal counts
toward parking (:mod:`memkeeper.summarize.parking`). Rejected, each with its ``problem``
(counted in the run's stats as ``rejected_<problem>``):

* ``malformed``: ``memories`` not a list, a candidate not an object, a field missing or of
  the wrong type, a confidence outside 0-1;
* ``too_many``: more candidates than ``[jobs.summarize.extract] max_candidates``;
* ``invented_message_ids``: a message id the call was not shown (not in the session);
* ``other_user``: a candidate naming another user or namespace than the session's;
* ``bad_key``: a key with control characters or SQL syntax (quotes, ``;``, comments,
  ``DROP TABLE``...), or longer than ``[limits] max_key_chars``;
* ``huge_value``: a value over ``max_value_bytes`` (and never over ``[limits]``), or one
  :func:`memkeeper.validation.text` refuses.

A missing ``memories`` field means "nothing durable" (models drop empty lists). Error
messages name the candidate's position and the problem, never its text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from memkeeper import validation
from memkeeper.errors import InvalidInput
from memkeeper.llm.errors import SummaryRejected

_KEY_CHARS = re.compile(r"^[\w .\-]+$")
_SQL = re.compile(
    r"--|/\*|\*/|\b(select|insert|update|delete|drop|union|alter|create|pragma|attach)\s+\w",
    re.I,
)
_ID = re.compile(r"^#?(\d{1,18})$")


class ExtractionRejected(SummaryRejected):
    """The extraction gate refused an answer; ``problem`` says why, in one word."""

    def __init__(self, problem: str, message: str) -> None:
        super().__init__(f"extraction rejected ({problem}): {message}")
        self.problem = problem


@dataclass(frozen=True)
class Candidate:
    """One memory the model proposes, as it gave it (checked, not yet sifted)."""

    key: str
    value: str
    kind: str
    scope: str
    confidence: float
    message_ids: tuple[int, ...]


@dataclass(frozen=True)
class GateLimits:
    """What the gate holds candidates to (from ``[jobs.summarize.extract]`` and ``[limits]``)."""

    max_candidates: int
    max_value_bytes: int
    max_key_chars: int


def _text(item: dict[str, Any], name: str, where: str) -> str:
    value = item.get(name)
    if isinstance(value, int | float) and not isinstance(value, bool) and name == "value":
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ExtractionRejected("malformed", f"{where}: {name!r} is not a non-empty string")
    return value.strip()


def check_key(key: str, where: str, max_chars: int) -> str:
    """A raw key the model gave, refused when it holds control characters or SQL."""
    if any(unicodedata.category(char).startswith("C") for char in key):
        raise ExtractionRejected("bad_key", f"{where}: the key contains a control character")
    if len(key) > max_chars:
        raise ExtractionRejected("bad_key", f"{where}: the key is over {max_chars} characters")
    folded = unicodedata.normalize("NFKC", key)  # full-width punctuation is punctuation
    if not _KEY_CHARS.match(folded) or _SQL.search(folded):
        raise ExtractionRejected("bad_key", f"{where}: the key contains SQL or punctuation")
    return key


def _message_ids(item: dict[str, Any], where: str, shown: Collection[int]) -> tuple[int, ...]:
    raw = item.get("message_ids")
    if not isinstance(raw, list) or not raw:
        raise ExtractionRejected("malformed", f"{where}: 'message_ids' is not a non-empty list")
    ids: list[int] = []
    for entry in raw:
        found = _ID.match(entry.strip()) if isinstance(entry, str) else None
        if isinstance(entry, int) and not isinstance(entry, bool):
            number = entry
        elif found:
            number = int(found.group(1))
        else:
            raise ExtractionRejected("malformed", f"{where}: a message id is not a number")
        if number not in shown:
            raise ExtractionRejected(
                "invented_message_ids", f"{where}: message #{number} is not in this session"
            )
        ids.append(number)
    return tuple(sorted(set(ids)))


def _owner(item: dict[str, Any], where: str, user_id: str, namespace: str) -> None:
    for name, expected in (("user_id", user_id), ("user", user_id), ("namespace", namespace)):
        if name in item and item[name] != expected:
            raise ExtractionRejected(
                "other_user", f"{where}: the candidate names another {name.split('_')[0]}"
            )


def _confidence(item: dict[str, Any], where: str) -> float:
    try:
        return validation.confidence(item.get("confidence"))
    except InvalidInput:
        raise ExtractionRejected(
            "malformed", f"{where}: 'confidence' is not a number from 0 to 1"
        ) from None


def _value(item: dict[str, Any], where: str, max_bytes: int) -> str:
    value = _text(item, "value", where)
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise ExtractionRejected(
            "huge_value", f"{where}: the value is {size} bytes (> {max_bytes})"
        )
    try:
        return validation.text("value", value, max_bytes=max_bytes)
    except InvalidInput as exc:
        raise ExtractionRejected("huge_value", f"{where}: {exc}") from None


def check_memories(
    data: dict[str, Any],
    *,
    shown: Collection[int],
    user_id: str,
    namespace: str,
    limits: GateLimits,
) -> list[Candidate]:
    """The candidates of an answer's ``memories``; ExtractionRejected for any bad one.

    ``shown`` are the ids of the messages the call was given.
    """
    raw = data.get("memories", [])
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise ExtractionRejected("malformed", "'memories' is not a list")
    if len(raw) > limits.max_candidates:
        raise ExtractionRejected(
            "too_many", f"{len(raw)} candidates (at most {limits.max_candidates})"
        )
    found = []
    for position, item in enumerate(raw, 1):
        where = f"memory {position}"
        if not isinstance(item, dict):
            raise ExtractionRejected("malformed", f"{where} is not an object")
        _owner(item, where, user_id, namespace)
        key = check_key(_text(item, "key", where), where, limits.max_key_chars)
        value = _value(item, where, limits.max_value_bytes)
        kind = _text(item, "kind", where).lower()
        scope = item.get("scope", "lasting")
        if not isinstance(scope, str):
            raise ExtractionRejected("malformed", f"{where}: 'scope' is not a string")
        found.append(
            Candidate(
                key=key,
                value=value,
                kind=kind,
                scope=scope.strip().lower() or "lasting",
                confidence=_confidence(item, where),
                message_ids=_message_ids(item, where, shown),
            )
        )
    return found
