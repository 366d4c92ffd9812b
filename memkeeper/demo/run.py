"""``memkeeper demo``: a year of the seeds' agents on memkeeper, maintained on schedule.

In a temporary directory (removed afterwards, unless ``keep`` names one), a new database is
written by the agents of :mod:`memkeeper.demo.agents` while a simulated clock moves through
the months, minute by minute of their actions. Before each action, every job whose cron
schedule (:mod:`memkeeper.demo.schedule`) fired since runs, at its scheduled time, through the
runner (:func:`memkeeper.maintenance.runner.run_job`, an explicit ``now``). Every Monday
the operator reviews the pending entries (keeps some, drops some). At the
end one run is undone (:func:`memkeeper.maintenance.undo.undo_run`) and a few entries'
lives are told by ``explain``.

Summaries: with an API key (the summarize job's own resolution, :func:`read_api_key`) the
summarize job runs as it is, on GLM; without one, its steps run with the local stand-in of
:mod:`memkeeper.demo.standin`, whose notes say so. The ``index`` job (embeddings) is not
run: it would call the embedding API every few minutes of a simulated year.

What happened is counted per month: the agents' actions, the changes of each job run by the
labels of its run report (so a new job shows up without changes here), the operator's
reviews, and recalls that renewed or restored entries (from the change log).
"""

from __future__ import annotations

import contextlib
import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from memkeeper.clock import from_db
from memkeeper.config import Config
from memkeeper.demo.agents import Agents
from memkeeper.demo.schedule import Schedule, ScheduledJob, SimClock
from memkeeper.demo.standin import STANDIN_LABEL, StandInClient
from memkeeper.demo.stories import Story, tell_stories, undo_one_run
from memkeeper.errors import InvalidInput
from memkeeper.llm.endpoint import read_api_key
from memkeeper.llm.errors import LlmNotConfigured
from memkeeper.maintenance import curation
from memkeeper.maintenance.runner import JobResult, run_job
from memkeeper.storage import change_reads
from memkeeper.store import MemoryStore

START = (2027, 1, 1)
"""The simulated year starts at local midnight of this date (``[service] timezone``)."""

OFF_IN_DEMO = {"index": "off in the demo (embedding API)"}
DB_NAME = "memory.db"


@dataclass(frozen=True)
class DemoOptions:
    """What ``memkeeper demo`` was asked for."""

    months: int = 12
    seed: int = 1
    keep: Path | None = None
    config: Config = field(default_factory=Config)
    environ: Mapping[str, str] | None = None
    """Where the API key is looked up (None: the process environment)."""


@dataclass
class Month:
    """What happened in one calendar month (in ``[service] timezone``)."""

    label: str
    agents: Counter[str] = field(default_factory=Counter)
    changes_by_agents: Counter[str] = field(default_factory=Counter)
    operator: Counter[str] = field(default_factory=Counter)
    jobs: dict[str, Counter[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "month": self.label,
            "agents": dict(self.agents),
            "changes_by_agents": dict(self.changes_by_agents),
            "operator": dict(self.operator),
            "jobs": {name: dict(counts) for name, counts in self.jobs.items()},
        }


@dataclass
class JobSummary:
    """One job over the whole simulation."""

    schedule: str
    runs: int = 0
    changes: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    last_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schedule": self.schedule,
            "runs": self.runs,
            "changes": self.changes,
            "statuses": dict(self.statuses),
            "last_error": self.last_error,
        }


@dataclass
class DemoResult:
    """Everything the demo prints (text or ``--json``)."""

    seed: int
    months: list[Month]
    start: datetime
    end: datetime
    timezone: str
    summaries: str
    jobs: dict[str, JobSummary]
    off: dict[str, str]
    stories: list[Story]
    undo: dict[str, Any] | None
    final_states: dict[str, int]
    database: str | None
    elapsed_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "timezone": self.timezone,
            "summaries": self.summaries,
            "jobs": {name: job.to_dict() for name, job in self.jobs.items()},
            "off": self.off,
            "months": [month.to_dict() for month in self.months],
            "stories": [story.to_dict() for story in self.stories],
            "undo": self.undo,
            "final_states": self.final_states,
            "database": self.database,
            "elapsed_seconds": round(self.elapsed_seconds, 2),
        }


def add_months(moment: datetime, months: int) -> datetime:
    """Local midnight of the first of the month ``months`` after ``moment``'s month."""
    index = moment.year * 12 + moment.month - 1 + months
    return moment.replace(year=index // 12, month=index % 12 + 1, day=1)


@contextlib.contextmanager
def _directory(keep: Path | None) -> Iterator[Path]:
    """A new temporary directory removed afterwards, or ``keep`` (new or empty) left behind."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="memkeeper-demo-") as tmp:
            yield Path(tmp)
        return
    if keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
        raise InvalidInput(f"--keep {keep}: not an empty directory; name a new or empty one")
    keep.mkdir(parents=True, exist_ok=True)
    yield keep


class Simulation:
    """One demo run over one store: the agents, the schedule and the tallies."""

    def __init__(
        self,
        store: MemoryStore,
        clock: SimClock,
        options: DemoOptions,
        say: Callable[[str], None],
    ) -> None:
        self.store = store
        self.say = say
        self.clock = clock
        self.options = options
        self.config = options.config
        self.zone = ZoneInfo(self.config.service.timezone)
        self.start = datetime(*START, tzinfo=self.zone)
        self.end = add_months(self.start, options.months)
        self.rng = random.Random(options.seed)  # noqa: S311 - a reproducible year
        self.months: dict[str, Month] = {}
        self.glm = _has_key(self.config, options.environ)
        self.schedule = Schedule(self.config, self.start, OFF_IN_DEMO)
        self.jobs = {
            name: JobSummary(getattr(self.config.jobs, name).schedule)
            for name in self.schedule.jobs
        }
        self.agents = Agents(store, self.rng, self.tally)
        self.sequence = 0
        self.changes_seen = 0

    def month(self, moment: datetime) -> Month:
        label = f"{moment.astimezone(self.zone):%Y-%m}"
        if label not in self.months:
            self.months[label] = Month(label)
        return self.months[label]

    def tally(self, what: str, count: int) -> None:
        """Count an agent's action in the current simulated month."""
        self.month(self.clock()).agents[what] += count

    # -- running ---------------------------------------------------------------------------

    def run(self) -> None:
        """Every simulated day: the agents' actions, with the jobs due before each one."""
        day, index = self.start, 0
        while day < self.end:
            if f"{day:%Y-%m}" not in self.months:
                self.say(f"{day:%Y-%m}")
            self.month(day)
            actions = self.agents.day(index, day)
            if day.weekday() == 0 and index > 0:
                review_at = day + timedelta(hours=10)
                actions.append((review_at, "operator", self.review))
                actions.sort(key=lambda action: action[0])
            for moment, _actor, act in actions:
                self.run_jobs_until(moment)
                self.clock.move_to(moment)
                act()
                self.schedule.wrote()
            self.count_agent_changes()
            index += 1
            day = self.start + timedelta(days=index)  # local midnight: wall-clock arithmetic
        self.run_jobs_until(self.end - timedelta(microseconds=1))
        self.clock.move_to(self.end)

    def run_jobs_until(self, moment: datetime) -> None:
        for fire, job in self.schedule.fires_until(moment):
            result = self.fire(fire, job)
            self.schedule.ran(job, changed=result.total_changes > 0)

    def fire(self, fire: datetime, job: ScheduledJob) -> JobResult:
        """Run ``job`` at its scheduled time ``fire``, as the service would."""
        self.clock.move_to(fire)
        self.sequence += 1
        run_id = f"{fire:%Y%m%dT%H%M%SZ}-{job.name}-{self.sequence % 0x10000:04x}"
        local = job.name == "summarize" and not self.glm
        result = run_job(
            self.store,
            job.name,
            now=fire,
            trigger="schedule",
            scheduled_for=fire,
            run_id=run_id,
            llm_client=StandInClient() if local else None,
        )
        summary = self.jobs[job.name]
        summary.runs += 1
        summary.changes += result.total_changes
        summary.statuses[result.status] += 1
        if result.error:
            summary.last_error = result.error
        if result.counts:
            counts = self.month(fire).jobs.setdefault(job.name, Counter())
            counts.update(result.counts)
        return result

    def review(self) -> None:
        """The operator's weekly review: keeps some stated entries, drops some guesses and
        notes, leaves the rest to the review's grace period."""
        pending = self.store.list_memories(state="pending_review")
        keep = [m.id for m in pending if m.confidence >= 0.9 and self.rng.random() < 0.5]
        drop = [
            m.id
            for m in pending
            if (m.kind == "note" or m.confidence < 0.7) and self.rng.random() < 0.5
        ]
        month = self.month(self.clock())
        if keep:
            report = curation.keep(self.store, keep, actor="operator:review-keep")
            month.operator["kept"] += len(report.done)
        if drop:
            report = curation.drop(self.store, drop, actor="operator:review-drop")
            month.operator["dropped"] += len(report.done)

    # -- after the year --------------------------------------------------------------------

    def count_agent_changes(self) -> None:
        """What the agents' writes and recalls changed since the last count, by month, read
        from the change log as it is written (a later erasure takes its rows away)."""
        rows = change_reads.changes_by_actor_after(
            self.store.storage.hot, self.changes_seen, "agent:"
        )
        for change_id, at, action in rows:
            self.month(from_db(at) or self.clock()).changes_by_agents[action] += 1
            self.changes_seen = change_id

    def final_states(self) -> dict[str, int]:
        states: Counter[str] = Counter()
        for memory in self.store.list_memories():
            reason = f" ({memory.cold_reason})" if memory.cold_reason else ""
            states[memory.state + reason] += 1
        return dict(sorted(states.items()))


def _summaries(sim: Simulation) -> str:
    """What writes the summaries, for the report's header."""
    if "summarize" not in sim.schedule.jobs:
        return f"none: summarize is {sim.schedule.off.get('summarize', 'off')}"
    if sim.glm:
        return f"GLM ({sim.config.llm.model})"
    return f"local stand-in (no API key, no LLM): {STANDIN_LABEL}"


def _no_sync(store: MemoryStore) -> None:
    """Write the demo's database without fsync (``PRAGMA synchronous = OFF``).

    It is a throwaway (or a sample to look at): a power loss mid-demo costs nothing, while
    the runner's checkpoint after each of a simulated year's runs would wait on the disk.
    """
    store.storage.write_without_sync()


def _has_key(config: Config, environ: Mapping[str, str] | None) -> bool:
    try:
        read_api_key(config.llm, environ)
    except LlmNotConfigured:
        return False
    return True


def run_demo(options: DemoOptions, *, progress: Callable[[str], None] | None = None) -> DemoResult:
    """Simulate ``options.months`` months and return what happened (see the module doc).

    ``progress`` hears the label of each month as the simulation enters it."""
    began = time.monotonic()
    say = progress or (lambda _text: None)
    with _directory(options.keep) as directory:
        path = directory / DB_NAME
        start = datetime(*START, tzinfo=ZoneInfo(options.config.service.timezone))
        clock = SimClock(start)
        store = MemoryStore(path, config=options.config, clock=clock, actor="agent")
        try:
            _no_sync(store)
            sim = Simulation(store, clock, options, say)
            if sim.glm and "summarize" in sim.schedule.jobs:
                say(
                    f"an API key is set: summaries by GLM ({options.config.llm.model}), "
                    "which takes minutes rather than seconds"
                )
            sim.run()
            undo = undo_one_run(store, now=clock())
            stories = tell_stories(store, sim.agents.marks, undo)
            result = DemoResult(
                seed=options.seed,
                months=list(sim.months.values()),
                start=sim.start,
                end=sim.end,
                timezone=str(sim.zone),
                summaries=_summaries(sim),
                jobs=sim.jobs,
                off=dict(sim.schedule.off),
                stories=stories,
                undo=undo,
                final_states=sim.final_states(),
                database=str(path) if options.keep is not None else None,
            )
        finally:
            store.close()
    result.elapsed_seconds = time.monotonic() - began
    return result
