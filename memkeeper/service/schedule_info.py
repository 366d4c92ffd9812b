"""Each job's schedule, last run and next scheduled time — for ``status``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from memkeeper.config import JOB_ORDER, Config
from memkeeper.records import JobRun


def next_run_time(schedule: str, timezone: str, now: datetime) -> datetime:
    """The first time strictly after ``now`` at which the service runs ``schedule``, in UTC.

    Uses the service's own trigger, so on the night the clocks go back the answer follows
    the service's rule (a fixed-hour job runs once).
    """
    # The triggers (and APScheduler) load only when a next run time is really asked for.
    from memkeeper.service.triggers import JobTrigger

    trigger = JobTrigger(schedule, ZoneInfo(timezone))
    # APScheduler's answer includes ``now`` itself when it matches; a microsecond later is
    # strictly after and still before any following whole-second fire time.
    after = (now + timedelta(microseconds=1)).astimezone(ZoneInfo(timezone))
    fire = trigger.get_next_fire_time(None, after)
    assert fire is not None
    return fire.astimezone(UTC)


def job_schedule_status(
    config: Config, last_runs: dict[str, JobRun], now: datetime
) -> list[dict[str, Any]]:
    """One entry per registered job: enabled, schedule, last run, next scheduled time."""
    rows = []
    for name in JOB_ORDER:
        section = getattr(config.jobs, name)
        last = last_runs.get(name)
        rows.append(
            {
                "job": name,
                "enabled": section.enabled,
                "schedule": section.schedule,
                "timezone": config.service.timezone,
                "last_run": last.to_dict() if last else None,
                "next_run": next_run_time(
                    section.schedule, config.service.timezone, now
                ).isoformat()
                if section.enabled
                else None,
            }
        )
    return rows


def status_report(store: Any) -> dict[str, Any]:
    """What ``memkeeper status --json`` says, and ``memkeeper ui``'s overview shows: the
    store's status (counts, messages, episodes, files, warnings, search), the time, each
    job's schedule with its last and next run, and whether the service runs."""
    from memkeeper.maintenance.locks import service_state

    data = store.status()
    now = store.now()
    data["now"] = now.isoformat()
    data["jobs"] = job_schedule_status(store.config, data["last_runs"], now)
    data["service"] = service_state(store.storage)
    data["last_runs"] = {job: run.to_dict() for job, run in data["last_runs"].items()}
    return data


def human_size(size: int | None) -> str:
    """A file's or table's size as ``status`` and the web page say it: ``12.3 MiB``."""
    if size is None:
        return "absent"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover
