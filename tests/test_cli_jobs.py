"""The job commands through the CLI: run-once, previews, review, restore, undo, explain."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from freezegun import freeze_time

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.cli.jobs_cmd import TerminalProgress
from memkeeper.maintenance.jobkit import Job
from memkeeper.maintenance.locks import daemon_lock, jobs_lock

pytestmark = pytest.mark.both_backends


@pytest.fixture
def cli(db_path: Path, capsys):
    """Run the CLI on the test database; returns (exit code, stdout, stderr)."""

    def invoke(*args: str, now: str | None = None, real_clock: bool = False):
        """With ``now``, the real clock stands there too (writes need no --yes), unless
        ``real_clock``: then ``now`` is a pretend time far from it."""
        argv = ["--db", str(db_path)]
        if not now:
            code = main([*argv, *args])
        elif real_clock:
            code = main([*argv, "--now", now, *args])
        else:
            with freeze_time(now, tick=True):
                code = main([*argv, "--now", now, *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


def _memory_id(cli, *args: str, now: str) -> str:
    code, out, _ = cli("remember", *args, "--json", now=now)
    assert code == 0
    return json.loads(out)["id"]


def test_what_if_preview_explain_review_restore_and_undo(cli) -> None:
    city = _memory_id(cli, "alice", "city", "Beijing", now="2026-01-01T08:00:00Z")
    team = _memory_id(cli, "alice", "team", "blue", now="2026-01-01T08:00:00Z")

    code, out, _ = cli("run-once", "--dry-run", now="2026-07-01T03:00:00Z")
    assert code == 0
    assert "would expire" in out and city in out
    assert "unused 180 days ≥ TTL 180 days (fact); pending review" in out
    code, out, _ = cli("list", "--state", "pending_review")
    assert out.strip() == "(no memories)"

    code, out, _ = cli("run-once", "--job", "expire", now="2026-07-01T03:00:00Z")
    assert code == 0 and "changed 2 (expire 2)" in out
    run_id = out.split("[run ")[1].split("]")[0]

    code, out, _ = cli("log", "--run", run_id, "--json")
    assert {c["memory_id"] for c in json.loads(out)} == {city, team}

    code, out, _ = cli("explain", city)
    assert "expired: unused 180 days ≥ TTL 180 days (fact)" in out
    assert f"job:expire, run {run_id}" in out

    code, out, _ = cli("review", "list")
    assert city in out and team in out
    assert cli("review", "keep", city, now="2026-07-02T00:00:00Z")[0] == 0
    assert cli("review", "drop", team, now="2026-07-02T00:00:00Z")[0] == 0
    code, out, _ = cli("get", team, "--json")
    assert json.loads(out)["state"] == "cold" and json.loads(out)["cold_reason"] == "dropped"
    code, _out, err = cli("review", "keep", team)
    assert code == 1 and "not pending review (it is cold)" in err

    code, out, _ = cli("restore", team, now="2026-07-03T00:00:00Z")
    assert code == 0 and f"restored {team}" in out
    code, out, _ = cli("get", team, "--json")
    assert json.loads(out)["state"] == "active"

    code, out, _ = cli("undo", run_id)
    assert code == 0 and "reverted 0 change(s)" in out and "conflict" in out


def test_a_real_run_in_the_future_needs_yes(cli) -> None:
    future = (datetime.now(UTC) + timedelta(days=400)).isoformat()
    code, _out, err = cli("run-once", now=future, real_clock=True)
    assert code == 2 and "--dry-run" in err and "--yes" in err
    assert cli("run-once", "--dry-run", now=future, real_clock=True)[0] == 0
    code, out, _ = cli("run-once", "--yes", "--json", now=future, real_clock=True)
    assert code == 0 and json.loads(out)["ok"] is True


def test_json_summary_is_one_object_with_counts(cli) -> None:
    memory_id = _memory_id(cli, "u", "k", "v", now="2026-01-01T00:00:00Z")
    code, out, _ = cli("run-once", "--dry-run", "--json", now="2026-12-01T00:00:00Z")
    data = json.loads(out)
    assert code == 0 and data["ok"] is True
    expire = next(job for job in data["jobs"] if job["job"] == "expire")
    assert expire["counts"] == {"expire": 1} and expire["dry_run"] is True
    # A dry run lists its planned changes, like its text (issue 20 item 3).
    [change] = expire["changes"]
    assert change["memory_id"] == memory_id and change["action"] == "expire"
    assert (change["user_id"], change["namespace"], change["key"]) == ("u", "", "k")
    assert "unused" in change["reason"]
    assert expire["changes_not_listed"] == 0
    code, out, _ = cli("run-once", "--json", now="2026-12-01T00:00:00Z")
    assert "changes" not in json.loads(out)["jobs"][0]  # a real run's JSON: counts only


def test_a_dry_run_says_how_many_changes_it_did_not_list(cli, monkeypatch) -> None:
    from memkeeper.maintenance import jobkit

    for key in ("a", "b", "c"):
        _memory_id(cli, "u", key, "v", now="2026-01-01T00:00:00Z")
    monkeypatch.setattr(jobkit, "KEEP_PLANNED", 2)
    code, out, _ = cli("run-once", "--dry-run", "--job", "expire", now="2026-12-01T00:00:00Z")
    assert code == 0
    assert out.count("    would expire") == 2
    assert "    ... and 1 more (not listed)" in out
    code, out, _ = cli(
        "run-once", "--dry-run", "--json", "--job", "expire", now="2026-12-01T00:00:00Z"
    )
    [expire] = json.loads(out)["jobs"]
    assert len(expire["changes"]) == 2 and expire["changes_not_listed"] == 1


def test_a_failing_job_is_recorded_and_exits_4_while_others_run(cli, monkeypatch) -> None:
    from memkeeper.jobs import REGISTRY

    def broken(_ctx) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(REGISTRY, "demote", Job("demote", "broken for the test", broken))
    code, out, err = cli("run-once", "--json")
    assert code == 4 and "demote" in err
    jobs = {job["job"]: job for job in json.loads(out)["jobs"]}
    assert jobs["demote"]["status"] == "failed" and "disk on fire" in jobs["demote"]["error"]
    assert jobs["prune"]["status"] == "ok" and jobs["expire"]["status"] == "ok"
    code, out, _ = cli("status", "--json")
    last = {job["job"]: job["last_run"] for job in json.loads(out)["jobs"]}
    assert last["demote"]["status"] == "failed"


def test_run_once_waits_for_the_job_lock_then_exits_75(cli, db_path: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[service]\nlock_wait_seconds = 0.3\n")
    assert cli("note", "alice", "n")[0] == 0  # create the database
    with MemoryStore(db_path) as other, jobs_lock(other.storage).hold():
        code, _out, err = cli("--config", str(config), "run-once")
    assert code == 75 and "job run lock" in err and "after waiting 0.3 s" in err
    assert cli("--config", str(config), "run-once")[0] == 0


def test_progress_is_shown_only_for_large_runs(capsys) -> None:
    progress = TerminalProgress()
    progress("expire", 10, 20)
    assert capsys.readouterr().err == ""
    progress("expire", 5000, 5000)
    assert "expire: 5000/5000 (100%)" in capsys.readouterr().err


def test_unknown_job_is_a_usage_error(cli) -> None:
    code, _out, err = cli("run-once", "--job", "nonsense")
    assert code == 2 and "nonsense" in err


def test_run_once_due_runs_only_what_its_schedule_says(cli) -> None:
    code, out, _ = cli("run-once", "--due", "--json", now="2026-03-02T10:00:00Z")
    first = {job["job"] for job in json.loads(out)["jobs"]}
    assert code == 0 and first == {
        "settle",
        "expire",
        "demote",
        "prune",
        "index",
        "merge",
        "retain",
        "summarize",
    }
    # Same morning: only the five-minute index came round since (summarize, skipped for
    # want of an API key, covered its 10:00 run: it is tried again at 11:00, not at every
    # --due). Next day after 03:30: the daily jobs, the hourly summarize and the index, but
    # not the monthly demote.
    code, out, _ = cli("run-once", "--due", "--json", now="2026-03-02T10:20:00Z")
    assert [job["job"] for job in json.loads(out)["jobs"]] == ["index"]
    code, out, _ = cli("run-once", "--due", "--json", now="2026-03-03T03:40:00Z")
    jobs = {job["job"]: job for job in json.loads(out)["jobs"]}
    assert set(jobs) == {"settle", "expire", "prune", "index", "merge", "summarize"}
    assert {job["trigger"] for job in jobs.values()} == {"schedule"}
    code, _out, err = cli("run-once", "--due", "--job", "expire")
    assert code == 2 and "--due" in err


def test_status_says_whether_the_service_runs(cli, db_path: Path) -> None:
    assert cli("note", "alice", "n")[0] == 0  # status reads an existing database
    _code, out, _ = cli("status")
    assert "service:   not running" in out
    with MemoryStore(db_path) as other, daemon_lock(other.storage).hold():
        _code, out, _ = cli("status", "--json")
    service = json.loads(out)["service"]
    assert {k: service[k] for k in ("running", "pid")} == {"running": True, "pid": os.getpid()}
    if "leader" in service:  # PostgreSQL: the fleet's leader, as the lock's holder recorded it
        assert service["leader"]["pid"] == os.getpid()


def test_bookkeeping_statistics_stay_out_of_the_text_but_not_the_json(cli) -> None:
    """A job's statistics named with a leading underscore (the merge job's watermarks, kept
    for its next run) are left out of run-once's and status's text; --json has them."""
    code, out, _ = cli("run-once", "--job", "merge")
    assert code == 0 and "merge" in out and "_watermark" not in out and "_scope" not in out
    code, out, _ = cli("status")
    assert code == 0 and "_watermark" not in out and "_scope" not in out
    code, out, _ = cli("run-once", "--job", "merge", "--json")
    (job,) = json.loads(out)["jobs"]
    assert job["stats"]["_scope"].startswith("threshold=") and "_watermark_change" in job["stats"]
