"""What is due and when: triggers, catch-up, once-per-scheduled-time, the APScheduler wiring.

The real scheduler loop runs only in the end-to-end tests (a real process); here every time
is explicit — a frozen clock or a store clock the test moves — so downtime, DST days and clock
steps are exact.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time
from memkeeper.jobs import ORDER, REGISTRY

from memkeeper import MemoryStore
from memkeeper.clock import from_db, to_db
from memkeeper.config import Config, parse_config
from memkeeper.errors import ConfigError
from memkeeper.maintenance.jobkit import Job
from memkeeper.maintenance.locks import jobs_lock
from memkeeper.maintenance.runner import ABANDONED_ERROR
from memkeeper.service.scheduler import (
    CATCH_UP_JOB_ID,
    ServiceJobs,
    add_catch_up,
    build_scheduler,
    due_for_catch_up,
    due_jobs,
    last_successes,
    mark_abandoned_runs,
    run_due,
    schedule_jobs,
)
from memkeeper.service.triggers import JobTrigger, job_triggers, previous_fire_time

pytestmark = pytest.mark.both_backends

# Default schedules (UTC): settle 03:15 daily, expire 03:00 daily, demote 04:00 on the 1st,
# prune 03:30 daily, retain 04:45 on Sundays, summarize hourly (make_config turns the last
# two off).
NOW = datetime(2027, 3, 2, 10, 0, tzinfo=UTC)
MONTH_AGO = NOW - timedelta(days=30)


def make_config(timezone: str = "UTC", **jobs: dict[str, Any]) -> Config:
    data: dict[str, Any] = {
        "jobs": {
            "summarize": {"enabled": False},
            "retain": {"enabled": False},
            "index": {"enabled": False},
            "merge": {"enabled": False},
        },
        "service": {"timezone": timezone},
    }
    for name, section in jobs.items():
        data["jobs"].setdefault(name, {}).update(section)
    return parse_config(data, Path("config.toml"))


def seed_run(
    store: MemoryStore,
    job: str,
    started: datetime,
    *,
    status: str = "ok",
    trigger: str = "schedule",
    scheduled_for: datetime | None = None,
) -> str:
    run_id = f"seed-{job}-{secrets.token_hex(3)}"
    store.storage.hot.conn.execute(
        "INSERT INTO job_runs (run_id, job, trigger, scheduled_for, started_at, finished_at,"
        " status, dry_run) VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
        [
            run_id,
            job,
            trigger,
            to_db(scheduled_for) if scheduled_for else None,
            to_db(started),
            None if status == "running" else to_db(started + timedelta(seconds=1)),
            status,
        ],
    )
    return run_id


def runs(store: MemoryStore, job: str | None = None) -> list[dict[str, Any]]:
    sql = "SELECT * FROM job_runs WHERE run_id NOT LIKE 'seed-%'"
    params: list[Any] = []
    if job:
        sql += " AND job = ?"
        params.append(job)
    return list(store.storage.hot.query(sql + " ORDER BY rowid", params))


class MovableClock:
    """A store clock the test sets, to step the wall clock back and forth."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> MovableClock:
    return MovableClock(NOW)


@pytest.fixture
def clocked_store(db_path: Path, clock: MovableClock) -> Iterator[MemoryStore]:
    memory = MemoryStore(db_path, config=make_config(), clock=clock)
    yield memory
    memory.close()


# -- triggers ------------------------------------------------------------------------------------


