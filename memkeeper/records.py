"""Small typed value objects that memkeeper hands out.

Records are immutable snapshots: changing memory goes through :class:`memkeeper.MemoryStore`,
never through a record. Every time on a record is a timezone-aware UTC datetime.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
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


class _Record:
    """Shared helpers: a JSON-ready dict of the record."""

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class Memory(_Record):
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
    def from_image(cls, image: dict[str, Any]) -> Memory:
        """Build a record from a stored row / change-log image."""
        return cls(
            id=image["id"],
            user_id=image["user_id"],
            namespace=image["namespace"],
            kind=image["kind"],
            key=image["key"],
            value=image["value"],
            source=image["source"],
            confidence=float(image["confidence"]),
            state=image["state"],
            pinned=bool(image["pinned"]),
            ttl_days=image["ttl_days"],
            created_at=from_db(image["created_at"]),  # type: ignore[arg-type]
            updated_at=from_db(image["updated_at"]),  # type: ignore[arg-type]
            last_accessed_at=from_db(image["last_accessed_at"]),
            access_count=int(image["access_count"]),
            state_since=from_db(image["state_since"]),  # type: ignore[arg-type]
            cold_reason=image.get("cold_reason"),
            retired_at=from_db(image.get("retired_at")),
        )


@dataclass(frozen=True, slots=True)
class Message(_Record):
    """One conversation message of a session."""

    id: int
    user_id: str
    namespace: str
    session_id: str
    role: str
    content: str
    created_at: datetime
    summarized_at: datetime | None = None
    summary_id: str | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Message:
        return cls(
            id=row["id"],
            user_id=row["user_id"],
            namespace=row["namespace"],
            session_id=row["session_id"],
            role=row["role"],
            content=row["content"],
            created_at=from_db(row["created_at"]),  # type: ignore[arg-type]
            summarized_at=from_db(row["summarized_at"]),
            summary_id=row["summary_id"],
        )


@dataclass(frozen=True, slots=True)
class Episode(_Record):
    """One finished (or abandoned) task: the project-level event log of seed 003."""

    id: int
    user_id: str
    namespace: str
    task_name: str
    input_summary: str
    output_summary: str
    user_feedback: str
    status: str
    created_at: datetime

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Episode:
        return cls(
            id=row["id"],
            user_id=row["user_id"],
            namespace=row["namespace"],
            task_name=row["task_name"],
            input_summary=row["input_summary"],
            output_summary=row["output_summary"],
            user_feedback=row["user_feedback"],
            status=row["status"],
            created_at=from_db(row["created_at"]),  # type: ignore[arg-type]
        )


@dataclass(frozen=True, slots=True)
class Change(_Record):
    """One row of the change log: who changed which memory, when, why, from what to what."""

    id: int
    at: datetime
    actor: str
    run_id: str | None
    action: str
    memory_id: str | None
    user_id: str | None
    namespace: str | None
    reason: str
    source: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Change:
        return cls(
            id=row["id"],
            at=from_db(row["at"]),  # type: ignore[arg-type]
            actor=row["actor"],
            run_id=row["run_id"],
            action=row["action"],
            memory_id=row["memory_id"],
            user_id=row["user_id"],
            namespace=row["namespace"],
            reason=row["reason"],
            source=row["source"],
            before=json.loads(row["before"]) if row["before"] else None,
            after=json.loads(row["after"]) if row["after"] else None,
            details=json.loads(row["details"]) if row["details"] else {},
        )


@dataclass(frozen=True, slots=True)
class JobRun(_Record):
    """One run of one maintenance job."""

    run_id: str
    job: str
    trigger: str
    started_at: datetime
    finished_at: datetime | None
    status: str
    counts: dict[str, Any]
    error: str | None
    dry_run: bool

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> JobRun:
        return cls(
            run_id=row["run_id"],
            job=row["job"],
            trigger=row["trigger"],
            started_at=from_db(row["started_at"]),  # type: ignore[arg-type]
            finished_at=from_db(row["finished_at"]),
            status=row["status"],
            counts=json.loads(row["counts"]) if row["counts"] else {},
            error=row["error"],
            dry_run=bool(row["dry_run"]),
        )


@dataclass(frozen=True, slots=True)
class Context(_Record):
    """The ranked prompt prefill for one user: the records and the ready prompt text."""

    memories: list[Memory]
    text: str
