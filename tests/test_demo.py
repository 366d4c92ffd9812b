"""``memkeeper demo`` (issue 14): a simulated year, maintained on schedule, in a throwaway DB.

The demo's figures are checked against the database it leaves with ``--keep``: the per-month
counts are the job runs' own, the final states are the rows', the stories are what
``explain`` says of those rows, the undo is a logged run. It runs offline and fast, and
never opens the user's database.
"""

from __future__ import annotations

import json
import socket
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.config import Config
from memkeeper.demo.schedule import Schedule
from memkeeper.demo.standin import STANDIN_LABEL, STANDIN_MODEL, extract
from memkeeper.errors import EXIT_DATA


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["demo", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Make every outgoing connection fail loudly, and record the attempts."""
    attempts: list[Any] = []

    def refuse(_sock: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise OSError(f"test: network access refused ({address!r})")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


def _demo_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = _run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_a_short_demo_runs_offline_and_leaves_the_users_data_alone(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    isolated_user_dirs: Path,
) -> None:
    # The user's own database, with one memory in it, named the way the CLI finds it.
    users_db = tmp_path / "mine" / "memory.db"
    with MemoryStore(users_db) as store:
        store.remember("me", "city", "Paris")
    before = {p.name: p.read_bytes() for p in users_db.parent.iterdir()}
    monkeypatch.setenv("MEMKEEPER_DB", str(users_db))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    home_before = sorted(p.relative_to(isolated_user_dirs) for p in isolated_user_dirs.rglob("*"))
    attempts = _no_network(monkeypatch)

    code, out, err = _run(capsys, "--months", "3")

    assert code == 0, err
    assert attempts == []  # offline; how fast it runs is measured by the bench, not here
    # Month by month, the jobs' table, the undo and the stories.
    for text in ("2027-01  agents:", "2027-02  agents:", "2027-03  agents:"):
        assert text in out
    assert "2027-04  agents:" not in out
    for job in ("settle", "expire", "prune", "summarize"):
        assert f"\n  {job} " in out
    assert "Undo: the " in out and "reverted " in out
    assert out.count("$ memkeeper explain ") >= 3
    flat = " ".join(out.split())
    assert f"Summaries: local stand-in (no API key, no LLM): {STANDIN_LABEL}." in flat
    assert STANDIN_LABEL in out.split("Story: A long conversation")[1]
    assert max(len(line) for line in out.splitlines()) <= 80
    # Nothing left behind, nothing of the user's touched.
    assert list(scratch.iterdir()) == []
    assert {p.name: p.read_bytes() for p in users_db.parent.iterdir()} == before
    assert sorted(p.relative_to(isolated_user_dirs) for p in isolated_user_dirs.rglob("*")) == (
        home_before
    )


def _month_of(moment: str) -> str:
    return moment[:7]  # stored UTC text; the demo's default timezone is UTC too


def test_the_json_counts_are_the_kept_databases(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _no_network(monkeypatch)
    kept = tmp_path / "kept"
    data = _demo_json(capsys, "--months", "5", "--seed", "7", "--keep", str(kept))
    assert data["database"] == str(kept / "memory.db")
    assert [m["month"] for m in data["months"]] == [f"2027-0{n}" for n in range(1, 6)]

    with MemoryStore(kept / "memory.db", create=False) as store:
        runs = store.job_runs(limit=100_000)
        # Per month and job, the changes the demo reports are those its runs recorded.
        recorded: dict[str, dict[str, Counter[str]]] = {}
        for run in runs:
            if run.job == "undo":
                continue
            month = recorded.setdefault(_month_of(run.started_at.isoformat()), {})
            month.setdefault(run.job, Counter()).update(run.counts.get("changes", {}))
        reported = {
            m["month"]: {job: Counter(counts) for job, counts in m["jobs"].items()}
            for m in data["months"]
        }
        cleaned = {
            month: {job: c for job, c in jobs.items() if +c} for month, jobs in recorded.items()
        }
        assert reported == {month: cleaned.get(month, {}) for month in reported}
        for name, job in data["jobs"].items():
            assert job["runs"] == sum(1 for run in runs if run.job == name)
            assert job["changes"] == sum(
                sum(r.counts["changes"].values()) for r in runs if r.job == name
            )
        # Every job had work: expiry, review, settling, pruning, demotion, summaries.
        totals: Counter[str] = Counter()
        for month in data["months"]:
            for job, counts in month["jobs"].items():
                totals.update({f"{job}:{label}": n for label, n in counts.items()})
        for label in (
            "expire:expire",
            "expire:retire (expired)",
            "settle:retire (superseded)",
            "prune:retire (over_cap)",
            "demote:retire (low_confidence)",
            "summarize:summarize",
        ):
            assert totals[label] > 0, label
        assert sum(sum(m["operator"].values()) for m in data["months"]) > 0

        # What it says expired is pending review or went on (cold, renewed, kept) — the
        # entry's last logged change says where it is now, for every entry in the database.
        memories = {m.id: m for m in store.list_memories()}
        last: dict[str, Any] = {}
        for change in store.changes():
            if change.memory_id is not None:
                last[change.memory_id] = change
        assert set(last) == set(memories)
        for memory_id, memory in memories.items():
            assert last[memory_id].after["state"] == memory.state, memory_id
        for change in store.changes(action="expire"):
            assert memories[change.memory_id].state in ("pending_review", "cold", "active")
        states = Counter(
            m.state + (f" ({m.cold_reason})" if m.cold_reason else "") for m in memories.values()
        )
        assert data["final_states"] == dict(states)

        # The undo is a logged run that reverted what it says.
        undo = data["undo"]
        assert undo["reverted"] and not undo["conflicts"]
        undo_runs = [run for run in runs if run.run_id == undo["run_id"]]
        assert [run.job for run in undo_runs] == ["undo"]
        assert len(store.changes(run_id=undo["run_id"])) == len(undo["reverted"])
        # The stories are what explain says of the kept database.
        titles = [story["title"] for story in data["stories"]]
        assert "A preference changed, and changed back inside its grey period" in titles
        assert any(title.endswith("then undone") for title in titles)
        for story in data["stories"]:
            assert store.explain(story["memory_id"]) == story["explain"]
        # Summaries say they come from the stand-in, in the note and in the change log.
        summaries = store.changes(action="summarize")
        assert summaries
        for change in summaries:
            assert change.after["value"].startswith(STANDIN_LABEL + "\n")
            assert change.details["model"] == STANDIN_MODEL


def test_the_same_seed_tells_the_same_year(capsys: pytest.CaptureFixture[str]) -> None:
    first = _demo_json(capsys, "--months", "1", "--seed", "3")
    again = _demo_json(capsys, "--months", "1", "--seed", "3")
    other = _demo_json(capsys, "--months", "1", "--seed", "4")
    for key in ("months", "jobs", "final_states"):
        assert first[key] == again[key]
    assert [s["title"] for s in first["stories"]] == [s["title"] for s in again["stories"]]
    assert first["months"] != other["months"]


def test_keep_needs_a_new_or_empty_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "something").write_text("x", encoding="utf-8")
    code, out, err = _run(capsys, "--months", "1", "--keep", str(tmp_path))
    assert code == EXIT_DATA
    assert str(tmp_path) in err and "empty" in err
    assert out == ""
    assert [p.name for p in tmp_path.iterdir()] == ["something"]


def test_months_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _run(capsys, "--months", "0")
    assert code != 0 and "--months" in err


def test_with_a_key_the_summaries_come_from_the_llm(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with FakeLLM() as fake:
        config = tmp_path / "config.toml"
        config.write_text(
            f'[llm]\nbase_url = "{fake.url}"\ntimeout_seconds = 5.0\nmax_retries = 0\n',
            encoding="utf-8",
        )
        monkeypatch.setenv("ZHIPUAI_API_KEY", "test-key.0123456789abcdef")
        kept = tmp_path / "kept"
        code = main(["--config", str(config), "demo", "--months", "1", "--keep", str(kept)])
        out = capsys.readouterr().out
        assert code == 0
        summary_calls = [r for r in fake.requests if r.path.endswith("/chat/completions")]
        assert summary_calls
    assert "Summaries: GLM (" in out
    assert STANDIN_LABEL not in out
    with MemoryStore(kept / "memory.db", create=False) as store:
        notes = store.changes(action="summarize")
        assert notes
        for change in notes:
            assert change.after["value"].startswith("Summary of messages #")
            assert change.details["model"] != STANDIN_MODEL


def test_the_stand_in_keeps_the_informative_messages_and_the_previous_summary() -> None:
    prompt = (
        "<previous_summary>\n[local stand-in summary]\n    - 2027-01-04 user: test on Monday\n"
        "</previous_summary>\n\n<transcript>\n"
        "[#7 user 2027-01-10 19:00] I am a bit tired today.\n"
        "[#8 assistant 2027-01-10 19:01] Sure.\n"
        "[#9 user 2027-01-10 19:02] We decided to visit the zoo on Friday.\n"
        "[#10 assistant 2027-01-10 19:03] 3 times 4 is 12.\n"
        "</transcript>"
    )
    summary = extract(prompt)
    lines = summary.split("\n")
    assert lines[0] == STANDIN_LABEL
    assert lines[1] == "- 2027-01-04 user: test on Monday"
    assert "- 2027-01-10 user: We decided to visit the zoo on Friday." in lines
    assert "- 2027-01-10 assistant: 3 times 4 is 12." in lines
    assert extract(prompt) == summary


def test_the_schedule_fires_in_the_configured_timezone_and_coalesces_idle_frequent_jobs() -> None:
    from datetime import UTC, datetime, timedelta

    config = Config.model_validate({"service": {"timezone": "Asia/Shanghai"}})
    start = datetime(2027, 1, 1, tzinfo=UTC)
    schedule = Schedule(config, start, {"index": "off"})
    assert "index" in schedule.off and "index" not in schedule.jobs
    fired = []
    for fire, job in schedule.fires_until(start + timedelta(hours=23)):
        fired.append((fire, job.name))
        schedule.ran(job, changed=False)
    # Daily jobs at 03:00 Shanghai = 19:00 UTC; the hourly summarize ran once: nothing was
    # written after its first run.
    assert (datetime(2027, 1, 1, 19, 0, tzinfo=UTC), "expire") in fired
    assert [name for _, name in fired].count("summarize") == 1
    schedule.wrote()
    later = []
    for _, job in schedule.fires_until(start + timedelta(hours=25)):
        later.append(job.name)
        schedule.ran(job, changed=False)
    assert later.count("summarize") == 1


@pytest.mark.slow
def test_a_full_year_runs_every_month_offline(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts = _no_network(monkeypatch)
    data = _demo_json(capsys)
    assert len(data["months"]) == 12
    assert attempts == []


def test_a_year_of_fires_across_both_dst_changes_runs_each_job_on_schedule() -> None:
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    config = Config.model_validate(
        {"service": {"timezone": "Europe/Berlin"}, "jobs": {"settle": {"schedule": "30 2 * * *"}}}
    )
    zone = ZoneInfo("Europe/Berlin")
    start, end = datetime(2027, 1, 1, tzinfo=zone), datetime(2028, 1, 1, tzinfo=zone)
    schedule = Schedule(config, start, {"index": "off"})
    runs: Counter[str] = Counter()
    local_times: dict[str, set[str]] = {}
    day = start
    while day < end:
        noon = day + timedelta(hours=12)
        for fire, job in schedule.fires_until(noon):
            runs[job.name] += 1
            local_times.setdefault(job.name, set()).add(f"{fire.astimezone(zone):%H:%M}")
            schedule.ran(job, changed=False)
        schedule.wrote()  # an agent wrote at noon
        day = datetime.combine(day.date() + timedelta(days=1), day.time(), tzinfo=zone)
    # Fixed-hour daily jobs ran once a day, on both DST nights too (02:30 does not exist on
    # 28 March: the service's trigger runs it an hour later; it exists twice on 31 October:
    # once), the monthly and weekly ones as often as their calendars say; the hourly
    # summarize ran once after each write.
    for name in ("settle", "expire", "prune"):
        assert runs[name] == 365, name
    assert runs["demote"] == 12
    assert runs["retain"] == 52
    assert local_times["expire"] == {"03:00"}
    assert local_times["settle"] == {"02:30", "03:30"}
    assert runs["summarize"] == 365
