"""The command line: every foundation command, the global options, --json on read commands,
help on everything, and the error contract (one line, a documented exit code, no traceback).

Most tests go through ``memkeeper.cli.main(argv)`` — exactly what the console script runs,
including the conversion of errors into exit codes — with pytest's capsys. A few run the real
installed ``memkeeper`` executable in a subprocess to prove the contract end to end.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click
import pytest
from freezegun import freeze_time
from helpers import T0, dump_databases, raw_rows

from memkeeper import MemoryStore, __version__
from memkeeper.cli import cli, main
from memkeeper.errors import (
    EXIT_CANT_CREATE,
    EXIT_CONFIG,
    EXIT_DATABASE,
    EXIT_ERROR,
    EXIT_NO_INPUT,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
)
from memkeeper.maintenance.runner import run_once

MEMKEEPER = Path(sys.executable).with_name("memkeeper")

pytestmark = pytest.mark.both_backends


class TerminalInput(io.StringIO):
    """Standard input that says it is a terminal, with the operator's answers in it."""

    def isatty(self) -> bool:
        return True


DAY = timedelta(days=1)
EXIT_INTERRUPTED = 130


class Cli:
    """Run ``main`` against one database and capture what it printed."""

    def __init__(self, db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.db_path = db_path
        self.capsys = capsys

    def __call__(self, *argv: str, now: datetime | None = T0) -> tuple[int, str, str]:
        prefix = ["--db", str(self.db_path)]
        if now is None:
            code = main([*prefix, *argv])
        else:
            # The real clock stands at the pretend one, as when an operator writes today: a
            # --now far from the real clock needs --yes (tests/test_cli_operator.py).
            with freeze_time(now, tick=True):
                code = main([*prefix, "--now", now.isoformat(), *argv])
        captured = self.capsys.readouterr()
        return code, captured.out, captured.err

    def ok(self, *argv: str, now: datetime | None = T0) -> str:
        code, out, err = self(*argv, now=now)
        assert code == 0, err
        return out

    def json(self, *argv: str, now: datetime | None = T0) -> object:
        return json.loads(self.ok(*argv, "--json", now=now))


@pytest.fixture
def run(db_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(db_path, capsys)


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("memkeeper: error: ")
    assert "Traceback" not in err
    return lines[0].removeprefix("memkeeper: error: ")


# -- writing --------------------------------------------------------------------------------


def test_remember_with_every_option(run: Cli) -> None:
    out = run.ok(
        "remember", "alice", "report_format", "PDF", "-n", "acme", "--kind", "preference",
        "--confidence", "0.95", "--source", "chat 7", "--pin", "--ttl-days", "30",
    )  # fmt: skip
    [row] = raw_rows(run.db_path, "memories")
    assert out == f"remembered {row['id']}: report_format = PDF (active)\n"
    assert {k: row[k] for k in ("user_id", "namespace", "kind", "key", "value")} == {
        "user_id": "alice",
        "namespace": "acme",
        "kind": "preference",
        "key": "report_format",
        "value": "PDF",
    }
    assert (row["confidence"], row["source"], row["pinned"], row["ttl_days"]) == (
        0.95,
        "chat 7",
        1,
        30,
    )
    assert row["created_at"] == T0.isoformat(timespec="microseconds")
    assert [c["actor"] for c in raw_rows(run.db_path, "changes")] == ["cli:remember"]


def test_remember_json_and_conflict(run: Cli) -> None:
    first = run.json("remember", "alice", "city", "Beijing")
    assert (first["value"], first["state"], first["source"], first["confidence"]) == (
        "Beijing",
        "active",
        "cli",
        0.9,
    )
    second = run.json("remember", "alice", "city", "Shanghai", now=T0 + DAY)
    assert second["id"] != first["id"]
    states = {row["id"]: row["state"] for row in raw_rows(run.db_path, "memories")}
    assert states == {first["id"]: "superseded", second["id"]: "active"}
    assert run.ok("recall", "alice", "city") == "Shanghai\n"


def test_note(run: Cli) -> None:
    out = run.ok("note", "alice", "call the client on Friday", "-n", "acme", "--pin")
    [row] = raw_rows(run.db_path, "memories")
    assert out == f"noted {row['id']}\n"
    assert (row["kind"], row["key"], row["value"], row["pinned"], row["namespace"]) == (
        "note",
        None,
        "call the client on Friday",
        1,
        "acme",
    )
    data = run.json("note", "alice", "second note", "--source", "meeting")
    assert (data["kind"], data["source"]) == ("note", "meeting")


# -- reading --------------------------------------------------------------------------------


def test_recall(run: Cli) -> None:
    run.ok("remember", "alice", "city", "Beijing")
    run.ok("remember", "alice", "city", "Oslo", "-n", "acme", "--kind", "preference")
    assert run.ok("recall", "alice", "city", now=T0 + DAY) == "Beijing\n"
    assert run.ok("recall", "alice", "city", "-n", "acme") == "Oslo\n"
    assert run.ok("recall", "alice", "city", "-n", "acme", "--kind", "preference") == "Oslo\n"
    data = run.json("recall", "alice", "city", now=T0 + 2 * DAY)
    assert (data["access_count"], data["last_accessed_at"]) == (2, (T0 + 2 * DAY).isoformat())

    code, out, err = run("recall", "alice", "country")
    assert (code, out) == (EXIT_NOT_FOUND, "")
    assert one_error_line(err) == "no memory 'country' for user 'alice'"
    code, _out, err = run("recall", "alice", "city", "-n", "other")
    assert code == EXIT_NOT_FOUND
    assert "in namespace 'other'" in err
    code, _out, _err = run("recall", "alice", "city", "--kind", "preference")
    assert code == EXIT_NOT_FOUND


def test_get(run: Cli) -> None:
    memory = run.json("remember", "alice", "city", "Beijing")
    out = run.ok("get", memory["id"])
    fields = dict(line.split(None, 1) for line in out.splitlines() if len(line.split()) > 1)
    assert fields["id"] == memory["id"]
    assert fields["value"] == "Beijing"
    assert fields["state"] == "active"
    assert run.json("get", memory["id"]) == memory
    code, out, err = run("get", "ffffffffffffffff")
    assert (code, out) == (EXIT_NOT_FOUND, "")
    assert one_error_line(err) == "no memory with id 'ffffffffffffffff'"


def test_list(run: Cli) -> None:
    a = run.json("remember", "alice", "city", "Beijing")
    b = run.json("remember", "alice", "city", "Shanghai", now=T0 + DAY)
    c = run.json("note", "alice", "a note", "-n", "acme", now=T0 + 2 * DAY)
    d = run.json("remember", "bob", "tone", "brief", "--kind", "preference", now=T0 + 3 * DAY)

    def ids(*argv: str) -> list[str]:
        return [m["id"] for m in run.json("list", *argv)]

    assert ids() == [a["id"], b["id"], c["id"], d["id"]]
    assert ids("--user", "alice") == [a["id"], b["id"], c["id"]]
    assert ids("-u", "alice", "-n", "") == [a["id"], b["id"]]
    assert ids("--namespace", "acme") == [c["id"]]
    assert ids("--state", "superseded") == [a["id"]]
    assert ids("--kind", "preference") == [d["id"]]
    assert ids("--limit", "2") == [c["id"], d["id"]]  # the newest two, oldest first
    assert ids("--state", "cold") == []
    text = run.ok("list", "--user", "alice")
    lines = text.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(f"{a['id']}  superseded")
    assert "city = Beijing" in lines[0]
    assert "alice/acme" in lines[2]
    assert run.ok("list", "--user", "nobody") == "(no memories)\n"


def test_list_shows_cold_entries(run: Cli) -> None:
    with MemoryStore(run.db_path, clock=lambda: T0) as store:
        memory = store.remember("alice", "city", "Beijing")
        store.remember("alice", "city", "Shanghai")
        run_once(store, ["settle"], now=T0 + 30 * DAY)
    [cold] = run.json("list", "--state", "cold")
    assert (cold["id"], cold["state"], cold["cold_reason"]) == (memory.id, "cold", "superseded")
    assert "cold(superseded)" in run.ok("list", "--state", "cold")
    assert run.json("get", memory.id)["state"] == "cold"


def test_history(run: Cli) -> None:
    with MemoryStore(run.db_path) as store:
        greeting = "你好\uff0c我叫小明"
        for minute, (role, text) in enumerate(
            [("user", greeting), ("assistant", "你好小明"), ("user", "bye")]
        ):
            store.clock = lambda minute=minute: T0 + timedelta(minutes=minute)
            store.append_message("alice", "s42", role, text)
        store.append_message("alice", "other", "user", "elsewhere")
    out = run.ok("history", "alice", "s42")
    assert out.splitlines() == [
        f"[2026-01-01 09:00] user: {greeting}",
        "[2026-01-01 09:01] assistant: 你好小明",
        "[2026-01-01 09:02] user: bye",
    ]
    data = run.json("history", "alice", "s42", "--limit", "2")
    assert [m["content"] for m in data] == ["你好小明", "bye"]
    assert data[0]["created_at"] == (T0 + timedelta(minutes=1)).isoformat()
    # A session the user does not have (in that namespace) is not found: exit 3.
    assert run("history", "alice", "s42", "-n", "acme", "--json")[:2] == (EXIT_NOT_FOUND, "")
    assert run("history", "bob", "s42")[:2] == (EXIT_NOT_FOUND, "")


def test_log_filters_by_memory_run_user_and_action(run: Cli) -> None:
    a = run.json("remember", "alice", "city", "Beijing")
    run.json("remember", "alice", "city", "Shanghai", now=T0 + DAY)
    b = run.json("remember", "bob", "city", "Lisbon", "-n", "acme")
    with MemoryStore(run.db_path) as store:
        report = run_once(store, ["settle"], now=T0 + 30 * DAY)
    run_id = report.results[0].run_id

    everything = run.json("log")
    assert [c["action"] for c in everything] == [
        "create",
        "supersede",
        "create",
        "create",
        "retire",
    ]
    assert [c["id"] for c in everything] == sorted(c["id"] for c in everything)
    assert [c["action"] for c in run.json("log", "--memory", a["id"])] == [
        "create",
        "supersede",
        "retire",
    ]
    by_run = run.json("log", "--run", run_id)
    assert [(c["action"], c["memory_id"], c["run_id"]) for c in by_run] == [
        ("retire", a["id"], run_id)
    ]
    assert {c["user_id"] for c in run.json("log", "--user", "bob")} == {"bob"}
    assert [c["memory_id"] for c in run.json("log", "-u", "bob", "-n", "acme")] == [b["id"]]
    assert len(run.json("log", "--action", "create")) == 3
    assert [c["action"] for c in run.json("log", "--limit", "2")] == ["create", "retire"]
    text = run.ok("log", "--memory", a["id"])
    lines = text.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(
        f"#1 {a['id']} alice fact 'city'  2026-01-01 09:00 UTC  created: new value"
    )
    assert "superseded: conflicting value" in lines[1]
    assert f"job:settle, run {run_id}" in lines[2]
    assert run.ok("log", "--user", "nobody") == "(no changes)\n"


def test_explain(run: Cli) -> None:
    memory = run.json("remember", "alice", "city", "Beijing", "--confidence", "0.95")
    run.ok("recall", "alice", "city", now=T0 + DAY)
    text = run.ok("explain", memory["id"])
    lines = text.splitlines()
    assert lines[0] == f"Memory {memory['id']} — fact 'city' of user 'alice'"
    assert lines[1].startswith(
        "Now: active; value 'Beijing'; confidence 0.95; last used 2026-01-02"
    )
    assert lines[2] == "History:"
    assert "created: new value; value 'Beijing', confidence 0.95 — cli:remember" in lines[3]
    assert lines[4] == "  2026-01-02 09:00 UTC  recalled once"  # a use, not a logged change
    data = run.json("explain", memory["id"])
    assert data["memory"]["id"] == memory["id"]
    assert [c["action"] for c in data["changes"]] == ["create"]
    assert data["text"] == text.rstrip("\n")
    code, out, err = run("explain", "0000000000000000")
    assert (code, out) == (EXIT_NOT_FOUND, "")
    assert "no memory with id '0000000000000000'" in one_error_line(err)


# The status of the two files (the cold file absent, files.hot): SQLite's. PostgreSQL's
# status (server, schema, table sizes) is tested in tests/postgres.
@pytest.mark.sqlite_only
def test_status(run: Cli) -> None:
    run.ok("remember", "alice", "city", "Beijing")
    run.ok("remember", "alice", "city", "Shanghai")
    run.ok("note", "alice", "a note")
    text = run.ok("status")
    assert f"database:  {run.db_path} (" in text
    assert "cold:      " in text
    assert "(absent)" in text
    assert "  active                2  (1 fact, 1 note)" in text
    assert "  superseded            1  (1 fact)" in text
    assert "messages:  0 (0 unsummarized); episodes: 0" in text
    assert "never run" in text
    data = run.json("status")
    assert data["counts"] == {"active": {"fact": 1, "note": 1}, "superseded": {"fact": 1}}
    assert data["files"]["hot"]["path"] == str(run.db_path)
    assert data["now"] == T0.isoformat()
    assert data["last_runs"] == {}
    assert {job["job"] for job in data["jobs"]} >= {"settle", "expire", "demote", "prune"}


# -- forgetting -----------------------------------------------------------------------------


def test_forget_commands(run: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    run.ok("remember", "alice", "city", "Beijing")
    run.ok("remember", "alice", "city", "Shanghai")
    note = run.json("note", "alice", "a note")
    run.ok("remember", "alice", "tone", "brief")
    run.ok("remember", "bob", "city", "Lisbon")

    assert run.ok("forget", "alice", "city") == "erased 2 value(s) of 'city'\n"
    code, out, err = run("forget", "alice", "city", "--json")
    assert (code, out) == (EXIT_NOT_FOUND, "")
    assert one_error_line(err) == "no memory 'city' for user 'alice'; nothing was erased"
    assert run.ok("forget-id", note["id"]) == f"erased {note['id']}\n"
    code, _out, err = run("forget-id", note["id"])
    assert code == EXIT_NOT_FOUND
    assert one_error_line(err) == f"no memory with id '{note['id']}'"

    # forget-user asks first on a terminal; "n" (or no answer) aborts with 130 and erases
    # nothing.
    before = dump_databases(run.db_path)
    monkeypatch.setattr("sys.stdin", TerminalInput("n\n"))
    code, _out, err = run("forget-user", "alice")
    assert code == EXIT_INTERRUPTED
    assert "aborted" in err
    assert dump_databases(run.db_path) == before
    monkeypatch.setattr("sys.stdin", TerminalInput("y\n"))
    out = run.ok("forget-user", "alice")
    # 3 changes: tone's creation, and the tombstones of the two forgets that erased something
    # (forgetting what is not there writes no tombstone).
    assert out == "erased 1 memory, 3 changes, 0 messages, 0 episodes\n"
    assert [row["user_id"] for row in raw_rows(run.db_path, "memories")] == ["bob"]
    assert run.json("forget-user", "--yes", "bob")["erased"]["memories"] == 1
    assert raw_rows(run.db_path, "memories") == []


# -- global options -------------------------------------------------------------------------


def test_now_and_memkeeper_now(
    run: Cli, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run.ok("remember", "alice", "a", "1", now=datetime(2027, 3, 1, tzinfo=UTC))
    db = ["--db", str(run.db_path)]
    # A write at a pretend time far from the real clock needs --yes (test_cli_operator.py).
    assert main([*db, "--now", "2027-03-02", "remember", "alice", "b", "2", "--yes"]) == 0
    monkeypatch.setenv("MEMKEEPER_NOW", "2027-03-03T12:30:00+08:00")
    assert main([*db, "remember", "alice", "c", "3", "--yes"]) == 0
    # --now beats MEMKEEPER_NOW.
    assert main([*db, "--now", "2027-03-04T00:00Z", "note", "alice", "d", "--yes"]) == 0
    capsys.readouterr()
    created = [row["created_at"] for row in raw_rows(run.db_path, "memories")]
    assert created == [
        "2027-03-01T00:00:00.000000+00:00",
        "2027-03-02T00:00:00.000000+00:00",
        "2027-03-03T04:30:00.000000+00:00",
        "2027-03-04T00:00:00.000000+00:00",
    ]
    monkeypatch.setenv("MEMKEEPER_NOW", "not a time")
    assert main(["--db", str(run.db_path), "status"]) == EXIT_USAGE
    assert "is not an ISO-8601 time" in capsys.readouterr().err


def test_db_option_and_environment(
    tmp_path: Path,
    isolated_user_dirs: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["remember", "alice", "k", "default"]) == 0
    default = isolated_user_dirs / "data" / "memkeeper" / "memory.db"
    assert [r["value"] for r in raw_rows(default, "memories")] == ["default"]
    monkeypatch.setenv("MEMKEEPER_DB", str(tmp_path / "env.db"))
    assert main(["remember", "alice", "k", "env"]) == 0
    assert [r["value"] for r in raw_rows(tmp_path / "env.db", "memories")] == ["env"]
    assert main(["--db", str(tmp_path / "flag.db"), "remember", "alice", "k", "flag"]) == 0
    assert [r["value"] for r in raw_rows(tmp_path / "flag.db", "memories")] == ["flag"]
    assert [r["value"] for r in raw_rows(tmp_path / "env.db", "memories")] == ["env"]
    capsys.readouterr()


def test_version_and_verbose(run: Cli, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"memkeeper, version {__version__}\n"
    MemoryStore(run.db_path).close()  # status reads an existing database
    assert main(["--db", str(run.db_path), "-vv", "status"]) == 0
    capsys.readouterr()


READ_COMMANDS = [
    ["recall", "alice", "city"],
    ["get", "{id}"],
    ["list"],
    ["history", "alice", "s1"],
    ["log"],
    ["explain", "{id}"],
    ["status"],
    ["config", "show"],
    ["remember", "alice", "x", "y"],
    ["note", "alice", "n"],
    ["forget", "alice", "city"],
    ["forget-id", "{other}"],
    ["forget-user", "--yes", "alice"],
]


@pytest.mark.parametrize("argv", READ_COMMANDS, ids=lambda argv: argv[0])
def test_json_output_is_one_json_document(run: Cli, argv: list[str]) -> None:
    memory = run.json("remember", "alice", "city", "Beijing")
    other = run.json("note", "alice", "to be erased")
    with MemoryStore(run.db_path) as store:
        store.append_message("alice", "s1", "user", "hi")
    args = [a.replace("{id}", memory["id"]).replace("{other}", other["id"]) for a in argv]
    out = run.ok(*args, "--json")
    json.loads(out)  # exactly one document: anything else around it fails here


# -- help -----------------------------------------------------------------------------------


def walk(
    command: click.Command, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from walk(sub, (*path, name))


def test_every_command_and_option_has_help() -> None:
    missing = []
    commands = list(walk(cli, ("memkeeper",)))
    assert len(commands) > 15
    for path, command in commands:
        if not (command.help or command.short_help):
            missing.append(" ".join(path))
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden and not param.help:
                missing.append(f"{' '.join(path)} {'/'.join(param.opts)}")
    assert missing == []


@pytest.mark.parametrize(
    "path",
    [path[1:] for path, _ in walk(cli, ("memkeeper",))],
    ids=lambda path: " ".join(path) or "memkeeper",
)
def test_help_of_every_command(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*path, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: memkeeper")
    assert "-h, --help" in out
    assert main([*path, "-h"]) == 0


def test_foundation_commands_are_registered() -> None:
    names = {" ".join(path[1:]) for path, _ in walk(cli, ("memkeeper",))}
    assert names >= {
        "remember", "recall", "note", "forget", "forget-id", "forget-user", "list", "get",
        "history", "log", "explain", "status", "import", "export", "config", "config check",
        "config show", "config init", "config path",
    }  # fmt: skip


# -- the error contract ---------------------------------------------------------------------


def test_usage_errors_exit_2(run: Cli) -> None:
    for argv in (["no-such-command"], ["remember", "alice"], ["list", "--bogus"]):
        code, out, err = run(*argv)
        assert code == EXIT_USAGE, argv
        assert out == ""
        assert "Error:" in err
        assert "Traceback" not in err


def test_an_unexpected_error_is_one_line_unless_debugging(
    run: Cli, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(self):
        raise RuntimeError("something broke")

    MemoryStore(run.db_path).close()  # status reads an existing database
    monkeypatch.setattr(MemoryStore, "status", broken)
    code, _out, err = run("status")
    assert code == EXIT_ERROR
    assert one_error_line(err) == (
        "internal error (RuntimeError: something broke); set MEMKEEPER_DEBUG=1 for a traceback"
    )
    monkeypatch.setenv("MEMKEEPER_DEBUG", "1")
    with pytest.raises(RuntimeError, match="something broke"):
        main(["--db", str(run.db_path), "status"])
    capsys.readouterr()


@pytest.mark.parametrize(
    ("exception", "code", "message"),
    [
        (sqlite3.DatabaseError("disk image is malformed"), EXIT_DATABASE, "database error"),
        (PermissionError(13, "Permission denied", "/x/y"), EXIT_ERROR, "Permission denied"),
    ],
)
def test_low_level_errors_become_one_line(
    run: Cli, monkeypatch: pytest.MonkeyPatch, exception: BaseException, code: int, message: str
) -> None:
    def broken(self):
        raise exception

    MemoryStore(run.db_path).close()  # status reads an existing database
    monkeypatch.setattr(MemoryStore, "status", broken)
    got, _out, err = run("status")
    assert got == code
    assert message in one_error_line(err)


def test_an_interrupt_exits_130(run: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(self):
        raise KeyboardInterrupt

    MemoryStore(run.db_path).close()  # status reads an existing database
    monkeypatch.setattr(MemoryStore, "status", interrupted)
    code, out, err = run("status")
    assert (code, out) == (EXIT_INTERRUPTED, "")
    assert err.strip() == "memkeeper: aborted"


@pytest.mark.slow
def test_the_real_executable_exit_codes_and_no_tracebacks(tmp_path: Path) -> None:
    """The installed console script, end to end: each documented failure, one line."""
    db = tmp_path / "memory.db"
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not a database")
    bad_config = tmp_path / "bad.toml"
    bad_config.write_text("[jobs.expire]\nschedule = '0 3 * * 8'\n")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    env = {**os.environ, "MEMKEEPER_DB": str(db)}

    def real(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(MEMKEEPER), *argv],
            capture_output=True,
            text=True,
            input=stdin,
            env=env,
            timeout=60,
            check=False,
        )

    ok = real("remember", "alice", "city", "Beijing", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["value"] == "Beijing"
    assert real("recall", "alice", "city").stdout == "Beijing\n"
    cases = [
        (("recall", "alice", "nothing"), EXIT_NOT_FOUND, "no memory 'nothing'"),
        (("--db", str(text_file), "status"), EXIT_DATABASE, "not a usable SQLite database"),
        (("--config", str(bad_config), "status"), EXIT_CONFIG, "jobs.expire.schedule"),
        (
            ("--db", str(blocker / "sub" / "m.db"), "note", "a", "n"),
            EXIT_CANT_CREATE,
            "cannot create",
        ),
        (("--db", str(tmp_path / "typo.db"), "status"), EXIT_NO_INPUT, "typo.db does not exist"),
        (("remember", "alice", "k", ""), 65, "value must not be empty"),
        # No terminal to answer the prompt: a usage error that says how to confirm.
        (("forget-user", "alice"), EXIT_USAGE, "add --yes to confirm non-interactively"),
    ]
    for argv, code, message in cases:
        result = real(*argv)
        assert result.returncode == code, (argv, result.stderr)
        assert "Traceback" not in result.stderr
        assert message in result.stderr.strip().splitlines()[-1]
        assert result.stdout == ""
    usage = real("remember")
    assert usage.returncode == EXIT_USAGE
    assert "Traceback" not in usage.stderr
    assert text_file.read_text() == "not a database"
    assert not (tmp_path / "typo.db").exists()
    assert real("recall", "alice", "city").stdout == "Beijing\n"  # the prompt erased nothing
