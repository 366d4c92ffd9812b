"""The building blocks of the configuration schema (:mod:`memkeeper.config`): a strict
section, and a job's section with its ``enabled`` switch and validated ``schedule``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memkeeper.cron import ScheduleError, parse_schedule


class Section(BaseModel):
    """Strict: TOML has real types, so "5" is not a number and unknown keys are errors."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


def check_schedule(value: str) -> str:
    """Validate a crontab expression (a field validator)."""
    try:
        # Build the real trigger: rewriting the weekday alone let "61 3 * * *" through.
        parse_schedule(value, "UTC")
    except ScheduleError as exc:
        raise ValueError(str(exc)) from None
    return value


class JobSection(Section):
    """What every job's section has; each job overrides ``schedule``'s default."""

    enabled: bool = Field(True, description="Run this job in run-once and in the service.")
    schedule: str = Field(
        "0 3 * * *",
        description="When the service runs it: a crontab expression (minute hour day month "
        "weekday; weekday 0 or 7 = Sunday, names allowed) in service.timezone.",
    )

    _validate_schedule = field_validator("schedule")(check_schedule)


SCHEDULE_DOC = JobSection.model_fields["schedule"].description
"""The description every job's ``schedule`` field shares."""
