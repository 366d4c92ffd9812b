"""The service's schedule replayed on a simulated clock: every job fires when its cron says.

Each enabled job gets the service's own trigger (:func:`memkeeper.service.triggers.job_triggers`:
its ``schedule`` read in ``[service] timezone``, with cron's rules for weekdays and the
repeated hour of a DST change); the simulation asks it for each next fire time as the clock
moves, and runs the job at that time. Fires come out in time order, and in the documented
job order when two fall on the same instant, as the service's single worker runs them.

A job that fires more than once a day (``summarize`` hourly, ``index`` every 5 minutes) is
*coalesced* while nothing was written: a fire that finds no write since that job's last
run would find nothing new to do, so the simulation moves on to the job's first fire after
the next write instead of running it. Daily, weekly and monthly jobs run at every fire: time
passing is what makes entries due for them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from memkeeper.clock import ensure_utc
from memkeeper.config import JOB_ORDER, Config
from memkeeper.service.triggers import JobTrigger, job_triggers

FREQUENT = timedelta(days=1)
"""Jobs whose consecutive fires are closer than this are coalesced while nothing changes."""


class SimClock:
    """The simulated "now": the store and the jobs read it, the simulation moves it."""

    def __init__(self, moment: datetime) -> None:
        self.moment = ensure_utc(moment)

    def __call__(self) -> datetime:
        return self.moment

    def move_to(self, moment: datetime) -> None:
        """Set the clock (forward or, for a what-if, anywhere)."""
        self.moment = ensure_utc(moment)


def first_fire(trigger: JobTrigger, now: datetime) -> datetime | None:
    """The trigger's first fire at or after ``now`` (in the trigger's timezone)."""
    return trigger.get_next_fire_time(None, now)


def fire_after(trigger: JobTrigger, fire: datetime) -> datetime | None:
    """The trigger's first fire strictly after ``fire`` (one of its own fire times).

    Should APScheduler 3 answer a fire with itself (it does across a DST change when given
    the fire converted to UTC), the search starts a little later, doubling the step, so the
    simulation always moves on.
    """
    following = trigger.get_next_fire_time(fire, fire)
    step = timedelta(seconds=1)
    while following is not None and following <= fire:
        following = trigger.get_next_fire_time(None, fire + step)
        step *= 2
    return following


@dataclass
class ScheduledJob:
    """One job on the simulated schedule: its trigger, next fire and what it did."""

    name: str
    trigger: JobTrigger
    next_fire: datetime | None
    frequent: bool
    runs: int = 0
    seen_writes: int = -1


class Schedule:
    """Every enabled job's trigger, and the fires due as the simulated clock advances."""

    def __init__(self, config: Config, start: datetime, off: Mapping[str, str]) -> None:
        self.jobs: dict[str, ScheduledJob] = {}
        self.off: dict[str, str] = {}
        self.writes = 0
        triggers = job_triggers(config)
        for name in JOB_ORDER:
            if name in off:
                self.off[name] = off[name]
                continue
            if not getattr(config.jobs, name).enabled:
                self.off[name] = "disabled in the config"
                continue
            trigger = triggers[name]
            first = first_fire(trigger, start)
            second = fire_after(trigger, first) if first else None
            frequent = first is not None and second is not None and second - first < FREQUENT
            self.jobs[name] = ScheduledJob(name, trigger, first, frequent)

    def wrote(self) -> None:
        """Say that something was written (an agent's action, a job's change)."""
        self.writes += 1

    def fires_until(self, moment: datetime) -> Iterator[tuple[datetime, ScheduledJob]]:
        """``(scheduled time, job)`` for every fire at or before ``moment`` to run, in order.

        Fires of a frequent job with nothing written since its last run are skipped up to its
        first fire at or after ``moment``. The caller runs each yielded job, then calls
        :meth:`ran`.
        """
        order = {name: index for index, name in enumerate(JOB_ORDER)}
        while True:
            due = [
                (job.next_fire, order[job.name], job)
                for job in self.jobs.values()
                if job.next_fire is not None and job.next_fire <= moment
            ]
            if not due:
                return
            fire, _, job = min(due, key=lambda item: (item[0], item[1]))
            if job.frequent and job.seen_writes == self.writes:
                job.next_fire = first_fire(job.trigger, moment)
                if job.next_fire is not None and job.next_fire <= moment:
                    job.next_fire = fire_after(job.trigger, job.next_fire)
                continue
            job.next_fire = fire_after(job.trigger, fire)
            job.runs += 1
            yield ensure_utc(fire), job

    def ran(self, job: ScheduledJob, *, changed: bool) -> None:
        """Record that ``job`` ran: its own changes do not make it due again, others' do."""
        if changed:
            self.wrote()
        job.seen_writes = self.writes
