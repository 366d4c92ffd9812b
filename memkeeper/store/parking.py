"""Parked sessions: where the summarize job keeps a session's refusals, in the change log.

A session the provider refuses (a content-filter 400, an answer the gate rejects) would fail
every run, forever, spending budget each time. Each counted refusal is one change-log row
(action ``session_failed``); after ``after_failures`` in a row since the session was last
summarized, one more row parks it (action ``park``); ``memkeeper summarize retry`` writes
``unpark``. The rows name the owner and, in their details, the session id, the count and
the last reason (the provider's or the gate's words, never the conversation's). They carry
no memory id and no image, so undo passes them by, ``log`` lists them, and forgetting a
user erases them with the rest.

A session is *parked* when the newest of its ``park`` and ``unpark`` rows, and of the
``summarize`` rows of its summary notes, is a ``park`` row less than ``retry_after_days``
old; once that has passed it is tried once more, and parked again at once if refused again.

This module is the one place that reads and writes that state (no schema of its own), so
that moving it to a table later changes nothing else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from memkeeper.clock import from_db, to_db
from memkeeper.storage import parking_rows
from memkeeper.storage.base import Storage
from memkeeper.storage.changelog import change_row, insert_changes
from memkeeper.storage.transaction import write_transaction
from memkeeper.store.entries import current_entry

FAILED = "session_failed"
PARK = "park"
UNPARK = "unpark"


@dataclass(frozen=True)
class SessionRef:
    """One conversation session: its owner and id."""

    user_id: str
    namespace: str
    session_id: str


@dataclass(frozen=True)
class ParkedSession:
    """A session parked by the summarize job, with its last reason and when it is retried."""

    user_id: str
    namespace: str
    session_id: str
    parked_at: datetime
    failures: int
    reason: str
    retry_at: datetime

    def parked(self, now: datetime) -> bool:
        """Whether it is still skipped at ``now`` (False once its retry is due)."""
        return now < self.retry_at

    @property
    def ref(self) -> SessionRef:
        return SessionRef(self.user_id, self.namespace, self.session_id)

    def to_dict(self, now: datetime) -> dict[str, Any]:
        return {
            "user_id": self.user_id,
            "namespace": self.namespace,
            "session_id": self.session_id,
            "parked_at": self.parked_at.isoformat(),
            "failures": self.failures,
            "reason": self.reason,
            "retry_at": self.retry_at.isoformat(),
            "retry_due": not self.parked(now),
        }


def _rows(storage: Storage, ref: SessionRef, actions: tuple[str, ...], after: int = 0) -> list[Any]:
    """The session's rows of these parking actions after change ``after``, oldest first.

    All three actions are asked for, then filtered: with a single ``action =`` SQLite walks
    the action index across every user instead of this user's rows.
    """
    rows = parking_rows.session_rows(
        storage.hot, (FAILED, PARK, UNPARK), after, ref.user_id, ref.namespace, ref.session_id
    )
    return [row for row in rows if row["action"] in actions]


def summary_key(session_id: str) -> str:
    """The key of a session's summary note (the same rule as
    :func:`memkeeper.summarize.session.summary_key`, which this layer cannot import)."""
    return f"summary:{session_id}"


def _last_success(storage: Storage, ref: SessionRef, after: int) -> int:
    """The id of the session's newest ``summarize`` row after change ``after`` (else 0).

    A success makes a new current summary note, so its row is found through that note (two
    index lookups); only when the session has no current note (it expired since) does this
    read the ``summarize`` rows written after ``after``.
    """
    note = current_entry(storage, ref.user_id, ref.namespace, "note", summary_key(ref.session_id))
    if note is not None:
        ids = [
            change_id
            for change_id, action in parking_rows.actions_of_memory(storage.hot, note["id"])
            if action == "summarize" and change_id > after
        ]
        return max(ids, default=0)  # a later success would have made a newer current note
    return parking_rows.last_summary(storage.hot, after, ref.user_id, ref.namespace, ref.session_id)


def _streak(storage: Storage, ref: SessionRef) -> tuple[list[Any], int]:
    """The session's failure/park/unpark rows since it was last summarized, and that row's id."""
    rows = _rows(storage, ref, (FAILED, PARK, UNPARK))
    if not rows:
        return [], 0
    success = _last_success(storage, ref, rows[0]["id"])
    return [row for row in rows if row["id"] > success], success


def consecutive_failures(storage: Storage, ref: SessionRef) -> int:
    """Counted refusals of the session since it was last summarized."""
    with storage.lock:
        rows, _ = _streak(storage, ref)
    return sum(1 for row in rows if row["action"] == FAILED)


def record_failure(
    storage: Storage,
    ref: SessionRef,
    *,
    reason: str,
    problem: str,
    after_failures: int,
    actor: str,
    run_id: str | None,
    now: datetime,
) -> int:
    """Log one counted refusal; park the session when it makes ``after_failures`` in a row.

    Returns the streak's length. One transaction: the count read is the count written.
    """
    with write_transaction(storage, users=[ref.user_id]) as storage_hot:
        rows, _ = _streak(storage, ref)
        failures = 1 + sum(1 for row in rows if row["action"] == FAILED)
        details = {
            "session_id": ref.session_id,
            "failures": failures,
            "problem": problem,
        }
        entries = [
            change_row(
                at=to_db(now),
                actor=actor,
                run_id=run_id,
                action=FAILED,
                reason=f"session {ref.session_id!r} not summarized ({failures} in a row): {reason}",
                before=None,
                after=None,
                user_id=ref.user_id,
                namespace=ref.namespace,
                details=details,
            )
        ]
        if failures >= after_failures:
            entries.append(
                change_row(
                    at=to_db(now),
                    actor=actor,
                    run_id=run_id,
                    action=PARK,
                    reason=f"parked session {ref.session_id!r} after {failures} refusals in a "
                    f"row; last: {reason}",
                    before=None,
                    after=None,
                    user_id=ref.user_id,
                    namespace=ref.namespace,
                    details={**details, "reason": reason},
                )
            )
        insert_changes(storage_hot, entries)
    return failures


def parked_sessions(
    storage: Storage, *, now: datetime, retry_after_days: float, include_due: bool = True
) -> list[ParkedSession]:
    """Sessions whose latest word is a ``park`` row, oldest parking first.

    ``include_due`` False leaves out those whose retry is due at ``now`` (what the jobs skip).
    """
    found: list[ParkedSession] = []
    with storage.lock:
        latest: dict[SessionRef, Any] = {}
        for row in parking_rows.rows_of_action(storage.hot, PARK):
            details = json.loads(row["details"] or "{}")
            ref = SessionRef(row["user_id"], row["namespace"], str(details.get("session_id")))
            latest[ref] = (row, details)
        for ref, (row, details) in latest.items():
            if _rows(storage, ref, (UNPARK,), row["id"]) or _last_success(storage, ref, row["id"]):
                continue
            parked_at = from_db(row["at"])
            assert parked_at is not None
            item = ParkedSession(
                user_id=ref.user_id,
                namespace=ref.namespace,
                session_id=ref.session_id,
                parked_at=parked_at,
                failures=int(details.get("failures", 0)),
                reason=str(details.get("reason", "")),
                retry_at=parked_at + timedelta(days=retry_after_days),
            )
            if include_due or item.parked(now):
                found.append(item)
    found.sort(key=lambda item: (item.parked_at, item.user_id, item.session_id))
    return found


def is_parked(storage: Storage, ref: SessionRef, *, now: datetime, retry_after_days: float) -> bool:
    """Whether summarize, extraction and merge skip this session at ``now``."""
    with storage.lock:
        rows = _rows(storage, ref, (PARK, UNPARK))
        if not rows or rows[-1]["action"] != PARK:
            return False
        last = rows[-1]
        if _last_success(storage, ref, last["id"]):
            return False
    parked_at = from_db(last["at"])
    assert parked_at is not None
    return now < parked_at + timedelta(days=retry_after_days)


def release(
    storage: Storage,
    refs: list[SessionRef],
    *,
    actor: str,
    now: datetime,
    reason: str = "released for another try at the operator's request",
) -> int:
    """Write an ``unpark`` row for each session: the next run tries it once more."""
    with write_transaction(storage):
        insert_changes(
            storage.hot,
            [
                change_row(
                    at=to_db(now),
                    actor=actor,
                    action=UNPARK,
                    reason=f"{reason} (session {ref.session_id!r})",
                    before=None,
                    after=None,
                    user_id=ref.user_id,
                    namespace=ref.namespace,
                    details={"session_id": ref.session_id},
                )
                for ref in refs
            ],
        )
    return len(refs)