def test_previous_fire_time_is_the_latest_at_or_before_now() -> None:
    daily = JobTrigger("0 3 * * *", "UTC")
    assert previous_fire_time(daily, NOW) == datetime(2027, 3, 2, 3, 0, tzinfo=UTC)
    at_fire = datetime(2027, 3, 2, 3, 0, tzinfo=UTC)
    assert previous_fire_time(daily, at_fire) == at_fire
    just_before = at_fire - timedelta(microseconds=1)
    assert previous_fire_time(daily, just_before) == datetime(2027, 3, 1, 3, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("* * * * *", datetime(2027, 3, 2, 10, 0, tzinfo=UTC)),
        ("0 * * * *", datetime(2027, 3, 2, 10, 0, tzinfo=UTC)),
        ("0 4 1 * *", datetime(2027, 3, 1, 4, 0, tzinfo=UTC)),
        ("0 3 * * 0", datetime(2027, 2, 28, 3, 0, tzinfo=UTC)),  # cron's Sunday
        ("0 0 1 1 *", datetime(2027, 1, 1, 0, 0, tzinfo=UTC)),
        ("0 0 29 2 *", datetime(2024, 2, 29, 0, 0, tzinfo=UTC)),
    ],
)
def test_previous_fire_time_finds_rare_and_frequent_schedules(
    expr: str, expected: datetime
) -> None:
    assert previous_fire_time(JobTrigger(expr, "UTC"), NOW) == expected


def unchecked(config: Config, job: str, schedule: str) -> Config:
    """``config`` with a schedule that skipped validation (an older or hand-built config)."""
    section = getattr(config.jobs, job).model_copy(update={"schedule": schedule})
    return config.model_copy(update={"jobs": config.jobs.model_copy(update={job: section})})


def test_job_triggers_name_the_bad_schedule() -> None:
    config = unchecked(make_config(), "prune", "61 3 * * *")
    with pytest.raises(ConfigError, match=r"jobs\.prune\.schedule"):
        job_triggers(config)


# -- daylight saving time (Europe/Berlin: 2027-03-28 02:00 -> 03:00, 2027-10-31 03:00 -> 02:00)


def fires_on_local_day(expr: str, zone: str, day: datetime) -> list[datetime]:
    trigger = JobTrigger(expr, zone)
    start = day.replace(tzinfo=trigger.timezone)
    end = start + timedelta(days=1)
    fires, fire = [], trigger.get_next_fire_time(None, start)
    while fire is not None and fire.astimezone(UTC) < end.astimezone(UTC):
        fires.append(fire.astimezone(UTC))
        fire = trigger.get_next_fire_time(fire, fire)
    return fires


SPRING = datetime(2027, 3, 28)  # noqa: DTZ001 - a local calendar day, zone given per test
AUTUMN = datetime(2027, 10, 31)  # noqa: DTZ001


def test_dst_fall_back_runs_a_fixed_time_job_once() -> None:
    """02:30 happens twice in Berlin that night; cron runs the job on the first pass only."""
    assert fires_on_local_day("30 2 * * *", "Europe/Berlin", AUTUMN) == [
        datetime(2027, 10, 31, 0, 30, tzinfo=UTC)  # 02:30 CEST
    ]


def test_dst_fall_back_keeps_every_real_hour_of_an_hourly_job() -> None:
    assert len(fires_on_local_day("0 * * * *", "Europe/Berlin", AUTUMN)) == 25
    assert len(fires_on_local_day("*/30 * * * *", "Europe/Berlin", AUTUMN)) == 50


def test_dst_spring_forward_does_not_skip_a_job_in_the_missing_hour() -> None:
    """02:30 does not exist that night; the job runs once, right after the gap."""
    assert fires_on_local_day("30 2 * * *", "Europe/Berlin", SPRING) == [
        datetime(2027, 3, 28, 1, 30, tzinfo=UTC)  # 03:30 CEST
    ]
    assert len(fires_on_local_day("0 * * * *", "Europe/Berlin", SPRING)) == 23


def test_dst_new_york_fall_back() -> None:
    """01:30 happens twice in New York on 2027-11-07."""
    day = datetime(2027, 11, 7)  # noqa: DTZ001
    assert fires_on_local_day("30 1 * * *", "America/New_York", day) == [
        datetime(2027, 11, 7, 5, 30, tzinfo=UTC)  # 01:30 EDT
    ]


