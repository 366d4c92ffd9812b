"""Cron triggers for the service: a job's schedule in its timezone, with cron's DST rule.

Also answers "when did this schedule last fire before now" (what a catch-up or ``--due``
run covers). APScheduler is imported here, so only the service and ``status`` load it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

from apscheduler.triggers.base import BaseTrigger

from memkeeper.clock import ensure_utc
from memkeeper.config import JOB_ORDER, Config
from memkeeper.cron import ScheduleError, parse_schedule, to_apscheduler_crontab
from memkeeper.errors import ConfigError

# How far back to look for a schedule's most recent time, widening only when nothing fired:
# frequent schedules are answered from a short window, rare ones (29 February) still found.
_LOOKBACK = (
    timedelta(minutes=2),
    timedelta(hours=2),
    timedelta(days=2),
    timedelta(days=40),
    timedelta(days=400),
    timedelta(days=366 * 9),
)


def _second_pass(moment: datetime) -> bool:
    """True when ``moment`` is the later of two instants with the same local wall time."""
    zone = moment.tzinfo
    wall = moment.replace(tzinfo=None)
    first, second = wall.replace(tzinfo=zone, fold=0), wall.replace(tzinfo=zone, fold=1)
    first_offset, second_offset = first.utcoffset(), second.utcoffset()
    if first_offset is None or second_offset is None or first_offset <= second_offset:
        return False  # an ordinary time, or one in a spring-forward gap
    return moment.astimezone(UTC) == second.astimezone(UTC)


class JobTrigger(BaseTrigger):
    """A job's cron schedule in its timezone, with cron's rule for the repeated hour.

    Wraps the ``CronTrigger`` from :func:`memkeeper.cron.parse_schedule` (which reads
    weekdays as cron does) and skips the second pass through a repeated wall-clock time for
    schedules with a fixed hour, so a daily 02:30 job runs once on the night the clocks go back.
    """

    def __init__(self, expr: str, timezone: tzinfo | str) -> None:
        self.expr = expr
        self.timezone = ZoneInfo(timezone) if isinstance(timezone, str) else timezone
        self._cron = parse_schedule(expr, self.timezone)
        hour = to_apscheduler_crontab(expr).split(" ")[1]
        self.fixed_hour = not hour.startswith("*")

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        fire = self._cron.get_next_fire_time(previous_fire_time, now)
        while fire is not None and self.fixed_hour and _second_pass(fire):
            fire = self._cron.get_next_fire_time(fire, fire)
        return fire

    def __str__(self) -> str:
        return f"cron[{self.expr}] {self.timezone}"

    def __repr__(self) -> str:
        return f"<JobTrigger {self.expr!r} {self.timezone}>"


def job_triggers(config: Config) -> dict[str, JobTrigger]:
    """The trigger of every registered job; a schedule cron cannot read is a ConfigError."""
    triggers = {}
    for name in JOB_ORDER:
        schedule = getattr(config.jobs, name).schedule
        try:
            triggers[name] = JobTrigger(schedule, config.service.timezone)
        except ScheduleError as exc:
            raise ConfigError(f"jobs.{name}.schedule: {exc}") from None
    return triggers


def previous_fire_time(trigger: BaseTrigger, now: datetime) -> datetime | None:
    """The most recent time at or before ``now`` at which ``trigger`` fires, in UTC."""
    now = ensure_utc(now)
    for window in _LOOKBACK:
        latest = None
        fire = trigger.get_next_fire_time(None, now - window)
        while fire is not None and fire <= now:
            latest = fire
            fire = trigger.get_next_fire_time(fire, fire)
        if latest is not None:
            return latest.astimezone(UTC)
    return None
