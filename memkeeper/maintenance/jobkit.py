"""What a maintenance job is given and what it hands back.

A job is a small module under ``jobs/`` (installed as ``memkeeper.jobs``) exposing a
:class:`Job`: a name, a one-line description and a ``run(ctx)`` function. ``run`` decides
*what* is due — selecting through an index, in batches — and hands each batch of
:class:`~memkeeper.storage.transitions.Transition` values to :meth:`JobContext.apply`. The
context does the *how* through the one shared mechanism, so dry-run, the change log, explain
and undo work the same for every job.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from memkeeper import logs
from memkeeper.storage.transitions import Outcome, Transition, apply

if TYPE_CHECKING:
    from memkeeper.store import MemoryStore


@dataclass(frozen=True)
class Job:
    """A registered maintenance job."""

    name: str
    description: str
    run: Callable[[JobContext], None]


KEEP_PLANNED = 10_000
"""How many changes a run keeps for its summary (the rest are counted: "... and N more")."""


@dataclass(frozen=True)
class PlannedChange:
    """One change a run made (or, in a dry run, would make), for summaries and previews."""

    memory_id: str
    user_id: str
    namespace: str
    kind: str
    key: str | None
    action: str
    reason: str
    label: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def change_label(outcome: Outcome) -> str:
    """The summary bucket of a change: its action, and for moves to cold storage, why."""
    target = outcome.transition.target
    if target is not None and target.get("state") == "cold":
        return f"{outcome.transition.action} ({target['cold_reason']})"
    return outcome.transition.action


ProgressCallback = Callable[[str, int, int | None], None]
"""``progress(job, done, total)`` — called as a job works through its candidates."""


class LockPacer:
    """Sizes a job's write transactions so each holds the write lock about ``target_ms``.

    A transaction's time grows with its rows, and the cost per row with the database (a
    cold page cache, deeper indexes): measured at 1,000,000 memories, 200 rows held the lock
    up to 52 ms where 100,000 memories took 18 ms. After each transaction the size moves
    toward the target: down at once when a transaction ran long, up gently when it ran
    short, between ``smallest`` and ``largest`` (``[database] batch_size``).

    ``smallest`` is 1 on SQLite, whose one write lock every agent waits for. On PostgreSQL
    (:data:`PER_USER_SMALLEST`) a batch locks only its own users, so agents of every other
    user never wait for it, and a transaction's time there is mostly round trips to the
    server: on a busy host, shrinking to a row or two made the pass ten times slower (a
    transaction per row) without sparing any agent a wait.
    """

    def __init__(self, largest: int, target_ms: float, smallest: int = 1) -> None:
        self.largest = largest
        self.smallest = max(1, min(largest, smallest))
        self.target = target_ms / 1000
        self.size = max(self.smallest, min(largest, 50))

    def observe(self, rows: int, seconds: float) -> None:
        """Adjust the next size after ``rows`` took ``seconds``."""
        if rows < self.size or seconds <= 0:
            return  # a short tail batch says little about the rate
        if seconds > self.target:
            self.size = max(self.smallest, int(rows * self.target / seconds * 0.9))
        elif seconds < self.target / 2:
            self.size = min(self.largest, max(self.size + 1, int(self.size * 1.25)))


PER_USER_SMALLEST = 50
"""The fewest rows a job's transaction holds on PostgreSQL (see :class:`LockPacer`)."""


@dataclass
class JobContext:
    """Everything one job run needs: the store, its config section, the clock, the mode."""

    store: MemoryStore
    job: str
    config: BaseModel
    now: datetime
    run_id: str
    dry_run: bool
    stop_event: threading.Event = field(default_factory=threading.Event)
    progress: ProgressCallback | None = None
    counts: Counter[str] = field(default_factory=Counter)
    skipped: int = 0
    stats: dict[str, Any] = field(default_factory=dict)
    planned: list[PlannedChange] = field(default_factory=list)
    keep_planned: int = field(default_factory=lambda: KEEP_PLANNED)
    llm_client: Any = None
    """A chat client the LLM jobs use instead of building one from ``[llm]`` and the key
    (``memkeeper demo``'s local stand-in); None: the configured endpoint."""
    _total: int | None = None
    _done: int = 0
    pacer: LockPacer = field(init=False)

    def __post_init__(self) -> None:
        database = self.store.config.database
        per_user = getattr(self.store.storage.hot, "dialect", "sqlite") == "postgres"
        smallest = PER_USER_SMALLEST if per_user else 1
        self.pacer = LockPacer(database.batch_size, database.lock_hold_ms, smallest)

    @property
    def actor(self) -> str:
        return f"job:{self.job}"

    @property
    def batch_size(self) -> int:
        return self.store.config.database.batch_size

    @property
    def log(self) -> Any:
        return logs.get_logger("memkeeper.job").bind(job=self.job, run_id=self.run_id)

    def should_stop(self) -> bool:
        """True once a stop was requested (SIGTERM): finish the current batch, then return."""
        return self.stop_event.is_set()

    def set_total(self, total: int | Callable[[], int]) -> None:
        """Announce how many candidates the job will look at (for the progress display).

        Pass a function to have the count made only when someone displays progress: the
        counting queries read as much as the selection itself.
        """
        if callable(total):
            if self.progress is None:
                return
            total = total()
        self._total = total
        self._report()

    def advance(self, count: int) -> None:
        """Say that ``count`` more candidates were looked at."""
        self._done += count
        self._report()

    def _report(self) -> None:
        if self.progress is not None:
            self.progress(self.job, self._done, self._total)

    def skip_unprocessable(self, why: str, **where: Any) -> None:
        """Log an entry (or a group of entries) the job cannot process, count it, go on."""
        self.skipped += 1
        self.log.warning("skipped what this job cannot process", why=why, **where)

    def apply(self, transitions: Sequence[Transition]) -> list[Outcome]:
        """Apply one batch through the shared mechanism (or preview it in a dry run).

        The batch is written in transactions sized to hold the write lock for about
        ``[database] lock_hold_ms`` each (see :class:`LockPacer`), so agents waiting for it
        wait milliseconds however large or cold the database is.
        """
        if self.dry_run:
            return self._tally(self._apply(transitions))
        outcomes: list[Outcome] = []
        start = 0
        while start < len(transitions):
            part = transitions[start : start + self.pacer.size]
            began = time.monotonic()
            outcomes += self._apply(part)
            self.pacer.observe(len(part), time.monotonic() - began)
            start += len(part)
        return self._tally(outcomes)

    def _apply(self, transitions: Sequence[Transition]) -> list[Outcome]:
        return apply(
            self.store.storage,
            transitions,
            actor=self.actor,
            now=self.now,
            run_id=self.run_id,
            dry_run=self.dry_run,
        )

    def _tally(self, outcomes: list[Outcome]) -> list[Outcome]:
        for outcome in outcomes:
            if not outcome.applied:
                self.skipped += 1
                continue
            label = change_label(outcome)
            self.counts[label] += 1
            if len(self.planned) < self.keep_planned:
                image = outcome.transition.target or outcome.before or {}
                self.planned.append(
                    PlannedChange(
                        memory_id=outcome.transition.memory_id,
                        user_id=image.get("user_id", ""),
                        namespace=image.get("namespace", ""),
                        kind=image.get("kind", ""),
                        key=image.get("key"),
                        action=outcome.transition.action,
                        reason=outcome.transition.reason,
                        label=label,
                    )
                )
        return outcomes


class JobSkipped(Exception):
    """Raised by a job that cannot run this time (e.g. no API key); the run records why."""