def test_dst_previous_fire_time_sees_the_first_pass() -> None:
    trigger = JobTrigger("30 2 * * *", "Europe/Berlin")
    after_second_pass = datetime(2027, 10, 31, 2, 0, tzinfo=UTC)  # 03:00 CET
    assert previous_fire_time(trigger, after_second_pass) == datetime(
        2027, 10, 31, 0, 30, tzinfo=UTC
    )


def test_dst_fall_back_never_runs_twice_for_the_same_wall_time(
    clocked_store: MemoryStore, clock: MovableClock
) -> None:
    """Even if the scheduler fired again during the repeated hour, the job runs once."""
    clocked_store.config = make_config("Europe/Berlin", expire={"schedule": "30 2 * * *"})
    jobs = ServiceJobs(clocked_store)
    clock.now = datetime(2027, 10, 31, 0, 30, 1, tzinfo=UTC)  # 02:30:01 CEST
    assert jobs.run_scheduled("expire") is not None
    clock.now = datetime(2027, 10, 31, 1, 30, 1, tzinfo=UTC)  # 02:30:01 CET, an hour later
    assert jobs.run_scheduled("expire") is None
    assert len(runs(clocked_store, "expire")) == 1


def test_dst_days_in_catch_up() -> None:
    off = {"enabled": False}
    config = make_config(
        "Europe/Berlin", expire={"schedule": "30 2 * * *"}, settle=off, demote=off, prune=off
    )
    # Autumn: ran at 02:30 CEST; at 03:00 CET (after the repeated hour) it is not due again.
    ran = datetime(2027, 10, 31, 0, 30, 5, tzinfo=UTC)
    after = datetime(2027, 10, 31, 2, 0, tzinfo=UTC)
    assert due_for_catch_up(config, {"expire": ran}, after) == []
    # Spring: 02:30 does not exist; the machine was off; at 04:00 CEST the day's run is due.
    yesterday = datetime(2027, 3, 27, 1, 30, 5, tzinfo=UTC)
    later = datetime(2027, 3, 28, 2, 0, tzinfo=UTC)
    assert due_for_catch_up(config, {"expire": yesterday}, later) == [
        ("expire", datetime(2027, 3, 28, 1, 30, tzinfo=UTC))
    ]


# -- catch-up ---------------------------------------------------------------------------------


def test_due_for_catch_up_after_a_month_of_downtime() -> None:
    config = make_config()
    last = {name: MONTH_AGO for name in ORDER}
    due = due_for_catch_up(config, last, NOW)
    assert due == [
        ("settle", datetime(2027, 3, 2, 3, 15, tzinfo=UTC)),
        ("expire", datetime(2027, 3, 2, 3, 0, tzinfo=UTC)),
        ("demote", datetime(2027, 3, 1, 4, 0, tzinfo=UTC)),
        ("prune", datetime(2027, 3, 2, 3, 30, tzinfo=UTC)),
    ]  # summarize is disabled


def test_due_for_catch_up_leaves_jobs_that_ran_since_their_last_time() -> None:
    config = make_config(summarize={"enabled": True})
    last = {
        "settle": datetime(2027, 3, 2, 3, 15, 2, tzinfo=UTC),  # ran at its time today
        "expire": datetime(2027, 3, 2, 2, 59, tzinfo=UTC),  # ran just before today's time
        "demote": datetime(2027, 3, 1, 9, 0, tzinfo=UTC),  # ran after the 1st's time
        "summarize": datetime(2027, 3, 2, 10, 0, tzinfo=UTC),  # exactly at its time
    }  # prune never ran
    due = due_for_catch_up(config, last, NOW)
    assert [name for name, _ in due] == ["expire", "prune"]


def test_due_for_catch_up_is_empty_before_a_schedule_ever_fired() -> None:
    config = make_config(
        settle={"enabled": False},
        expire={"enabled": False},
        prune={"enabled": False},
        demote={"schedule": "0 0 29 2 *"},
    )
    assert due_for_catch_up(config, {}, NOW) == [("demote", datetime(2024, 2, 29, tzinfo=UTC))]


