"""The command line as an operator meets it (issue 8, items 8, 9, 11, 12, 15 and 16).

* reads never create a database: a mistyped path is exit 66 naming it, and nothing appears;
* a write at a pretend time (``--now``/``MEMKEEPER_NOW`` more than a minute from the real
  clock) needs ``--yes``; reads and ``--dry-run`` previews pretend freely;
* bad times and timezones are usage errors naming the value, never "internal error";
* stored text is escaped and cut on the terminal, exact in ``--json``;
* undo, restore and log say what the operator needs to know;
* unknown users, keys, ids and runs are exit 3 everywhere; ``--limit`` is the newest N;
  empty import files are refused and import conflicts are counted.

Every command goes through ``memkeeper.cli.main`` with real SQLite files in a temp directory.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import click
import pytest
from freezegun import freeze_time
from helpers import T0, dump_databases, raw_rows

from memkeeper import MemoryStore
from memkeeper.cli import cli, main
from memkeeper.cli.render import LINE_LIMIT, VALUE_LIMIT, shown
from memkeeper.clock import parse_user_time, system_now
from memkeeper.config import Config
from memkeeper.errors import (
    EXIT_DATA,
    EXIT_ERROR,
    EXIT_NO_INPUT,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    InvalidInput,
    InvalidTime,
)
from memkeeper.maintenance import curation
from memkeeper.maintenance.jobkit import Job
from memkeeper.maintenance.runner import run_once
from memkeeper.store.transfer import export_lines, import_file

DAY = timedelta(days=1)
EXIT_INTERRUPTED = 130


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def error(self) -> str:
        """The one error line (usage errors: the click 'Error:' line)."""
        assert "Traceback" not in self.err
        lines = [line for line in self.err.strip().splitlines() if line]
        return lines[-1]


class Run:
    """``main`` on one database; ``now`` is passed as --now, the real clock left alone."""

    def __init__(self, db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.db_path = db_path
        self.capsys = capsys

    def __call__(self, *argv: str, now: datetime | str | None = None, db: bool = True) -> Result:
        prefix = ["--db", str(self.db_path)] if db else []
        if now is not None:
            prefix += ["--now", now if isinstance(now, str) else now.isoformat()]
        code = main([*prefix, *argv])
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def ok(self, *argv: str, now: datetime | str | None = None) -> str:
        result = self(*argv, now=now)
        assert result.code == 0, result.err
        return result.out

    def json(self, *argv: str, now: datetime | str | None = None) -> object:
        return json.loads(self.ok(*argv, "--json", now=now))


@pytest.fixture
def run(db_path: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(db_path, capsys)


def files_under(directory: Path) -> list[str]:
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*"))


# -- item 8: reads never create a database ---------------------------------------------------

MISSING_DB_COMMANDS = [
    ["recall", "alice", "city"],
    ["list"],
    ["get", "0123456789abcdef"],
    ["status"],
    ["log"],
    ["explain", "0123456789abcdef"],
    ["history", "alice", "s1"],
    ["review", "list"],
    ["export"],
    ["export", "-o", "{tmp}/out.jsonl"],
    ["forget", "alice", "city"],
    ["forget-id", "0123456789abcdef"],
    ["forget-user", "--yes", "alice"],
    ["review", "keep", "0123456789abcdef"],
    ["review", "drop", "0123456789abcdef"],
    ["restore", "0123456789abcdef"],
    ["undo", "20260101T000000Z-expire-0000"],
    ["undo", "--dry-run", "20260101T000000Z-expire-0000"],
]


@pytest.mark.parametrize("argv", MISSING_DB_COMMANDS, ids=" ".join)
def test_a_read_on_a_missing_database_creates_nothing_and_exits_66(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    typo = tmp_path / "no" / "such" / "memroy.db"
    before = files_under(tmp_path)
    code = main(["--db", str(typo), *[a.replace("{tmp}", str(tmp_path)) for a in argv]])
    err = capsys.readouterr().err
    assert code == EXIT_NO_INPUT, err
    assert f"memory database {typo} does not exist" in err
    assert "Traceback" not in err
    assert files_under(tmp_path) == before  # no directory, no file, no lock, no export


def test_status_on_the_default_database_creates_no_data_directory(
    isolated_user_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status"]) == EXIT_NO_INPUT
    default = isolated_user_dirs / "data" / "memkeeper" / "memory.db"
    assert f"memory database {default} does not exist" in capsys.readouterr().err
    assert not (isolated_user_dirs / "data").exists()
    assert main(["remember", "alice", "city", "Beijing"]) == 0  # a write creates it
    assert main(["status"]) == 0
    assert default.exists()
    capsys.readouterr()


# -- item 9: a write at a pretend time needs --yes -------------------------------------------


@dataclass
class Aged:
    """A database whose entries are 400 days old: ids for every writing command."""

    ids: dict[str, str]
    import_file: Path


@pytest.fixture
def aged(db_path: Path, tmp_path: Path) -> Aged:
    real = system_now()
    store = MemoryStore(db_path, clock=lambda: real - 400 * DAY)
    ids = {name: store.remember("alice", name, "v").id for name in ("city", "zone", "team", "drop")}
    ids["note"] = store.add_note("alice", "a note").id
    ids["run"] = run_once(store, ["expire"], now=real - DAY).results[0].run_id
    curation.drop(store, [ids["team"]])  # cold now, for restore
    store.close()
    path = tmp_path / "carol.json"
    path.write_text(json.dumps({"facts": {"city": "Oslo"}}))
    return Aged(ids, path)


WRITE_COMMANDS = [
    ["remember", "alice", "k", "v"],
    ["recall", "alice", "city"],
    ["note", "alice", "n"],
    ["forget", "alice", "city"],
    ["forget-id", "{note}"],
    ["forget-user", "alice"],
    ["import", "{file}", "--user", "carol"],
    ["review", "keep", "{city}"],
    ["review", "drop", "{zone}"],
    ["restore", "{team}"],
    ["undo", "{run}"],
    ["run-once"],
]


@pytest.mark.parametrize("argv", WRITE_COMMANDS, ids=lambda argv: " ".join(argv[:2]))
@pytest.mark.parametrize("offset", [-2 * DAY, 400 * DAY], ids=["past", "future"])
def test_a_write_at_a_pretend_time_needs_yes(
    run: Run, aged: Aged, argv: list[str], offset: timedelta
) -> None:
    args = [a.replace("{file}", str(aged.import_file)) for a in argv]
    args = [a.format(**aged.ids) if a.startswith("{") else a for a in args]
    pretend = system_now() + offset
    before = dump_databases(run.db_path)

    refused = run(*args, now=pretend)

    assert refused.code == EXIT_USAGE
    assert f"--now {pretend.isoformat()} is " in refused.error
    assert "the real clock" in refused.error
    assert "Add --yes to do it anyway" in refused.error or "or --yes to do it anyway" in (
        refused.error
    )
    assert dump_databases(run.db_path) == before  # nothing written, not even a run row

    done = run(*args, "--yes", now=pretend)
    assert done.code == 0, done.err
    assert dump_databases(run.db_path) != before


def test_memkeeper_now_is_guarded_too_and_named(
    run: Run, aged: Aged, monkeypatch: pytest.MonkeyPatch
) -> None:
    pretend = (system_now() - 30 * DAY).isoformat()
    monkeypatch.setenv("MEMKEEPER_NOW", pretend)
    result = run("remember", "alice", "k", "v")
    assert result.code == EXIT_USAGE
    assert f"MEMKEEPER_NOW={parse_user_time(pretend).isoformat()} is 30 days behind" in (
        result.error
    )
    assert run("remember", "alice", "k", "v", "--yes").code == 0


def test_within_a_minute_of_the_real_clock_needs_no_yes(run: Run) -> None:
    with freeze_time(T0, tick=True):
        assert run("remember", "alice", "k", "v", now=T0 + timedelta(seconds=50)).code == 0
        late = run("remember", "alice", "k", "w", now=T0 + timedelta(seconds=90))
        assert late.code == EXIT_USAGE
        assert "1 minute ahead of the real clock" in late.error


def test_reads_and_dry_runs_pretend_freely(run: Run, aged: Aged) -> None:
    before = dump_databases(run.db_path)
    far = system_now() + 400 * DAY
    for argv in (
        ["status"],
        ["list"],
        ["log"],
        ["get", aged.ids["city"]],
        ["explain", aged.ids["city"]],
        ["review", "list"],
        ["export"],
        ["run-once", "--dry-run"],
        ["undo", "--dry-run", aged.ids["run"]],
    ):
        assert run(*argv, now=far).code == 0, argv
    assert dump_databases(run.db_path) == before


def test_forget_user_refuses_a_pretend_time_before_asking(
    run: Run, aged: Aged, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    result = run("forget-user", "alice", now=system_now() - 3 * DAY)
    assert result.code == EXIT_USAGE
    assert "Erase everything" not in result.err  # no prompt was shown
    assert raw_rows(run.db_path, "memories")


# -- item 11: bad times and zones are usage errors naming the value --------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("9999-12-31T23:59:59", "'9999-12-31T23:59:59' is out of range"),
        ("9999-12-31T23:59:59-01:00", "'9999-12-31T23:59:59-01:00' is out of range"),
        ("0001-01-01T00:00:00+01:00", "'0001-01-01T00:00:00+01:00' is out of range"),
        ("1969-12-31", "'1969-12-31' is out of range"),
        ("3000-01-01", "'3000-01-01' is out of range"),
        ("", "empty time ''"),
        ("   ", "empty time '   '"),
        ("next tuesday", "'next tuesday' is not an ISO-8601 time"),
    ],
)
def test_a_bad_now_is_a_usage_error_naming_it(run: Run, value: str, message: str) -> None:
    MemoryStore(run.db_path).close()
    for argv in (["status"], ["run-once", "--dry-run"], ["remember", "a", "k", "v", "--yes"]):
        result = run(*argv, now=value)
        assert result.code == EXIT_USAGE, (argv, result.err)
        assert "Invalid value for '--now'" in result.error
        assert message in result.error
    assert raw_rows(run.db_path, "memories") == []


def test_an_empty_memkeeper_now_is_an_error_not_ignored(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    MemoryStore(run.db_path).close()
    monkeypatch.setenv("MEMKEEPER_NOW", "")
    result = run("status")
    assert result.code == EXIT_USAGE
    assert "MEMKEEPER_NOW is set but empty" in result.error


def test_the_edges_of_the_time_range() -> None:
    assert parse_user_time("1970-01-01").isoformat() == "1970-01-01T00:00:00+00:00"
    assert parse_user_time("2999-12-31T23:59:59Z").year == 2999
    with pytest.raises(InvalidTime, match="out of range"):
        parse_user_time("2999-12-31T23:59:59-00:01")


def test_an_unknown_import_timezone_is_a_usage_error(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "agent_memory.json"
    path.write_text(json.dumps({"notes": [{"time": "2026-07-01 10:00", "note": "x"}]}))
    result = run("import", str(path), "--user", "alice", "--timezone", "Mars/Olympus")
    assert result.code == EXIT_USAGE
    assert "Invalid value for '--timezone': unknown timezone 'Mars/Olympus'" in result.error
    assert not run.db_path.exists()


def test_an_unknown_timezone_from_the_library_is_invalid_input(
    store: MemoryStore, tmp_path: Path
) -> None:
    path = tmp_path / "agent_memory.json"
    path.write_text(json.dumps({"notes": [{"time": "2026-07-01 10:00", "note": "x"}]}))
    for zone in ("Mars/Olympus", "../../etc/passwd"):
        with pytest.raises(InvalidInput, match="unknown timezone"):
            import_file(store, path, user_id="alice", timezone=zone)
    assert store.list() == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            {"notes": [{"time": "0001-01-01 00:00", "note": "x"}]},
            "notes[0].time: '0001-01-01 00:00' is out of range",
        ),
        (
            {"notes": [{"time": "9999-12-31 23:59", "note": "x"}]},
            "notes[0].time: '9999-12-31 23:59' is out of range",
        ),
    ],
)
def test_an_out_of_range_time_in_an_agent_file_is_bad_data(
    run: Run, tmp_path: Path, content: dict, message: str
) -> None:
    path = tmp_path / "agent_memory.json"
    path.write_text(json.dumps(content))
    result = run("import", str(path), "--user", "alice", "--timezone", "Asia/Shanghai")
    assert result.code == EXIT_DATA
    assert message in result.error
    assert "is out of range" in result.error


def test_an_out_of_range_time_in_a_jsonl_line_is_bad_data(
    run: Run, store: MemoryStore, tmp_path: Path
) -> None:
    store.remember("alice", "city", "Beijing")
    record = json.loads(next(export_lines(store)))
    record["id"] = "1111111111111111"
    record["created_at"] = "0001-01-01T00:00:00+05:00"
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(record) + "\n")
    store.close()
    result = run("import", str(path))
    assert result.code == EXIT_DATA
    assert "line 1: created_at '0001-01-01T00:00:00+05:00' is out of range" in result.error


# -- item 12: stored text is escaped on the terminal, exact in --json ------------------------

HOSTILE = "Bei\x1b]0;pwned\x07jing\x1b[31m red\x9b2J\x7f\u202eevil\r\nforged line"
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\x7f", "\u202e", "\r")


def assert_safe(text: str) -> None:
    for char in RAW_CONTROLS:
        assert char not in text, repr(text)


def test_shown_escapes_controls_and_marks_what_it_cuts() -> None:
    assert shown("plain 小明 🐱 C:\\path") == "plain 小明 🐱 C:\\path"
    assert shown("a\x1b[31mb\x07\n\t\x9b\x7f\u202e\u2028") == (
        "a\\x1b[31mb\\x07\\n\\t\\x9b\\x7f\\u202e\\u2028"
    )
    assert shown("x" * 10, 4) == "xxxx… (+6 chars)"
    assert shown("x" * 4, 4) == "xxxx"
    assert shown("a \n b", flat=True) == "a b"
    assert shown(None) == ""
    assert shown("\ud800") == "\\ud800"  # a lone surrogate cannot reach the terminal raw


def test_every_command_that_prints_stored_text_escapes_it(
    run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    real = system_now()
    with MemoryStore(run.db_path, clock=lambda: real - 400 * DAY) as store:
        memory = store.remember("alice", "city", HOSTILE, source="agent\x1b[2J")
        store.append_message("alice", "s1", "user", HOSTILE)
        run_id = run_once(store, ["expire"], now=real - DAY).results[0].run_id
    outputs = [
        run("remember", "alice", "other", HOSTILE),
        run("list"),
        run("review", "list"),
        run("get", memory.id),
        run("log"),
        run("explain", memory.id),
        run("history", "alice", "s1"),
        run("status"),
        run("recall", "alice", "city"),  # renews it: the undo below meets a conflict
        run("undo", run_id),
    ]
    for result in outputs:
        assert result.code == 0, result.err
        assert_safe(result.out + result.err)
    listing = outputs[1].out
    assert "Bei\\x1b]0;pwned\\x07jing" in listing
    assert "Bei\\x1b]0;pwned\\x07jing\\x1b[31m red\\x9b2J\\x7f\\u202eevil\\r\\nforged line" in (
        outputs[8].out
    )
    assert len(outputs[6].out.splitlines()) == 1  # one line per message: nothing forged
    assert "conflict" in outputs[9].out
    # --json keeps the exact text.
    assert run.json("get", memory.id)["value"] == HOSTILE
    assert run.json("get", memory.id)["source"] == "agent\x1b[2J"
    assert run.json("history", "alice", "s1")[0]["content"] == HOSTILE
    capsys.readouterr()


def test_a_failed_jobs_error_is_escaped_in_run_once_and_status(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memkeeper.jobs import REGISTRY

    def broken(_ctx) -> None:
        raise RuntimeError("bad entry \x1b]0;title\x07")

    monkeypatch.setitem(REGISTRY, "demote", Job("demote", "broken for the test", broken))
    result = run("run-once", "--job", "demote")
    assert result.code == 4
    assert_safe(result.out + result.err)
    assert "\\x1b]0;title\\x07" in result.out
    status = run("status")
    assert_safe(status.out)
    assert "\\x1b]0;title\\x07" in status.out


def test_dry_run_lines_escape_stored_keys_and_owners(run: Run, tmp_path: Path) -> None:
    real = system_now()
    with MemoryStore(run.db_path, clock=lambda: real - 400 * DAY) as store:
        store.remember("alice\u202e", "city", "v")
    result = run("run-once", "--dry-run", "--job", "expire")
    assert result.code == 0
    assert "would expire" in result.out
    assert "alice\\u202e" in result.out
    assert_safe(result.out)


def test_long_values_are_cut_with_a_marker_and_exact_in_json(run: Run) -> None:
    value = "A" * (VALUE_LIMIT + 1234)
    memory = run.json("remember", "alice", "essay", value)
    assert memory["value"] == value
    out = run.ok("recall", "alice", "essay")
    assert out == "A" * VALUE_LIMIT + "… (+1234 chars)\n"
    [line] = [x for x in run.ok("get", memory["id"]).splitlines() if x.startswith("value ")]
    assert line.endswith(f"  {'A' * VALUE_LIMIT}… (+1234 chars)")
    listing = run.ok("list")
    assert f"essay = {'A' * LINE_LIMIT}… (+{len(value) - LINE_LIMIT} chars)" in listing
    assert run.ok("remember", "alice", "essay", value).endswith("… (+1234 chars) (active)\n")
    assert run.json("recall", "alice", "essay")["value"] == value


# -- item 15: undo, restore and log tell the operator what matters ---------------------------


def test_undo_of_a_prune_run_says_the_next_prune_retires_them_again(
    run: Run, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[jobs.prune]\nmax_facts = 2\n")
    cap = Config.model_validate({"jobs": {"prune": {"max_facts": 2}}})
    with MemoryStore(run.db_path, config=cap) as store:
        for key in ("a", "b", "c", "d"):
            store.remember("u", key, "v", namespace="acme")
        run_id = run_once(store, ["prune"]).results[0].run_id
    preview = run("--config", str(config), "undo", "--dry-run", run_id)
    assert "would revert 2 change(s)" in preview.out
    assert "user 'u' in namespace 'acme' has 4 active facts, over the cap of 2" in preview.out
    result = run("--config", str(config), "undo", run_id)
    assert result.code == 0
    assert "reverted 2 change(s)" in result.out
    note = result.out.split("note: ", 1)[1]
    assert "the next prune run will retire 2 of them again" in note
    assert "--pin" in note and "[jobs.prune] max_facts" in note
    data = run.json("--config", str(config), "undo", run_id)
    assert data["undone_job"] == "prune" and data["already_undone"]


def test_undo_of_another_run_adds_no_prune_note(run: Run) -> None:
    real = system_now()
    with MemoryStore(run.db_path, clock=lambda: real - 400 * DAY) as store:
        store.remember("u", "a", "v")
        run_id = run_once(store, ["expire"], now=real).results[0].run_id
    result = run("undo", run_id)
    assert "reverted 1 change(s)" in result.out
    assert "note:" not in result.out


def test_an_undo_conflict_names_the_entry(run: Run) -> None:
    real = system_now()
    with MemoryStore(run.db_path, clock=lambda: real - 400 * DAY) as store:
        memory = store.remember("alice", "city", "Beijing", namespace="acme")
        run_id = run_once(store, ["expire"], now=real).results[0].run_id
    run.ok("recall", "alice", "city", "-n", "acme")  # changed since the run
    result = run("undo", run_id)
    [line] = [line for line in result.out.splitlines() if "conflict" in line]
    assert f"of {memory.id} (user 'alice', namespace 'acme', fact 'city')" in line
    assert line.endswith("changed since that run")
    data = run.json("undo", run_id)
    [entry] = data["conflict_entries"].values()
    assert entry == {
        "memory_id": memory.id,
        "user_id": "alice",
        "namespace": "acme",
        "kind": "fact",
        "key": "city",
    }


def test_restoring_an_old_value_says_which_value_is_now_current(run: Run) -> None:
    with MemoryStore(run.db_path) as store:
        old = store.remember("alice", "city", "Beijing")
        store.remember("alice", "city", "Shanghai")
        current = store.recall("alice", "city")
        run_once(store, ["settle"], now=system_now() + 30 * DAY, dry_run=False)
        assert store.get(old.id).state == "cold"
    out = run.ok("restore", old.id)
    assert out == (
        f"restored {old.id}: fact 'city' = 'Beijing' is current again, replacing "
        f"{current.id} ('Shanghai'), which is now superseded\n"
    )
    assert run.ok("recall", "alice", "city") == "Beijing\n"
    data = run.json("get", current.id)
    assert data["state"] == "superseded"


def test_restoring_with_no_other_value_says_it_is_current(run: Run) -> None:
    real = system_now()
    with MemoryStore(run.db_path, clock=lambda: real - 400 * DAY) as store:
        memory = store.remember("alice", "team", "blue")
        store.add_note("alice", "a note")
        run_once(store, ["expire"], now=real - 2 * DAY)
        note = store.list("alice", kind="note")[0]
        curation.drop(store, [memory.id, note.id])
    out = run.ok("restore", memory.id, note.id)
    assert out.splitlines() == [
        f"restored {memory.id}: fact 'team' = 'blue' is current",
        f"restored {note.id}",
    ]


def test_log_lines_show_user_and_key(run: Run) -> None:
    fact = run.json("remember", "alice", "city", "Beijing", "-n", "acme")
    note = run.json("note", "bob", "call Friday")
    lines = run.ok("log").splitlines()
    assert lines[0].startswith(f"#1 {fact['id']} alice/acme fact 'city'  ")
    assert lines[1].startswith(f"#2 {note['id']} bob note  ")


# -- item 16: unknown is exit 3 everywhere; --limit is the newest N; import edges ------------


@pytest.fixture
def populated(run: Run) -> dict[str, str]:
    with MemoryStore(run.db_path) as store:
        memory = store.remember("alice", "city", "Beijing")
        store.append_message("alice", "s1", "user", "hi")
    return {"id": memory.id}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["forget", "alice", "nothing"], "no memory 'nothing' for user 'alice'"),
        (["forget", "bob", "city"], "no memory 'city' for user 'bob'"),
        (["forget", "alice", "city", "-n", "acme"], "in namespace 'acme'"),
        (["forget-id", "ffffffffffffffff"], "no memory with id 'ffffffffffffffff'"),
        (["forget-user", "--yes", "nobody"], "no user 'nobody'"),
        (["review", "keep", "ffffffffffffffff"], "no memory with id 'ffffffffffffffff'"),
        (["review", "drop", "ffffffffffffffff"], "no memory with id 'ffffffffffffffff'"),
        (["restore", "ffffffffffffffff"], "no memory with id 'ffffffffffffffff'"),
        (["history", "alice", "s2"], "no session 's2' for user 'alice'"),
        (["history", "bob", "s1"], "no session 's1' for user 'bob'"),
        (["undo", "20260101T000000Z-expire-0000"], "no run '20260101T000000Z-expire-0000'"),
        (["explain", "ffffffffffffffff"], "no memory with id 'ffffffffffffffff'"),
        (["get", "ffffffffffffffff"], "no memory with id 'ffffffffffffffff'"),
        (["recall", "alice", "nothing"], "no memory 'nothing' for user 'alice'"),
        (["log", "--run", "20260101T000000Z-expire-0000"], "no run '20260101T000000Z"),
        (["log", "--memory", "ffffffffffffffff"], "no memory with id 'ffffffffffffffff'"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_an_unknown_user_key_id_or_run_is_exit_3(
    run: Run, populated: dict[str, str], argv: list[str], message: str
) -> None:
    before = dump_databases(run.db_path)
    result = run(*argv)
    assert result.code == EXIT_NOT_FOUND, result.err
    assert result.out == ""
    assert message in result.error
    as_json = run(*argv, "--json")
    assert as_json.code == EXIT_NOT_FOUND, as_json.err
    assert message in as_json.error
    if as_json.out:  # review and restore still print their report, naming what is missing
        assert json.loads(as_json.out)["missing"] == ["ffffffffffffffff"]
    if argv[0] not in ("forget", "forget-user"):
        assert dump_databases(run.db_path) == before


def test_review_with_one_unknown_id_does_the_rest_and_exits_3(run: Run) -> None:
    real = system_now()
    with MemoryStore(run.db_path, clock=lambda: real - 400 * DAY) as store:
        memory = store.remember("alice", "city", "Beijing")
        run_once(store, ["expire"], now=real)
    result = run("review", "keep", memory.id, "ffffffffffffffff")
    assert result.code == EXIT_NOT_FOUND
    assert result.out == f"kept {memory.id}\n"
    assert "no memory with id 'ffffffffffffffff' (1 other(s) kept)" in result.error
    assert run.json("get", memory.id)["state"] == "active"
    # Known but not pending review stays the "nothing done" error (exit 1), not 3.
    again = run("review", "keep", memory.id)
    assert again.code == EXIT_ERROR
    assert "not pending review (it is active)" in again.err


def test_known_but_empty_is_not_unknown(run: Run) -> None:
    """A filter that matches nothing is an empty listing; only named things can be unknown."""
    run.ok("remember", "alice", "city", "Beijing")
    assert run.ok("list", "--user", "nobody") == "(no memories)\n"
    assert run.ok("log", "--user", "nobody") == "(no changes)\n"
    assert run.ok("review", "list") == "(no memories)\n"


def test_history_of_a_fully_summarized_session_is_not_unknown(run: Run) -> None:
    with MemoryStore(run.db_path) as store:
        message = store.append_message("alice", "s1", "user", "hi")
        store.storage.hot.conn.execute(
            "UPDATE messages SET summarized_at = ? WHERE id = ?", [T0.isoformat(), message.id]
        )
        store.storage.hot.conn.commit()
    assert run.ok("history", "alice", "s1") == "(no unsummarized messages)\n"
    assert run.json("history", "alice", "s1") == []


def test_limit_means_the_newest_everywhere(run: Run) -> None:
    with MemoryStore(run.db_path) as store:
        clock = {"now": system_now() - 100 * DAY}
        store.clock = lambda: clock["now"]
        ids = []
        for key in ("a", "b", "c"):
            ids.append(store.remember("alice", key, "v").id)
            store.append_message("alice", "s1", "user", key)
            clock["now"] += DAY
        old = store.remember("alice", "a", "newer").id  # "a" superseded, stays hot
        run_once(store, ["settle"], now=clock["now"] + 30 * DAY)  # the first "a" goes cold
    assert [m["id"] for m in run.json("list", "--limit", "2")] == [ids[2], old]
    # hot and cold together, in creation order (the cold entry is the oldest)
    assert [m["id"] for m in run.json("list")] == [*ids, old]
    assert [m["id"] for m in run.json("list", "--limit", "1")] == [old]
    assert [m["content"] for m in run.json("history", "alice", "s1", "--limit", "2")] == [
        "b",
        "c",
    ]
    newest = run.json("log")[-2:]
    assert run.json("log", "--limit", "2") == newest


def walk(command: click.Command, path: tuple[str, ...]) -> Iterator[tuple[str, click.Command]]:
    yield " ".join(path), command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from walk(sub, (*path, name))


def test_every_limit_option_says_it_is_the_newest() -> None:
    found = {}
    for path, command in walk(cli, ()):
        for param in command.params:
            if isinstance(param, click.Option) and "--limit" in param.opts:
                found[path] = param.help or ""
    assert set(found) >= {"list", "log", "history"}
    # search's and context's --limit is the best K by score, and their help says so.
    for ranked in ("search", "context"):
        assert "best" in found.pop(ranked, "best")
    assert {path: "newest" in text for path, text in found.items()} == dict.fromkeys(found, True)


def test_every_writing_command_takes_yes() -> None:
    commands = dict(walk(cli, ()))
    for path in (
        "remember",
        "recall",
        "note",
        "forget",
        "forget-id",
        "forget-user",
        "import",
        "review keep",
        "review drop",
        "restore",
        "undo",
        "run-once",
    ):
        assert any(
            isinstance(p, click.Option) and "--yes" in p.opts for p in commands[path].params
        ), path


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.jsonl", "", "the file is empty"),
        ("blank.jsonl", "\n  \n\n", "the file is empty"),
        ("empty.json", "", "the file is empty"),
        ("agent_memory.json", "{}", "no facts and no notes"),
        ("agent_memory.json", '{"facts": {}, "notes": []}', "no facts and no notes"),
    ],
)
def test_an_import_file_with_nothing_to_import_is_refused(
    run: Run, tmp_path: Path, name: str, content: str, message: str
) -> None:
    MemoryStore(run.db_path).close()
    before = dump_databases(run.db_path)
    path = tmp_path / name
    path.write_text(content)
    result = run("import", str(path), "--user", "alice")
    assert result.code == EXIT_DATA
    assert f"{path}: {message}" in result.error
    assert dump_databases(run.db_path) == before


def test_an_import_conflict_is_counted_in_the_summary(
    run: Run, store: MemoryStore, tmp_path: Path
) -> None:
    memory = store.remember("alice", "city", "Beijing")
    other = store.remember("alice", "tone", "brief")
    lines = {json.loads(line)["id"]: line for line in export_lines(store)}
    changed = json.loads(lines[memory.id])
    changed["value"] = "changed elsewhere"
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(changed) + "\n" + lines[other.id] + "\n")
    store.close()
    before = dump_databases(run.db_path)
    result = run("import", str(path))
    assert result.code == 0
    assert result.out == (
        f"imported {path} (jsonl): 0 created, 1 already present, 0 superseded an older value, "
        "1 in conflict (left as stored)\n"
    )
    assert f"conflict: line 1: id {memory.id} exists with different content" in result.err
    data = run.json("import", str(path))
    assert (data["conflicting"], data["unchanged"]) == (1, 1)
    assert dump_databases(run.db_path) == before


def test_a_cold_import_line_stored_meanwhile_is_a_conflict(
    store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the check and the write another process stores the id: reported, not lost."""
    import memkeeper.store.import_apply as importexport

    old = store.remember("alice", "city", "Beijing")
    store.remember("alice", "city", "Shanghai")
    run_once(store, ["settle"], now=system_now() + 30 * DAY)
    [line] = [json.loads(x) for x in export_lines(store) if json.loads(x)["id"] == old.id]
    assert line["state"] == "cold"
    line["id"] = "2222222222222222"
    path = tmp_path / "cold.jsonl"
    path.write_text(json.dumps(line) + "\n")
    real_apply = importexport.apply

    def racing_apply(storage, transitions, **options):
        real_apply(storage, transitions, actor="api:other", now=options["now"])  # wins the race
        return real_apply(storage, transitions, **options)

    monkeypatch.setattr(importexport, "apply", racing_apply)
    report = import_file(store, path)
    assert report.created == 0
    assert report.conflicts == ["id 2222222222222222 was stored meanwhile; left as it is"]
    assert report.to_dict()["conflicting"] == 1
    assert store.get("2222222222222222").state == "cold"


def test_json_output_escapes_c1_controls_and_stays_exact(tmp_path: Path, capsys) -> None:
    """``--json`` is exact for programs and inert on a terminal: U+009B (a one-byte CSI on
    some terminals) and the line separators come out escaped, and decode to the same text."""
    db = tmp_path / "memory.db"
    value = "PDF\x9b31m and\u2028more\x85"
    with MemoryStore(db) as store:
        memory = store.remember("alice", "format", value)
    assert main(["--db", str(db), "get", memory.id, "--json"]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x9b\u2028\x85")
    assert "\\u009b" in out and json.loads(out)["value"] == value
