"""Logging: JSON lines off a terminal, readable lines on one, the same renderer for stdlib
loggers (APScheduler, httpx, the zhipuai SDK), and secrets redacted everywhere."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from memkeeper import logs
from memkeeper.cli import main


class FakeTerminal(io.StringIO):
    """A stream that says it is an interactive terminal."""

    def isatty(self) -> bool:
        return True


class Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


@pytest.fixture
def secrets_cleanup() -> Iterator[list[str]]:
    added: list[str] = []
    yield added
    for secret in added:
        logs._secrets.discard(secret)


@pytest.fixture(autouse=True)
def no_context() -> Iterator[None]:
    structlog.contextvars.clear_contextvars()
    yield
    structlog.contextvars.clear_contextvars()


def json_lines(stream: io.StringIO) -> list[dict]:
    lines = stream.getvalue().splitlines()
    assert lines, "nothing was logged"
    return [json.loads(line) for line in lines]


def test_json_lines_when_the_stream_is_not_a_terminal() -> None:
    stream = Pipe()
    logs.configure(level="info", stream=stream)
    structlog.get_logger("memkeeper.test").info("job finished", job="expire", changes=3)

    [record] = json_lines(stream)
    assert record["event"] == "job finished"
    assert record["level"] == "info"
    assert record["logger"] == "memkeeper.test"
    assert record["job"] == "expire"
    assert record["changes"] == 3
    assert record["timestamp"].endswith("Z")


def test_readable_lines_on_a_terminal() -> None:
    stream = FakeTerminal()
    logs.configure(level="info", stream=stream)
    structlog.get_logger("memkeeper.test").info("job finished", job="expire")

    text = stream.getvalue()
    assert "job finished" in text
    assert "job=expire" in text
    assert "[info" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])
    assert "\x1b[" not in text  # no colour codes


def test_journald_gets_json_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOURNAL_STREAM", "8:12345")
    stream = FakeTerminal()
    logs.configure(level="info", stream=stream)
    structlog.get_logger("memkeeper.test").warning("hello")
    assert json_lines(stream)[0]["event"] == "hello"


@pytest.mark.parametrize(
    ("fmt", "stream", "as_json"),
    [("json", FakeTerminal, True), ("console", Pipe, False), ("auto", Pipe, True),
     ("auto", FakeTerminal, False)],
)  # fmt: skip
def test_the_format_setting(fmt: str, stream: type, as_json: bool) -> None:
    assert logs.use_json(stream(), fmt) is as_json


def test_stdlib_loggers_go_through_the_same_renderer() -> None:
    stream = Pipe()
    logs.configure(level="info", stream=stream)
    structlog.get_logger("memkeeper.scheduler").warning("ours", job="expire")
    logging.getLogger("apscheduler.scheduler").warning("Run time of job %s was missed", "expire")
    logging.getLogger("httpx").warning("HTTP Request: %s %s", "POST", "http://127.0.0.1/x")
    logging.getLogger("zhipuai").error("the SDK says no")

    ours, scheduler, http, sdk = json_lines(stream)
    keys = {"event", "level", "logger", "timestamp"}
    assert keys <= set(ours)
    assert set(scheduler) == keys
    assert set(http) == keys
    assert scheduler == {
        **scheduler,
        "event": "Run time of job expire was missed",
        "level": "warning",
        "logger": "apscheduler.scheduler",
    }
    assert http["event"] == "HTTP Request: POST http://127.0.0.1/x"
    assert (http["logger"], sdk["logger"], sdk["level"]) == ("httpx", "zhipuai", "error")


def test_another_handler_formatting_first_adds_no_keys() -> None:
    """An application's own handler formats the shared LogRecord before ours (setting
    record.message and record.asctime); memkeeper's lines must not pick those up."""
    theirs = logging.StreamHandler(io.StringIO())
    theirs.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(theirs)
    try:
        stream = Pipe()
        logs.configure(level="info", stream=stream)
        logging.getLogger("apscheduler.scheduler").warning("missed %s", "expire")
    finally:
        root.removeHandler(theirs)
    [record] = json_lines(stream)
    assert set(record) == {"event", "level", "logger", "timestamp"}
    assert record["event"] == "missed expire"


def test_the_run_context_reaches_library_records_too() -> None:
    stream = Pipe()
    logs.configure(level="info", stream=stream)
    structlog.contextvars.bind_contextvars(run_id="20270301T030000Z-expire-3f9a", job="expire")
    logging.getLogger("apscheduler.executors.default").warning("job raised")
    [record] = json_lines(stream)
    assert (record["run_id"], record["job"]) == ("20270301T030000Z-expire-3f9a", "expire")


