"""Expected operational failures say one clear line; the "no API key" notice comes once a run.

Issue 8, item 13: the LLM endpoint down, a refused key (401), rate limits outlasting the retries
(429), a full disk and a read-only database are things an operator fixes, not bugs: each is
one line naming the cause — in the JSON log of a job run and on the command line — with the
traceback only at ``-vv``. A read-only database is named as a permission problem (exit 73),
never as "not a usable SQLite database".

Item 17: a summarize run skipped for a missing API key says so once per run, and covers its
scheduled time, so ``run-once --due`` does not re-run it every time.

The read-only matrices run real processes that cannot write the files: as an unprivileged
user (``setpriv``, for chmod'ed files and directories; root ignores permission bits) and as
root in a private mount namespace with the file or directory bind-mounted read-only
(``unshare -m``). Each is skipped, with the reason, where the machine does not allow it.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM, add_session, error
from helpers.logs import capture_logs
from memkeeper.jobs import REGISTRY

import memkeeper.service.scheduler
import memkeeper.storage.sqlite.permissions
from memkeeper import MemoryStore, logs
from memkeeper.cli import main
from memkeeper.errors import (
    EXIT_CANT_CREATE,
    EXIT_DATABASE,
    EXIT_JOB_FAILED,
    MemkeeperError,
    StorageUnwritable,
)
from memkeeper.maintenance.jobkit import Job
from memkeeper.maintenance.runner import run_job
from memkeeper.service.scheduler import ServiceJobs, run_due
from memkeeper.storage.sqlite.permissions import ReadOnlyDatabase, read_only_error

KEY = "0123456789abcdef.TestKeySecretPart"
T0 = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)
NO_KEY = "no API key"


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def other_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.startswith("{")]


def loud(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records an operator sees at the default level (warning and above)."""
    return [r for r in records if r.get("level") in ("warning", "error", "critical")]


class LogCapture:
    """memkeeper's log as JSON records, at a chosen level."""

    def __init__(self) -> None:
        self.stream = io.StringIO()

    def configure(self, level: str) -> None:
        logs.configure(level=level, fmt="json", stream=self.stream)

    @property
    def records(self) -> list[dict[str, Any]]:
        return json_lines(self.stream.getvalue())

    def events(self, event: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("event") == event]


@pytest.fixture
def log() -> LogCapture:
    return LogCapture()


# -- the LLM endpoint down, 401, 429 after the retries: one line in the job's log ----------------


