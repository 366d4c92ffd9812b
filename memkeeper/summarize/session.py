"""Sessions to summarize: which are due, what they hold, and what became of each.

A session (user, namespace, session id) with more than ``max_messages`` unsummarized messages
is due. Its summary is a ``note`` whose key is ``summary:<session id>`` (the unique index of
current keys keeps it to one current summary per session); the note's source names the
session and the message-id range it covers. Every read here is short and holds the store
lock; none writes.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from memkeeper.llm.errors import LlmError
from memkeeper.llm.usage import Usage
from memkeeper.storage import messages
from memkeeper.storage.base import Storage
from memkeeper.storage.transitions import Image
from memkeeper.store.entries import current_entry
from memkeeper.summarize.extract import Extracted
from memkeeper.summarize.transcript import SourceMessage

_RANGE = re.compile(r";messages=(\d+)-(\d+)$")


def summary_key(session_id: str) -> str:
    """The key of a session's summary note."""
    return f"summary:{session_id}"


def summary_source(session_id: str, first: int, last: int) -> str:
    """The source of a summary note: its session and the message-id range it covers."""
    return f"summary:session={session_id};messages={first}-{last}"


def covers_from(summary: Image | None, default: int) -> int:
    """The first message id a summary note covers, read from its source (else ``default``)."""
    if summary is None:
        return default
    found = _RANGE.search(summary["source"] or "")
    return int(found.group(1)) if found else default


@dataclass(frozen=True)
class DueSession:
    """A session with more unsummarized messages than ``max_messages``."""

    user_id: str
    namespace: str
    session_id: str
    unsummarized: int


@dataclass
class SessionResult:
    """What became of one due session in this run (before the commit)."""

    session: DueSession
    status: Literal["done", "skipped", "rejected", "failed"]
    reason: str = ""
    usage: Usage = field(default_factory=Usage)
    summary: str = ""
    message_ids: tuple[int, ...] = ()
    previous: Image | None = None
    calls_planned: int = 0
    chunks: int = 0
    complete: bool = True
    error: LlmError | None = None
    memories: list[Extracted] = field(default_factory=list)
    """What extraction's first two sieves kept (the third runs in the commit)."""
    dropped: Counter[str] = field(default_factory=Counter)
    """Candidates the first two sieves dropped, by reason."""
    written: Counter[str] = field(default_factory=Counter)
    """What the third sieve did in the commit (extracted, superseded, skipped...)."""


def due_sessions(storage: Storage, max_messages: int) -> list[DueSession]:
    """Due sessions, the one waiting longest first (through ``messages_unsummarized``)."""
    with storage.lock:
        rows = messages.due_sessions(storage.hot, max_messages)
    return [DueSession(r["user_id"], r["namespace"], r["session_id"], r["n"]) for r in rows]


def current_summary(storage: Storage, session: DueSession) -> Image | None:
    """The session's current summary note (active or pending review), if any.

    Takes no lock: call it under ``storage.lock`` (the commit does, inside its transaction).
    """
    return current_entry(
        storage, session.user_id, session.namespace, "note", summary_key(session.session_id)
    )


def unsummarized(storage: Storage, session: DueSession) -> tuple[list[SourceMessage], Image | None]:
    """The session's unsummarized messages, oldest first, and its current summary, read
    together."""
    with storage.lock:
        rows = messages.unsummarized(
            storage.hot, session.user_id, session.namespace, session.session_id
        )
        previous = current_summary(storage, session)
    found = [SourceMessage(r["id"], r["role"], r["content"], r["created_at"]) for r in rows]
    return found, previous


def oldest_unsummarized_ids(
    storage: Storage, session: DueSession, count: int
) -> tuple[list[int], Image | None]:
    """The ids of the session's ``count`` oldest unsummarized messages, and its current
    summary, read together (what a dry run reports)."""
    with storage.lock:
        ids = messages.oldest_unsummarized_ids(
            storage.hot, session.user_id, session.namespace, session.session_id, count
        )
        previous = current_summary(storage, session)
    return ids, previous