def test_levels_and_chatty_libraries() -> None:
    stream = Pipe()
    logs.configure(level="warning", stream=stream)
    structlog.get_logger("memkeeper.test").info("hidden")
    logging.getLogger("apscheduler.scheduler").info("hidden too")
    assert stream.getvalue() == ""

    logs.configure(level="info", stream=stream)
    logging.getLogger("httpx").info("HTTP Request: a chatty line")  # noise unless debugging
    structlog.get_logger("memkeeper.test").info("shown")
    assert [r["event"] for r in json_lines(stream)] == ["shown"]

    debug = Pipe()
    logs.configure(level="debug", stream=debug)
    logging.getLogger("httpx").info("HTTP Request: now shown")
    structlog.get_logger("memkeeper.test").debug("details")
    assert [r["event"] for r in json_lines(debug)] == ["HTTP Request: now shown", "details"]


def test_configuring_twice_does_not_duplicate_lines() -> None:
    first, second = Pipe(), Pipe()
    logs.configure(level="info", stream=first)
    logs.configure(level="info", stream=second)
    structlog.get_logger("memkeeper.test").warning("once")
    assert first.getvalue() == ""
    assert len(json_lines(second)) == 1


def test_an_exception_is_still_one_json_line() -> None:
    stream = Pipe()
    logs.configure(level="info", stream=stream)
    try:
        raise ValueError("bad thing")
    except ValueError:
        structlog.get_logger("memkeeper.test").exception("job failed", job="prune")
        logging.getLogger("apscheduler.scheduler").exception("scheduler failed")
    ours, theirs = json_lines(stream)
    assert "ValueError: bad thing" in ours["exception"]
    assert "ValueError: bad thing" in theirs["exception"]


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_a_registered_secret_is_redacted_everywhere(fmt: str, secrets_cleanup: list[str]) -> None:
    secret = "sk-test-4711-abcdef"
    logs.register_secret(secret)
    secrets_cleanup.append(secret)
    stream = Pipe()
    logs.configure(level="info", fmt=fmt, stream=stream)

    log = structlog.get_logger("memkeeper.llm")
    log.warning(f"calling with {secret}", api_key=secret, headers={"Authorization": secret})
    log.warning("list", keys=[secret, "other"])
    logging.getLogger("httpx").warning("Authorization: Bearer %s", secret)
    logging.getLogger("zhipuai").warning(f"key={secret}")

    text = stream.getvalue()
    assert secret not in text
    assert text.count(logs.REDACTED) >= 6
    if fmt == "json":
        records = json_lines(stream)
        assert records[0]["api_key"] == logs.REDACTED
        assert records[0]["headers"] == {"Authorization": logs.REDACTED}
        assert records[1]["keys"] == [logs.REDACTED, "other"]
        assert records[2]["event"] == f"Authorization: Bearer {logs.REDACTED}"
        assert records[3]["event"] == f"key={logs.REDACTED}"


def test_short_or_empty_secrets_are_ignored(secrets_cleanup: list[str]) -> None:
    before = set(logs._secrets)
    logs.register_secret("")
    logs.register_secret(None)
    logs.register_secret("abc")
    assert logs._secrets == before
    assert logs.redact("abc def") == "abc def"


