"""Small typed value objects that memkeeper hands out.

Records are immutable snapshots: changing memory goes through :class:`memkeeper.MemoryStore`,
never through a record. Every time on a record is a timezone-aware UTC datetime. The records
beyond an entry and its search results (Message, Episode, Change, JobRun, Context) are
defined in :mod:`memkeeper.activity_records` and read from here as well.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any

from memkeeper.clock import from_db, to_db

KINDS = ("fact", "preference", "note")
KEYED_KINDS = ("fact", "preference")
HOT_STATES = ("active", "pending_review", "superseded")
COLD_STATE = "cold"
STATES = (*HOT_STATES, COLD_STATE)
ROLES = ("user", "assistant", "system", "tool")
EPISODE_STATUSES = ("completed", "cancelled", "draft", "failed")


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _json_or(empty: Any) -> Callable[[Any], Any]:
    return lambda text: json.loads(text) if text else empty


# How a stored column becomes a field, by the field's declared type (a string: annotations
# are postponed). Fields of any other type are taken as stored.
_FROM_STORED: dict[str, Callable[[Any], Any]] = {
    "datetime": from_db,
    "datetime | None": from_db,
    "dict[str, Any]": _json_or({}),
    "dict[str, Any] | None": _json_or(None),
    "bool": bool,
    "int": int,
    "float": float,
}


_Plan = tuple[tuple[str, Callable[[Any], Any] | None, bool], ...]
_PLANS: dict[type, _Plan] = {}
"""Each record class's fields as :meth:`Record.from_row` reads them: (name, conversion,
whether a stored None is converted too), made once per class: every recall and search
builds records, and reading the dataclass's fields at each row made one Memory 7.6 us
against 5.4 us now."""


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = tuple(
            (spec.name, _FROM_STORED.get(str(spec.type)), str(spec.type).startswith("dict"))
            for spec in fields(cls)  # type: ignore[arg-type]
        )
    return plan


class Record:
    """Shared helpers: building a record from a stored row, and a JSON-ready dict of it."""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Any:
        """Build the record from a stored row (a column missing from the row: the default)."""
        values: dict[str, Any] = {}
        for name, convert, converts_none in _plan(cls):
            try:
                stored = row[name]
            except (KeyError, IndexError):
                continue  # optional column (a hot row has no cold_reason): keep the default
            keeps_none = stored is None and not converts_none
            values[name] = stored if convert is None or keeps_none else convert(stored)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class Memory(Record):
    """One fact, preference or note, wherever it lives (hot file or cold storage)."""

    id: str
    user_id: str
    namespace: str
    kind: str
    key: str | None
    value: str
    source: str
    confidence: float
    state: str
    pinned: bool
    ttl_days: int | None
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime | None
    access_count: int
    state_since: datetime
    cold_reason: str | None = None
    retired_at: datetime | None = None

    @property
    def last_used_at(self) -> datetime:
        """The latest of created, re-confirmed and recalled: what TTLs count from."""
        if self.last_accessed_at and self.last_accessed_at > self.updated_at:
            return self.last_accessed_at
        return self.updated_at

    def to_image(self) -> dict[str, Any]:
        """The stored form of this record (the inverse of :meth:`from_image`)."""
        image: dict[str, Any] = {
            "id": self.id,
            "user_id": self.user_id,
            "namespace": self.namespace,
            "kind": self.kind,
            "key": self.key,
            "value": self.value,
            "source": self.source,
            "confidence": self.confidence,
            "state": self.state,
            "pinned": int(self.pinned),
            "ttl_days": self.ttl_days,
            "created_at": to_db(self.created_at),
            "updated_at": to_db(self.updated_at),
            "last_accessed_at": to_db(self.last_accessed_at) if self.last_accessed_at else None,
            "access_count": self.access_count,
            "state_since": to_db(self.state_since),
            "last_used_at": to_db(self.last_used_at),
        }
        if self.state == COLD_STATE:
            image["cold_reason"] = self.cold_reason
            image["retired_at"] = to_db(self.retired_at) if self.retired_at else None
        return image

    @classmethod
    def from_image(cls, image: Mapping[str, Any]) -> Memory:
        """Build a record from a stored row / change-log image."""
        return cls.from_row(image)


@dataclass(frozen=True, slots=True)
class SearchHit(Record):
    """One search result: the memory, its total score and each component of the score.

    ``similarity`` (cosine of the embeddings, 0-1; 0 without a vector), ``keyword`` (the
    keyword index's match, 0-1), ``confidence`` and ``recency`` (the recent-use bonus, 0-1)
    are the unweighted components; ``score`` is their weighted sum (``[search]`` weights).
    """

    memory: Memory
    score: float
    similarity: float
    keyword: float
    confidence: float
    recency: float


class SearchResults(list[SearchHit]):
    """The hits of one search, best first: a list, plus what the search cost.

    ``embed_ms`` is the query's own embedding call (0 when none was made: keyword-only, no
    vectors, or a cache hit), ``search_ms`` everything else (the vectors' dot product, the
    keyword index, ranking and marking the hits used). ``semantic`` says whether similarity
    took part; when it did not, the search was keyword-only, and ``keyword_only`` says why
    in words: no model (and how to get it), no key, vectors not built yet (how many of the
    entries are embedded), or the embedder failing ("" when similarity took part).
    """

    embed_ms: float = 0.0
    search_ms: float = 0.0
    semantic: bool = False
    keyword_only: str = ""

    def timing(self) -> dict[str, Any]:
        """The cost as a JSON-ready dict."""
        return {
            "embed_ms": round(self.embed_ms, 2),
            "search_ms": round(self.search_ms, 2),
            "semantic": self.semantic,
        }


_ELSEWHERE = frozenset({"Change", "Context", "Episode", "JobRun", "Message"})
"""Records defined in :mod:`memkeeper.activity_records`, read from here too: each dataclass
costs about a millisecond to build at import, and ``recall`` needs only :class:`Memory`."""


def __getattr__(name: str) -> Any:
    if name in _ELSEWHERE:
        from memkeeper import activity_records

        return getattr(activity_records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