def test_last_successes_cover_the_later_of_start_and_scheduled_time(
    clocked_store: MemoryStore,
) -> None:
    seed_run(clocked_store, "expire", MONTH_AGO)
    seed_run(clocked_store, "expire", NOW - timedelta(days=1), status="failed")
    seed_run(clocked_store, "expire", NOW - timedelta(days=2), status="interrupted")
    early = datetime(2027, 3, 2, 2, 59, 59, tzinfo=UTC)
    seed_run(clocked_store, "settle", early, scheduled_for=datetime(2027, 3, 2, 3, 15, tzinfo=UTC))
    covered = last_successes(clocked_store)
    assert covered["expire"] == MONTH_AGO
    assert covered["settle"] == datetime(2027, 3, 2, 3, 15, tzinfo=UTC)
    assert "demote" not in covered


def test_catch_up_after_downtime_runs_each_overdue_job_exactly_once(db_path: Path) -> None:
    """The laptop was off for a month; on start each overdue job runs once, the rest not."""
    with freeze_time(NOW), MemoryStore(db_path, config=make_config()) as store:
        for name in ("settle", "expire", "demote"):
            seed_run(store, name, MONTH_AGO)
        seed_run(store, "prune", NOW - timedelta(minutes=5))  # ran after today's 03:30
        due = due_jobs(store)
        assert [name for name, _ in due] == ["settle", "expire", "demote"]

        results = ServiceJobs(store).catch_up([name for name, _ in due])

        assert [(r.job, r.status, r.trigger) for r in results] == [
            ("settle", "ok", "catch-up"),
            ("expire", "ok", "catch-up"),
            ("demote", "ok", "catch-up"),
        ]
        rows = runs(store)
        assert [row["job"] for row in rows] == ["settle", "expire", "demote"]
        assert {row["job"]: from_db(row["scheduled_for"]) for row in rows} == dict(due)
        assert due_jobs(store) == []
        # A second start right after (or a queued duplicate) runs nothing more.
        assert ServiceJobs(store).catch_up(["settle", "expire", "demote", "prune"]) == []
        assert len(runs(store)) == 3