def test_cli_error_messages_are_redacted(
    secrets_cleanup: list[str], capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    secret = "sk-cli-secret-0815"
    logs.register_secret(secret)
    secrets_cleanup.append(secret)
    missing = tmp_path / f"{secret}.toml"
    assert main(["--config", str(missing), "config", "check"]) == 78
    err = capsys.readouterr().err
    assert secret not in err
    assert logs.REDACTED in err


def test_the_cli_logs_to_stderr_not_stdout(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    db = tmp_path / "memory.db"
    assert main(["--db", str(db), "-v", "remember", "alice", "city", "Beijing", "--json"]) == 0
    structlog.get_logger("memkeeper.test").info("after the command")  # -v: info is shown
    structlog.get_logger("memkeeper.test").debug("too detailed")  # ...debug is not
    captured = capsys.readouterr()
    assert json.loads(captured.out)["value"] == "Beijing"
    [record] = [json.loads(line) for line in captured.err.splitlines()]  # not a TTY: JSON
    assert record["event"] == "after the command"


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_memkeeper_loggers_render_through_the_cli_handler(fmt: str) -> None:
    """memkeeper's stdlib loggers keep the CLI's rendering: fields, logger name, bound run."""
    stream = Pipe()
    logs.configure(level="info", fmt=fmt, stream=stream, structlog_too=False)
    log = logs.get_logger("memkeeper.job").bind(job="merge", run_id="20270301T030000Z-merge-1")
    log.info("job finished", changes=3)
    log.debug("hidden")

    text = stream.getvalue()
    if fmt == "json":
        [record] = json_lines(stream)
        assert record["event"] == "job finished"
        assert record["logger"] == "memkeeper.job"
        assert record["level"] == "info"
        assert (record["job"], record["run_id"], record["changes"]) == (
            "merge",
            "20270301T030000Z-merge-1",
            3,
        )
        assert logs.FIELDS_ATTR not in record
    else:
        [line] = text.splitlines()
        assert "[info     ] job finished" in line
        assert "job=merge" in line and "run_id=20270301T030000Z-merge-1" in line
        assert "changes=3" in line


class Holder:
    """A frame holding the key in its locals, like the LLM session's constructor."""

    def call(self, api_key: str) -> None:
        config = {"api_key": api_key}
        raise RuntimeError(f"endpoint refused ({len(config)} settings)")


@pytest.mark.parametrize("structlog_native", [True, False])
@pytest.mark.parametrize("fmt", ["json", "console"])
def test_a_secret_in_a_frames_locals_never_reaches_a_traceback(
    fmt: str, structlog_native: bool, secrets_cleanup: list[str]
) -> None:
    """With rich installed, structlog's console tracebacks print frame locals: redaction
    applies to the line as rendered, and tracebacks are printed without locals."""
    pytest.importorskip("rich")
    secret = "sk-local-frame-0815-xyz"
    logs.register_secret(secret)
    secrets_cleanup.append(secret)
    stream = FakeTerminal() if fmt == "console" else Pipe()
    logs.configure(level="info", fmt=fmt, stream=stream)
    log = structlog.get_logger("memkeeper.llm") if structlog_native else logs.get_logger("llm")
    try:
        Holder().call(secret)
    except RuntimeError:
        log.exception("summarize failed", job="summarize")

    text = stream.getvalue()
    assert "RuntimeError: endpoint refused" in text
    assert secret not in text
    assert "config = " not in text  # no locals table at all


def test_a_secret_from_the_llm_session_frame_stays_out_of_the_console(
    secrets_cleanup: list[str],
) -> None:
    """The key is a local of memkeeper/llm/session.py's SdkSession.__init__ when the SDK
    client fails to set up; a bug logged from there still shows no key."""
    pytest.importorskip("rich")
    from memkeeper.config import Config
    from memkeeper.llm.session import SdkSession

    secret = "sk-session-frame-4242-abc"
    secrets_cleanup.append(secret)
    stream = FakeTerminal()
    logs.configure(level="info", fmt="console", stream=stream)
    config = Config().llm
    try:
        # A bad pool size fails inside __init__ (after register_secret), with api_key local.
        SdkSession(config, api_key=secret, label="LLM", max_connections="x")  # type: ignore[arg-type]
    except Exception:
        logs.get_logger("llm").exception("client set-up failed")
    text = stream.getvalue()
    assert "Traceback" in text
    assert secret not in text


def test_uvicorn_color_message_stays_out_of_json_lines() -> None:
    stream = Pipe()
    logs.configure(level="info", fmt="json", stream=stream)
    logging.getLogger("uvicorn.error").info(
        "Started server process [%d]",
        42,
        extra={"color_message": "Started server process [\x1b[36m%d\x1b[0m]"},
    )
    [record] = json_lines(stream)
    assert record["event"] == "Started server process [42]"
    assert "color_message" not in record
    assert "\x1b" not in stream.getvalue()


def test_jobs_bookkeeping_stays_out_of_the_log_lines(tmp_path, capsys) -> None:
    """The merge job keeps ``_watermark_*`` and ``_scope`` in its statistics for the next
    run: they stay in the run's row, not in the operator's ``job finished`` line."""
    from memkeeper import MemoryStore

    db = str(tmp_path / "m.db")
    with MemoryStore(db) as store:
        store.remember("u", "a", "the same long value")
    assert main(["-v", "--db", db, "run-once", "--job", "index", "--job", "merge"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    finished = [line for line in lines if line["event"] == "job finished"]
    assert {line["job"] for line in finished} == {"index", "merge"}
    for line in finished:
        assert line["run_id"]
        assert not [key for key in line.get("stats", {}) if key.startswith("_")]
    with MemoryStore(db) as store, store.storage.lock:
        (counts,) = store.storage.hot.execute(
            "SELECT counts FROM job_runs WHERE job = 'merge'"
        ).fetchone()
    assert "_scope" in json.loads(counts)["stats"]
