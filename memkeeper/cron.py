"""Crontab schedules, read the way cron reads them, turned into APScheduler 3 triggers.

APScheduler 3 numbers weekdays from Monday = 0, while cron numbers them from Sunday = 0 (and
also accepts 7 for Sunday). Passing ``0 3 * * 0`` straight to ``CronTrigger.from_crontab``
would silently mean Monday. memkeeper therefore reads the day-of-week field itself — numbers,
names, ranges, lists and steps, with cron's meaning — and hands APScheduler weekday *names*,
which both agree on.

One form is not cron's: ``@every Ns`` (N from 1 to 59) fires at every Nth second of the
minute. It is for demonstrations and tests of the service (a fleet's failover shown within
a minute), not a need of the jobs, which run daily or monthly.

Cron also ORs day-of-month and day-of-week when both are restricted, while APScheduler ANDs
them; such a schedule is refused rather than silently meaning something else.
"""

from __future__ import annotations

import re
from datetime import tzinfo
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # APScheduler loads only when a trigger is built (the service, status)
    from apscheduler.triggers.cron import CronTrigger

_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * sun",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


class ScheduleError(ValueError):
    """A crontab expression memkeeper cannot accept; the message says why."""


def _day_number(token: str, expr: str) -> int:
    token = token.strip().lower()
    if token.isdigit():
        number = int(token)
        if not 0 <= number <= 7:
            raise ScheduleError(f"day of week {token!r} in {expr!r} is not 0-7 (0 and 7 = Sunday)")
        return number % 7
    if token[:3] in _DAY_NAMES and len(token) == 3:
        return _DAY_NAMES.index(token[:3])
    raise ScheduleError(f"day of week {token!r} in {expr!r} is not a number 0-7 or a name mon-sun")


def _expand_days(field: str, expr: str) -> set[int]:
    days: set[int] = set()
    for part in field.split(","):
        if not part:
            raise ScheduleError(f"empty item in day-of-week field of {expr!r}")
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise ScheduleError(f"bad step {step_text!r} in day-of-week field of {expr!r}")
            step = int(step_text)
        if base == "*":
            first, last = 0, 6
        elif "-" in base:
            start, _, end = base.partition("-")
            first, last = _day_number(start, expr), _day_number(end, expr)
            if end.strip() == "7":
                last = 7  # "5-7" is Friday through Sunday
            if last < first:
                raise ScheduleError(f"day-of-week range {base!r} in {expr!r} runs backwards")
        else:
            first = _day_number(base, expr)
            last = 6 if step_text else first
        days.update(day % 7 for day in range(first, last + 1, step))
    return days


def split_seconds(expr: str) -> tuple[str | None, str]:
    """``(seconds field or None, the five cron fields)`` of a schedule (aliases expanded):
    ``@every 5s`` is ``("*/5", "* * * * *")``."""
    text = " ".join(expr.split())
    found = re.fullmatch(r"@every (\d{1,2})s", text.lower())
    if found:
        seconds = int(found[1])
        if not 1 <= seconds <= 59:
            raise ScheduleError(f"{expr!r}: @every takes 1 to 59 seconds")
        return f"*/{seconds}", "* * * * *"
    return None, _ALIASES.get(text.lower(), text)


def to_apscheduler_crontab(expr: str) -> str:
    """Rewrite a cron expression so APScheduler 3 reads it as cron does (weekdays by name);
    a leading seconds field is left out (see :func:`split_seconds`)."""
    text = split_seconds(expr)[1]
    fields = text.split(" ")
    if len(fields) != 5:
        raise ScheduleError(
            f"{expr!r} has {len(fields)} fields; a schedule needs 5: minute hour day month weekday"
        )
    minute, hour, day, month, weekday = fields
    if weekday != "*":
        days = _expand_days(weekday, expr)
        weekday = "*" if len(days) == 7 else ",".join(_DAY_NAMES[d] for d in sorted(days))
        if day != "*":
            raise ScheduleError(
                f"{expr!r} restricts both day of month and day of week; cron would run on "
                "either, APScheduler only on both — use one of the two"
            )
    return " ".join((minute, hour, day, month, weekday))


def parse_schedule(expr: str, timezone: tzinfo | str) -> CronTrigger:
    """Build the APScheduler trigger for a cron expression in the given timezone."""
    translated = to_apscheduler_crontab(expr)
    seconds = split_seconds(expr)[0]
    from apscheduler.triggers.cron import CronTrigger

    try:
        if seconds is not None:
            minute, hour, day, month, weekday = translated.split(" ")
            return CronTrigger(
                second=seconds,
                minute=minute,
                hour=hour,
                day=day,
                month=month,
                day_of_week=weekday,
                timezone=timezone,
            )
        return CronTrigger.from_crontab(translated, timezone=timezone)
    except ValueError as exc:
        raise ScheduleError(f"{expr!r} is not a valid cron expression: {exc}") from None
