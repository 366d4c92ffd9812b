"""Crontab schedules read the way cron reads them (memkeeper.cron).

APScheduler 3 numbers weekdays from Monday = 0; cron from Sunday = 0 (7 is Sunday too). These
tests pin the translation so that ``0 3 * * 0`` can never silently mean Monday.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from memkeeper.config import parse_config
from memkeeper.cron import ScheduleError, parse_schedule, to_apscheduler_crontab
from memkeeper.errors import ConfigError

MONDAY = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)  # a Monday, at noon


def fire_weekdays(expr: str, count: int = 7) -> list[str]:
    """The weekday names of the next ``count`` fire times after MONDAY noon (UTC)."""
    trigger = parse_schedule(expr, UTC)
    fire, names = None, []
    now = MONDAY
    for _ in range(count):
        fire = trigger.get_next_fire_time(fire, now)
        assert fire is not None
        names.append(fire.strftime("%a").lower())
        now = fire
    return names


@pytest.mark.parametrize(
    ("expr", "weekday"),
    [
        ("0 3 * * 0", "sun"),
        ("0 3 * * 7", "sun"),
        ("0 3 * * 1", "mon"),
        ("0 3 * * 6", "sat"),
        ("0 3 * * sun", "sun"),
        ("0 3 * * SUN", "sun"),
        ("0 3 * * mon", "mon"),
        ("@weekly", "sun"),
    ],
)
def test_single_weekday_fires_on_crons_day(expr: str, weekday: str) -> None:
    assert set(fire_weekdays(expr, 3)) == {weekday}


def test_sunday_zero_is_not_monday() -> None:
    """The bug this module exists for: APScheduler alone reads 0 as Monday."""
    fire = parse_schedule("0 3 * * 0", UTC).get_next_fire_time(None, MONDAY)
    assert fire == datetime(2026, 12, 6, 3, 0, tzinfo=UTC)
    assert fire.weekday() == 6  # Python: Monday 0 ... Sunday 6


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("1-5", "mon,tue,wed,thu,fri"),
        ("mon-fri", "mon,tue,wed,thu,fri"),
        ("5-7", "sun,fri,sat"),
        ("0,6", "sun,sat"),
        ("6,0", "sun,sat"),
        ("*/2", "sun,tue,thu,sat"),
        ("1-5/2", "mon,wed,fri"),
        ("0-6", "*"),
        ("1-7", "*"),
        ("sat,sun", "sun,sat"),
        ("*", "*"),
    ],
)
def test_weekday_fields_translate_to_names(field: str, expected: str) -> None:
    assert to_apscheduler_crontab(f"0 3 * * {field}") == f"0 3 * * {expected}"


def test_weekday_ranges_fire_on_the_right_days() -> None:
    assert sorted(set(fire_weekdays("0 3 * * 1-5", 10))) == ["fri", "mon", "thu", "tue", "wed"]
    assert sorted(set(fire_weekdays("0 3 * * 5-7", 6))) == ["fri", "sat", "sun"]


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@weekly", "0 0 * * sun"),
    ],
)
def test_aliases(alias: str, expected: str) -> None:
    assert to_apscheduler_crontab(alias) == expected


def test_extra_whitespace_is_fine() -> None:
    assert to_apscheduler_crontab("  0   3 * *   0 ") == "0 3 * * sun"


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("0 3 * * 8", "not 0-7"),
        ("0 3 * * sunday", "not a number 0-7 or a name"),
        ("0 3 * * 5-1", "runs backwards"),
        ("0 3 * * 1,", "empty item"),
        ("0 3 * * */0", "bad step"),
        ("0 3 1 * 1", "restricts both day of month and day of week"),
        ("0 3 * *", "has 4 fields"),
        ("0 3 * * * *", "has 6 fields"),
        ("61 3 * * *", "not a valid cron expression"),
    ],
)
def test_bad_schedules_are_refused_with_a_reason(expr: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        parse_schedule(expr, UTC)


def test_schedule_is_read_in_the_given_timezone() -> None:
    trigger = parse_schedule("0 3 * * *", ZoneInfo("Asia/Shanghai"))
    fire = trigger.get_next_fire_time(None, MONDAY)
    assert fire is not None
    assert fire.astimezone(UTC) == datetime(2026, 11, 30, 19, 0, tzinfo=UTC)


def test_config_refuses_a_bad_weekday_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"jobs\.demote\.schedule.*not 0-7"):
        parse_config({"jobs": {"demote": {"schedule": "0 4 * * 9"}}}, Path("config.toml"))


def test_config_accepts_cron_weekdays() -> None:
    config = parse_config({"jobs": {"demote": {"schedule": "0 4 * * 0"}}}, Path("config.toml"))
    assert config.jobs.demote.schedule == "0 4 * * 0"


def test_every_n_seconds_fires_on_every_nth_second_for_demonstrations() -> None:
    trigger = parse_schedule("@every 5s", UTC)
    start = datetime(2026, 12, 2, 3, 0, 7, tzinfo=UTC)
    fire = trigger.get_next_fire_time(None, start)
    assert fire == datetime(2026, 12, 2, 3, 0, 10, tzinfo=UTC)
    assert trigger.get_next_fire_time(fire, fire) == datetime(2026, 12, 2, 3, 0, 15, tzinfo=UTC)
    for bad in ("@every 0s", "@every 60s"):
        with pytest.raises(ScheduleError, match="1 to 59 seconds"):
            parse_schedule(bad, UTC)