def test_a_failing_job_does_not_stop_the_others(
    clocked_store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(_ctx: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(REGISTRY, "expire", Job("expire", "broken", explode))
    results = ServiceJobs(clocked_store).catch_up(["settle", "expire", "demote"])
    assert [(r.job, r.status) for r in results] == [
        ("settle", "ok"),
        ("expire", "failed"),
        ("demote", "ok"),
    ]
    failed = runs(clocked_store, "expire")[0]
    assert failed["status"] == "failed"
    assert "disk on fire" in failed["error"]
    # Still due: it is retried (at its next time, or the next start).
    assert "expire" in [name for name, _ in due_jobs(clocked_store)]


def test_an_unexpected_error_is_logged_not_raised(clocked_store: MemoryStore) -> None:
    jobs = ServiceJobs(clocked_store)
    clocked_store.close()  # the database went away under the service
    assert jobs.run_scheduled("expire") is None


# -- once per scheduled time, whatever the wall clock does --------------------------------------


def test_scheduled_fire_runs_once_per_scheduled_time(
    clocked_store: MemoryStore, clock: MovableClock
) -> None:
    jobs = ServiceJobs(clocked_store)
    clock.now = datetime(2027, 3, 2, 3, 0, 0, 200000, tzinfo=UTC)
    first = jobs.run_scheduled("expire")
    assert first is not None
    assert first.trigger == "schedule"
    row = runs(clocked_store, "expire")[0]
    assert from_db(row["scheduled_for"]) == datetime(2027, 3, 2, 3, 0, tzinfo=UTC)
    assert jobs.run_scheduled("expire") is None  # a duplicate fire for 03:00
    assert len(runs(clocked_store, "expire")) == 1


def test_clock_stepping_back_never_reruns_a_scheduled_time(
    clocked_store: MemoryStore, clock: MovableClock
) -> None:
    jobs = ServiceJobs(clocked_store)
    clock.now = datetime(2027, 3, 2, 3, 0, 5, tzinfo=UTC)
    assert jobs.run_scheduled("expire") is not None
    # NTP steps the clock back 50 minutes; a reload re-arms 03:00 and it fires again.
    clock.now = datetime(2027, 3, 2, 2, 10, tzinfo=UTC)
    assert jobs.run_scheduled("expire") is None
    clock.now = datetime(2027, 3, 2, 3, 0, 1, tzinfo=UTC)
    assert jobs.run_scheduled("expire") is None
    assert len(runs(clocked_store, "expire")) == 1
    # The next day's time still runs.
    clock.now = datetime(2027, 3, 3, 3, 0, 1, tzinfo=UTC)
    assert jobs.run_scheduled("expire") is not None


def test_clock_jumping_forward_past_a_time_still_runs_it_once(
    clocked_store: MemoryStore, clock: MovableClock
) -> None:
    seed_run(clocked_store, "expire", datetime(2027, 3, 1, 3, 0, 1, tzinfo=UTC))
    jobs = ServiceJobs(clocked_store)
    clock.now = datetime(2027, 3, 2, 2, 50, tzinfo=UTC)
    assert jobs.run_scheduled("expire") is None  # nothing new is due before 03:00
    clock.now = datetime(2027, 3, 2, 3, 20, tzinfo=UTC)  # jumped over 03:00
    result = jobs.run_scheduled("expire")
    assert result is not None
    row = runs(clocked_store, "expire")[0]
    assert from_db(row["scheduled_for"]) == datetime(2027, 3, 2, 3, 0, tzinfo=UTC)
    assert jobs.run_scheduled("expire") is None


def test_a_manual_run_after_the_time_covers_the_fire(
    clocked_store: MemoryStore, clock: MovableClock
) -> None:
    seed_run(clocked_store, "expire", datetime(2027, 3, 2, 3, 5, tzinfo=UTC), trigger="manual")
    clock.now = datetime(2027, 3, 2, 3, 10, tzinfo=UTC)
    assert ServiceJobs(clocked_store).run_scheduled("expire") is None


def test_disabled_job_does_not_run_from_a_queued_fire(clocked_store: MemoryStore) -> None:
    clocked_store.config = make_config(expire={"enabled": False})
    assert ServiceJobs(clocked_store).run_scheduled("expire") is None
    assert runs(clocked_store) == []


def test_stop_requested_runs_nothing(clocked_store: MemoryStore) -> None:
    jobs = ServiceJobs(clocked_store)
    jobs.stop_event.set()
    assert jobs.catch_up(["settle", "expire"]) == []
    assert jobs.run_scheduled("expire") is None
    assert runs(clocked_store) == []


# -- run-once --due, abandoned runs ---------------------------------------------------------------


def test_run_due_runs_only_due_jobs_with_their_scheduled_time(clocked_store: MemoryStore) -> None:
    seed_run(clocked_store, "settle", NOW - timedelta(minutes=1))
    seed_run(clocked_store, "prune", NOW - timedelta(minutes=1))
    report = run_due(clocked_store)
    assert [(r.job, r.trigger, r.status) for r in report.results] == [
        ("expire", "schedule", "ok"),
        ("demote", "schedule", "ok"),
    ]
    scheduled = {row["job"]: from_db(row["scheduled_for"]) for row in runs(clocked_store)}
    assert scheduled == {
        "expire": datetime(2027, 3, 2, 3, 0, tzinfo=UTC),
        "demote": datetime(2027, 3, 1, 4, 0, tzinfo=UTC),
    }
    assert run_due(clocked_store).results == []


def test_two_run_once_due_deciding_at_once_run_each_job_once(
    clocked_store: MemoryStore, db_path: Path, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two timers (two hosts, or two processes: here two stores, each with its own locks)
    both see the same jobs due; the second one's runs happen between the first one's look
    and its run. The first must decide again under each job's lock and run nothing twice."""
    from memkeeper.service import scheduler

    seed_run(clocked_store, "settle", NOW - timedelta(minutes=1))
    seed_run(clocked_store, "prune", NOW - timedelta(minutes=1))
    looked = scheduler.due_jobs
    other_report: list[Any] = []
    looks: list[MemoryStore] = []

    def look_then_let_the_other_run(store: MemoryStore, now: datetime | None = None) -> Any:
        due = looked(store, now)
        looks.append(store)
        if len(looks) == 1:  # the first look: the other timer runs everything now
            with MemoryStore(db_path, config=make_config(), clock=clock) as other:
                other_report.append(run_due(other))
        return due

    monkeypatch.setattr(scheduler, "due_jobs", look_then_let_the_other_run)
    report = run_due(clocked_store)
    assert [r.job for r in other_report[0].results] == ["expire", "demote"]
    assert report.results == []  # both were done by the time their locks were held
    assert sorted(row["job"] for row in runs(clocked_store)) == ["demote", "expire"]


def test_abandoned_runs_are_marked_interrupted(clocked_store: MemoryStore) -> None:
    run_id = seed_run(clocked_store, "demote", MONTH_AGO, status="running")
    assert mark_abandoned_runs(clocked_store) == 1
    row = clocked_store.storage.hot.execute(
        "SELECT status, error FROM job_runs WHERE run_id = ?", [run_id]
    ).fetchone()
    assert tuple(row) == ("interrupted", ABANDONED_ERROR)
    assert mark_abandoned_runs(clocked_store) == 0


def test_runs_of_a_live_process_are_not_marked(clocked_store: MemoryStore) -> None:
    seed_run(clocked_store, "demote", NOW, status="running")
    # A run-once (another process: another store) is running it right now.
    with MemoryStore(clocked_store.path) as other, jobs_lock(other.storage).hold():
        assert mark_abandoned_runs(clocked_store) == 0
    status = clocked_store.storage.hot.execute("SELECT status FROM job_runs").fetchone()[0]
    assert status == "running"


# -- the APScheduler wiring ---------------------------------------------------------------------


def test_scheduler_has_one_coalescing_cron_job_per_enabled_job(clocked_store: MemoryStore) -> None:
    config = make_config(prune={"enabled": False})
    scheduler = build_scheduler(config, ServiceJobs(clocked_store))
    jobs = {job.id: job for job in scheduler.get_jobs()}
    assert set(jobs) == {"settle", "expire", "demote"}
    for name, job in jobs.items():
        assert isinstance(job.trigger, JobTrigger)
        assert job.trigger.expr == getattr(config.jobs, name).schedule
        assert job.coalesce is True
        assert job.max_instances == 1
        assert job.misfire_grace_time is None  # late (the machine slept) still runs, once
        assert job.args == (name,)


def test_rescheduling_applies_a_new_config_or_changes_nothing(clocked_store: MemoryStore) -> None:
    jobs = ServiceJobs(clocked_store)
    scheduler = build_scheduler(make_config(), jobs)
    schedule_jobs(
        scheduler, make_config(expire={"schedule": "0 5 * * *"}, demote={"enabled": False}), jobs
    )
    by_id = {job.id: job for job in scheduler.get_jobs()}
    assert "demote" not in by_id
    assert by_id["expire"].trigger.expr == "0 5 * * *"
    with pytest.raises(ConfigError):
        schedule_jobs(scheduler, unchecked(make_config(), "settle", "0 25 * * *"), jobs)
    assert {job.id: job.trigger.expr for job in scheduler.get_jobs()} == {
        job_id: job.trigger.expr for job_id, job in by_id.items()
    }


def test_catch_up_is_one_queued_job(clocked_store: MemoryStore) -> None:
    jobs = ServiceJobs(clocked_store)
    scheduler = build_scheduler(make_config(), jobs)
    add_catch_up(scheduler, jobs, [])
    assert scheduler.get_job(CATCH_UP_JOB_ID) is None
    add_catch_up(scheduler, jobs, [("expire", NOW), ("demote", NOW)])
    job = scheduler.get_job(CATCH_UP_JOB_ID)
    assert job is not None
    assert job.args == (["expire", "demote"],)