def closed_port_url() -> str:
    """The URL of a port nothing listens on: every connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/api/paas/v4"


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def llm_setup(tmp_path: Path, url: str) -> tuple[Path, Path]:
    """A database with three due sessions, and a config pointing the LLM at ``url``."""
    db = tmp_path / "memory.db"
    with MemoryStore(db) as store:
        for n in range(3):
            add_session(store, f"s{n}", 21, start=T0)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[llm]\nbase_url = "{url}"\nmax_retries = 1\nretry_backoff_seconds = 0.01\n'
        "timeout_seconds = 10\n",
        encoding="utf-8",
    )
    return db, config


LLM_FAILURES = {
    "endpoint down": (None, "connection refused"),
    "key refused (401)": (401, "refused the API key (HTTP 401)"),
    "rate limited (429) after the retries": (429, "HTTP 429"),
}


@pytest.mark.parametrize("failure", sorted(LLM_FAILURES))
def test_an_llm_failure_is_one_log_line_with_the_cause_and_a_traceback_only_at_vv(
    tmp_path: Path,
    fake: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    failure: str,
) -> None:
    status, cause = LLM_FAILURES[failure]
    if status is None:
        url = closed_port_url()
    else:
        url = fake.url
        fake.responder = lambda _request: error(status, "fake failure")
    db, config = llm_setup(tmp_path, url)
    monkeypatch.setenv("ZHIPUAI_API_KEY", KEY)
    argv = ["--db", str(db), "--config", str(config), "run-once", "--job", "summarize"]

    assert main(argv) == EXIT_JOB_FAILED
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = loud(json_lines(err))  # one line: not one per session, no traceback
    assert line["event"] == "job failed"
    assert cause in line["error"]
    assert "exception" not in line
    assert other_lines(err) == ["memkeeper: error: job(s) failed: summarize"]
    assert KEY not in err

    assert main(["-vv", *argv]) == EXIT_JOB_FAILED
    err = capsys.readouterr().err
    (failed,) = [r for r in json_lines(err) if r.get("event") == "job failed"]
    assert "Traceback" in failed["exception"]
    assert KEY not in err


def test_a_job_failing_for_an_operational_reason_is_one_line(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, log: LogCapture
) -> None:
    def disk_full(_ctx: Any) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setitem(REGISTRY, "expire", Job("expire", "fills the disk", disk_full))
    log.configure("info")
    assert run_job(store, "expire", now=store.now()).status == "failed"
    (line,) = log.events("job failed")
    assert line["error"] == "OperationalError: database or disk is full"
    assert "exception" not in line

    log.configure("debug")
    run_job(store, "expire", now=store.now())
    assert "Traceback" in log.events("job failed")[-1]["exception"]


def test_a_bug_in_a_job_keeps_its_traceback(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, log: LogCapture
) -> None:
    def broken(_ctx: Any) -> None:
        raise KeyError("a bug")

    monkeypatch.setitem(REGISTRY, "expire", Job("expire", "broken", broken))
    log.configure("warning")
    run_job(store, "expire", now=store.now())
    (line,) = log.events("job failed")
    assert "Traceback" in line["exception"]


def test_the_service_logs_a_database_it_cannot_write_in_one_line(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, log: LogCapture
) -> None:
    def unwritable(*_args: Any, **_kwargs: Any) -> None:
        raise StorageUnwritable(f"database file {store.path} is read-only for this user")

    monkeypatch.setattr(memkeeper.service.scheduler, "run_job", unwritable)
    log.configure("info")
    assert ServiceJobs(store).run_scheduled("expire") is None
    (line,) = log.events("could not run job")
    assert line["level"] == "error"
    assert str(store.path) in line["error"]
    assert "exception" not in line


def test_connection_failures_name_the_cause() -> None:
    from memkeeper.config import LlmSection
    from memkeeper.llm import LlmClient, LlmUnavailable

    section = LlmSection(base_url=closed_port_url(), max_retries=0, timeout_seconds=10)
    with (
        LlmClient(section, api_key=KEY) as client,
        pytest.raises(LlmUnavailable, match="connection refused"),
    ):
        client.complete([{"role": "user", "content": "hello"}])


# -- the command line: one line, the traceback only at -vv ---------------------------------------


def failing_status(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    def status(self: MemoryStore) -> None:
        raise exc

    monkeypatch.setattr(MemoryStore, "status", status)


def test_a_traceback_only_at_vv(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    MemoryStore(db_path).close()
    failing_status(monkeypatch, StorageUnwritable(f"database file {db_path} is read-only"))
    for verbosity in ([], ["-v"]):
        assert main([*verbosity, "--db", str(db_path), "status"]) == EXIT_CANT_CREATE
        err = capsys.readouterr().err
        assert err == f"memkeeper: error: database file {db_path} is read-only\n"
    assert main(["-vv", "--db", str(db_path), "status"]) == EXIT_CANT_CREATE
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.splitlines()[-1] == f"memkeeper: error: database file {db_path} is read-only"


@pytest.mark.parametrize(
    "exc",
    [
        sqlite3.OperationalError("database or disk is full"),
        OSError(28, "No space left on device", "/data/memory.db-wal"),
    ],
    ids=["sqlite", "os"],
)
def test_a_full_disk_is_one_clear_line(
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    exc: BaseException,
) -> None:
    MemoryStore(db_path).close()
    failing_status(monkeypatch, exc)
    assert main(["--db", str(db_path), "status"]) == EXIT_CANT_CREATE
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("memkeeper: error: the disk is full (")
    assert "free some space" in line


def test_other_database_errors_keep_exit_74(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    MemoryStore(db_path).close()
    failing_status(monkeypatch, sqlite3.DatabaseError("disk image is malformed"))
    assert main(["--db", str(db_path), "status"]) == EXIT_DATABASE
    assert "database error: disk image is malformed" in capsys.readouterr().err


# -- a read-only database, in this process: SQLite told to open files read-only ---------------


@pytest.fixture
def populated(db_path: Path) -> str:
    with MemoryStore(db_path) as store:
        memory = store.remember("alice", "city", "Beijing")
        store.append_message("alice", "s1", "user", "hello")
    return memory.id


def open_read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every SQLite file opened from now on is opened read-only (``mode=ro``), root or not."""
    connect = sqlite3.connect

    def read_only(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        return connect(f"file:{database}?mode=ro", *args, uri=True, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", read_only)


def test_a_write_to_a_read_only_database_raises_storage_unwritable_naming_the_file(
    db_path: Path, populated: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_read_only(monkeypatch)
    with MemoryStore(db_path) as store:
        assert store.get(populated).value == "Beijing"  # reads work
        writes: list[Callable[[], Any]] = [
            lambda: store.remember("alice", "city", "Shanghai"),
            lambda: store.add_note("alice", "a note"),
            lambda: store.append_message("alice", "s1", "user", "more"),
        ]
        for write in writes:
            with pytest.raises(StorageUnwritable) as caught:
                write()
            assert isinstance(caught.value, ReadOnlyDatabase)
            assert caught.value.exit_code == EXIT_CANT_CREATE
            assert caught.value.path == db_path
            assert f"database file {db_path} is read-only" in str(caught.value)
            # Still an sqlite3 error for code that handles SQLite's own (best-effort steps).
            assert isinstance(caught.value, sqlite3.OperationalError)
    monkeypatch.undo()
    with MemoryStore(db_path) as store:
        assert store.get(populated).value == "Beijing"


def test_recall_on_a_read_only_database_returns_the_value_and_says_the_use_was_not_recorded(
    db_path: Path, populated: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_read_only(monkeypatch)
    with MemoryStore(db_path) as store, capture_logs() as logged:
        memory = store.recall("alice", "city")
        assert memory is not None and memory.value == "Beijing"
        assert store.recall("alice", "nothing") is None
    warnings = [e for e in logged if e["log_level"] == "warning"]
    assert [e["event"] for e in warnings] == ["recalled, but its use could not be recorded"]
    assert str(db_path) in warnings[0]["cause"]
    monkeypatch.undo()
    with MemoryStore(db_path) as store:
        assert store.get(populated).access_count == 0  # nothing was written


def test_the_cli_names_a_read_only_database_as_a_permission_problem(
    db_path: Path,
    populated: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    open_read_only(monkeypatch)
    assert main(["--db", str(db_path), "list"]) == 0
    assert "Beijing" in capsys.readouterr().out
    for argv in (["remember", "alice", "city", "Shanghai"], ["note", "alice", "hi"]):
        assert main(["--db", str(db_path), *argv]) == EXIT_CANT_CREATE
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"memkeeper: error: database file {db_path} is read-only")
        assert "not a usable" not in line


def test_a_read_only_directory_is_named_with_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "data" / "memory.db"
    monkeypatch.setattr(
        memkeeper.storage.sqlite.permissions, "_writable", lambda p: p != path.parent
    )
    exc = sqlite3.OperationalError("attempt to write a readonly database")
    exc.sqlite_errorcode = 1544  # SQLITE_READONLY_DIRECTORY
    found = read_only_error(exc, path, "the database cannot be opened")
    assert isinstance(found, StorageUnwritable)
    message = str(found)
    assert message.startswith(f"the directory {path.parent} of database file {path}")
    assert "not writable for this user (permission denied)" in message
    assert "memory.db-wal and memory.db-shm" in message


def test_other_sqlite_errors_are_not_mistaken_for_permission_problems(tmp_path: Path) -> None:
    assert read_only_error(sqlite3.OperationalError("database is locked"), tmp_path, "x") is None
    cantopen = sqlite3.OperationalError("unable to open database file")
    cantopen.sqlite_errorcode = 14  # SQLITE_CANTOPEN, with every permission in place
    assert read_only_error(cantopen, tmp_path / "memory.db", "x") is None


# -- a read-only database, for real: other processes that cannot write the files ----------------

DRIVER = """
import contextlib, io, json, sys
from memkeeper.cli import main
db, config, commands = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
results = []
for command in commands:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--db", db, "--config", config, *command])
    results.append({"command": command, "code": code, "out": out.getvalue(), "err": err.getvalue()})
print(json.dumps(results))
"""

NOBODY = 65534
SETPRIV = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
# Mount $1 read-only in a private mount namespace (gone when the command ends), then run $2...
READ_ONLY_MOUNT = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'


def _works(argv: list[str], **kwargs: Any) -> bool:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=60, check=False, **kwargs)
    except OSError:
        return False
    return done.returncode == 0


def unprivileged_reason(workdir: Path) -> str | None:
    """Why this machine cannot run memkeeper as an unprivileged user; None if it can."""
    if os.geteuid() != 0:
        return "needs root, to hand the files to an unprivileged user"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    if not _works([*SETPRIV, sys.executable, "-c", "import memkeeper"], cwd=workdir):
        return "this Python or memkeeper is not readable by the unprivileged user (uid 65534)"
    return None


def mount_reason(workdir: Path) -> str | None:
    """Why this machine cannot bind-mount a file read-only in a private namespace; or None."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "unshare or mount (util-linux) is not installed"
    target = workdir / "probe"
    target.mkdir()
    script = 'mount --bind -o ro "$0" "$0" && ! touch "$0/written" 2>/dev/null'
    if not _works(["unshare", "-m", "sh", "-c", script, str(target)]):
        return "no private mount namespace with a read-only bind mount allowed here"
    target.rmdir()
    return None


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A directory outside pytest's private temp tree, so another user can reach it."""
    path = Path(tempfile.mkdtemp(prefix="memkeeper-readonly-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for root, dirs, _files in os.walk(path):
            for name in dirs:
                (Path(root) / name).chmod(0o755)
        shutil.rmtree(path, ignore_errors=True)


def build_database(base: Path) -> tuple[Path, Path, str]:
    """A database that has seen a write, a read, a message and a job run; and a config."""
    data = base / "data"
    data.mkdir()
    data.chmod(0o755)
    db = data / "memory.db"
    config = base / "config.toml"
    config.write_text("[jobs.summarize]\nenabled = false\n", encoding="utf-8")
    config.chmod(0o644)
    with MemoryStore(db) as store:
        memory = store.remember("alice", "city", "Beijing")
        store.recall("alice", "city")
        store.append_message("alice", "s1", "user", "hello")
    assert main(["--db", str(db), "--config", str(config), "run-once", "--job", "expire"]) == 0
    return db, config, memory.id


def reads(memory_id: str) -> list[list[str]]:
    return [
        ["status"],
        ["list"],
        ["get", memory_id],
        ["log"],
        ["explain", memory_id],
        ["history", "alice", "s1"],
        ["export"],
    ]


WRITES = [
    ["remember", "alice", "city", "Shanghai"],
    ["note", "alice", "a new note"],
    ["forget", "alice", "city"],
    ["run-once", "--job", "expire"],
]
PERMISSION = re.compile(r"read-only|not writable|permission denied", re.IGNORECASE)


def run_driver(prefix: list[str], db: Path, config: Path, commands: list[list[str]], cwd: Path):
    done = subprocess.run(
        [*prefix, sys.executable, "-c", DRIVER, str(db), str(config), json.dumps(commands)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=cwd,
        env={
            **os.environ,
            "HOME": str(cwd),
            "XDG_CONFIG_HOME": str(cwd / "config-home"),
            "XDG_DATA_HOME": str(cwd / "data-home"),
        },
    )
    assert done.returncode == 0, done.stderr
    return {tuple(r["command"]): r for r in json.loads(done.stdout)}


def assert_permission_problem(result: dict[str, Any], db: Path) -> None:
    """Exit 73, one line, naming the database (or its directory) and the permission problem."""
    command, err = result["command"], result["err"]
    assert result["code"] == EXIT_CANT_CREATE, (command, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, (command, err)
    assert lines[0].startswith("memkeeper: error: "), (command, err)
    assert str(db.parent) in lines[0], (command, err)
    assert PERMISSION.search(lines[0]), (command, err)
    assert "not a usable SQLite database" not in err


def assert_read_only_file_matrix(results: dict[tuple[str, ...], Any], db: Path, memory_id: str):
    """The file is read-only, its directory is not: reads work, every write says why not."""
    for command in reads(memory_id):
        result = results[tuple(command)]
        assert result["code"] == 0, (command, result["err"])
        assert "Traceback" not in result["err"]
    for command in WRITES:
        assert_permission_problem(results[tuple(command)], db)
        assert str(db) in results[tuple(command)]["err"]
    # recall prints the value (noting that its use was not recorded) or, at least, names the
    # permission problem; it is never "not a usable SQLite database".
    recall = results[("recall", "alice", "city")]
    assert recall["code"] == 0, recall["err"]
    assert recall["out"].splitlines()[0] == "Beijing"
    assert "could not be recorded" in recall["err"]


def assert_unopenable_matrix(results: dict[tuple[str, ...], Any], db: Path, memory_id: str):
    """SQLite cannot even read: every command, read or write, names the permission problem."""
    for command in [*reads(memory_id), *WRITES, ["recall", "alice", "city"]]:
        assert_permission_problem(results[tuple(command)], db)
        assert str(db) in results[tuple(command)]["err"]


def all_commands(memory_id: str) -> list[list[str]]:
    return [*reads(memory_id), ["recall", "alice", "city"], *WRITES]


@pytest.mark.slow
@pytest.mark.parametrize("what", ["file", "directory"])
def test_read_only_database_as_an_unprivileged_user(world_dir: Path, what: str) -> None:
    reason = unprivileged_reason(world_dir)
    if reason:
        pytest.skip(reason)
    db, config, memory_id = build_database(world_dir)
    shutil.chown(world_dir, NOBODY, NOBODY)
    for path in [db.parent, *db.parent.iterdir()]:
        shutil.chown(path, NOBODY, NOBODY)
    if what == "file":
        db.chmod(0o444)  # the directory stays writable: SQLite opens the file read-only
    else:
        db.parent.chmod(0o555)  # SQLite cannot create memory.db-wal / -shm: cannot even read
    results = run_driver(SETPRIV, db, config, all_commands(memory_id), world_dir)
    if what == "file":
        assert_read_only_file_matrix(results, db, memory_id)
        note = results[("note", "alice", "a new note")]
        assert f"database file {db} is read-only for this user (permission denied)" in note["err"]
    else:
        assert_unopenable_matrix(results, db, memory_id)
        message = results[("status",)]["err"]
        assert f"the directory {db.parent} of database file {db}" in message
        assert "permission denied" in message
    assert db.stat().st_size > 0


@pytest.mark.slow
@pytest.mark.parametrize("what", ["file", "directory"])
def test_read_only_database_on_a_read_only_mount(world_dir: Path, what: str) -> None:
    reason = mount_reason(world_dir)
    if reason:
        pytest.skip(reason)
    db, config, memory_id = build_database(world_dir)
    target = db if what == "file" else db.parent
    prefix = ["unshare", "-m", "sh", "-c", READ_ONLY_MOUNT, "sh", str(target)]
    before = db.read_bytes()
    results = run_driver(prefix, db, config, all_commands(memory_id), world_dir)
    if what == "file":
        assert_read_only_file_matrix(results, db, memory_id)
    else:
        assert_unopenable_matrix(results, db, memory_id)
    assert "read-only file system" in results[("remember", "alice", "city", "Shanghai")]["err"]
    assert db.read_bytes() == before


# -- item 17: the "no API key" notice once per run; a skipped run covers its time -------------


def test_run_once_without_a_key_says_so_once(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    MemoryStore(db_path).close()
    assert main(["--db", str(db_path), "run-once"]) == 0
    captured = capsys.readouterr()
    assert (captured.out + captured.err).count(NO_KEY) == 1
    assert re.search(r"^summarize\s+skipped .*no API key", captured.out, re.MULTILINE)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(datetime(2027, 3, 2, 10, 5, tzinfo=UTC))


@pytest.fixture
def clocked(db_path: Path, clock: Clock) -> Iterator[MemoryStore]:
    with MemoryStore(db_path, clock=clock) as store:
        yield store


def test_a_skipped_summarize_is_not_rerun_by_every_run_once_due(
    clocked: MemoryStore, clock: Clock
) -> None:
    first = run_due(clocked)
    assert ("summarize", "skipped") in [(r.job, r.status) for r in first.results]
    clock.now += timedelta(minutes=15)
    # Nothing due but the five-minute index: summarize's skip covered 10:00.
    assert [r.job for r in run_due(clocked).results] == ["index"]
    clock.now = datetime(2027, 3, 2, 11, 1, tzinfo=UTC)  # summarize's next scheduled time
    again = run_due(clocked)
    assert [(r.job, r.status) for r in again.results if r.job != "index"] == [
        ("summarize", "skipped")
    ]
    skipped = [run for run in clocked.job_runs() if run.job == "summarize"]
    assert [run.status for run in skipped] == ["skipped", "skipped"]


def test_the_service_announces_a_skipped_job_once(
    clocked: MemoryStore, clock: Clock, log: LogCapture
) -> None:
    log.configure("info")  # the service's default level
    jobs = ServiceJobs(clocked)
    for hour in (10, 11, 12):
        clock.now = datetime(2027, 3, 2, hour, 0, 30, tzinfo=UTC)
        result = jobs.run_scheduled("summarize")
        assert result is not None and result.status == "skipped"
    mentions = [r for r in log.records if NO_KEY in json.dumps(r)]
    assert len(mentions) == 1
    assert mentions[0]["level"] == "warning"
    assert [r["status"] for r in log.events("job finished")] == ["skipped"] * 3
    assert [run.status for run in clocked.job_runs()] == ["skipped"] * 3


def test_storage_unwritable_is_a_memkeeper_error() -> None:
    exc = ReadOnlyDatabase("database file /x/memory.db is read-only", Path("/x/memory.db"), 8)
    assert isinstance(exc, StorageUnwritable | MemkeeperError)
    assert exc.sqlite_errorcode == 8
