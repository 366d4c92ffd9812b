"""The records of what happens around memory entries: conversation messages, task episodes,
change-log rows, job runs, and the prompt prefill built from them.

Importable from :mod:`memkeeper.records` as well (which defines :class:`~memkeeper.records.
Memory` and the search results, and shares its :class:`~memkeeper.records.Record` helpers);
they live apart so that a memory command does not build their dataclasses at start-up
(see the performance page's "Start-up").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memkeeper.records import Memory, Record, SearchHit


@dataclass(frozen=True, slots=True)
class Message(Record):
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


@dataclass(frozen=True, slots=True)
class Episode(Record):
    """One finished (or abandoned) task: the project-level event log."""

    id: int
    user_id: str
    namespace: str
    task_name: str
    input_summary: str
    output_summary: str
    user_feedback: str
    status: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Change(Record):
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


@dataclass(frozen=True, slots=True)
class JobRun(Record):
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


@dataclass(frozen=True, slots=True)
class Context(Record):
    """The prompt prefill for one user: the slots (``memories``), the entries relevant to the
    query (``relevant``, when one was given), the namespace's recent episodes (oldest
    first), and the ready prompt text with a section for each."""

    memories: list[Memory]
    text: str
    relevant: list[SearchHit] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)
