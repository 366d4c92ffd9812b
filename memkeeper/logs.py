"""Logging: memkeeper's loggers are stdlib ``logging`` loggers; the CLI and service render them.

As a library memkeeper is quiet: every module logs through :func:`get_logger`, a small
structlog-style wrapper (``log.info("job started", job="merge")``, ``log.bind(run_id=...)``)
around ``logging.getLogger("memkeeper.<part>")``. The ``memkeeper`` logger has a
``NullHandler``, so nothing is printed unless the host program configures ``logging``, and
memkeeper never touches the host's global ``logging`` or structlog configuration. The
wrapper is not structlog itself so that importing memkeeper (and running ``memkeeper
recall``) does not import structlog, which costs ~90 ms through asyncio.

The CLI and the service are hosts: :func:`configure` installs one handler on the root logger.

On a terminal, lines are readable (``2026-11-30T06:58:06Z [info] job finished job=expire``);
otherwise — a pipe, a file, journald — each line is one JSON object. Records from the stdlib
``logging`` module (APScheduler, httpx, the zhipuai SDK) go through the same processors and
renderer, so a service's log is uniform. Logs go to standard error; command output goes to
standard output.

Secrets registered with :func:`register_secret` are replaced by ``[REDACTED]`` in every
record, memkeeper's or a library's, before anything is rendered.

Expected operational failures (the LLM endpoint down or refusing the key, a full disk, a
read-only database, a lock held too long) are logged as one line naming the cause
(:func:`log_failure`); their traceback is added only at debug level (``-vv``). Programming
errors keep their traceback at every level.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import threading
from typing import Any, TextIO

from memkeeper.errors import MemkeeperError

_secrets: set[str] = set()
_secrets_lock = threading.Lock()
REDACTED = "[REDACTED]"


def register_secret(value: str | None) -> None:
    """Never print ``value`` in a log line (an API key, say)."""
    if value and len(value) >= 4:
        with _secrets_lock:
            _secrets.add(value)


def redact(text: str) -> str:
    """``text`` with every registered secret replaced."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def debug_enabled() -> bool:
    """True when this process logs at debug level (``-vv``): failures then show tracebacks."""
    return logging.getLogger().isEnabledFor(logging.DEBUG)


_OPERATIONAL_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}
)


_DRIVER_OPERATIONAL = frozenset({("sqlite3", "OperationalError"), ("psycopg", "OperationalError")})
"""The drivers' operational errors, by (package, class): the basics never import a driver
(only storage does), so they are told apart by name."""


def _driver_operational(exc: BaseException) -> bool:
    return any(
        (cls.__module__.partition(".")[0], cls.__name__) in _DRIVER_OPERATIONAL
        for cls in type(exc).__mro__
    )


def expected_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is an operational failure an operator fixes, not a bug in memkeeper.

    memkeeper's own errors (the LLM endpoint down, 401, 429 after retries, a read-only or
    locked database...), SQLite's operational errors (a full disk, an I/O error) and the
    file-system errors behind them (no space, read-only file system, permission denied).
    """
    if isinstance(exc, MemkeeperError) or _driver_operational(exc):
        return True
    return isinstance(exc, OSError) and exc.errno in _OPERATIONAL_ERRNOS


def log_failure(logger: Any, event: str, exc: BaseException, **fields: Any) -> None:
    """Log a failure: one line naming the cause when it is expected (the traceback only at
    debug level), the full traceback when it is a bug."""
    if expected_failure(exc):
        debug = getattr(logger, "is_enabled_for", None)
        verbose = debug(logging.DEBUG) if debug else debug_enabled()
        logger.error(event, exc_info=exc if verbose else False, **fields)
    else:
        logger.error(event, exc_info=exc, **fields)


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_redact_value(v) for v in value)
    return value


ROOT_LOGGER = "memkeeper"
FIELDS_ATTR = "memkeeper_fields"
"""The attribute of a stdlib ``LogRecord`` that carries a memkeeper line's key=value fields."""

logging.getLogger(ROOT_LOGGER).addHandler(logging.NullHandler())


class Event:
    """A record's message: the event, and its fields for a plain stdlib formatter.

    ``str()`` gives ``job started job='merge' run_id='...'``, so a host that only called
    ``logging.basicConfig()`` still reads every field; memkeeper's own formatter takes the
    event and the fields apart instead.
    """

    __slots__ = ("event", "fields")

    def __init__(self, event: str, fields: dict[str, Any]) -> None:
        self.event = event
        self.fields = fields

    def __str__(self) -> str:
        if not self.fields:
            return self.event
        pairs = " ".join(f"{key}={value!r}" for key, value in self.fields.items())
        return f"{self.event} {pairs}"


class Logger:
    """structlog-style calls on a stdlib logger: ``log.info("event", key=value)``, ``bind``.

    Nothing is built unless the level is enabled, and secrets are redacted from the event
    and the fields before the record exists, so no host handler ever sees them.
    """

    __slots__ = ("_context", "_logger")

    def __init__(self, logger: logging.Logger, context: dict[str, Any] | None = None) -> None:
        self._logger = logger
        self._context = context or {}

    @property
    def name(self) -> str:
        return self._logger.name

    def bind(self, **fields: Any) -> Logger:
        """A logger that adds ``fields`` to every line (a job's name and run id, say)."""
        return Logger(self._logger, {**self._context, **fields})

    def is_enabled_for(self, level: int) -> bool:
        return self._logger.isEnabledFor(level)

    def _log(self, level: int, event: str, args: tuple[Any, ...], fields: dict[str, Any]) -> None:
        if not self._logger.isEnabledFor(level):
            return
        exc_info = fields.pop("exc_info", None)
        stack_info = bool(fields.pop("stack_info", False))
        merged = {**self._context, **fields}
        text = str(event) % args if args else str(event)
        if _secrets:
            text = redact(text)
            merged = {key: _redact_value(value) for key, value in merged.items()}
        self._logger.log(
            level,
            Event(text, merged),
            exc_info=exc_info,
            stack_info=stack_info,
            stacklevel=3,
            extra={FIELDS_ATTR: merged},
        )

    def debug(self, event: str, *args: Any, **fields: Any) -> None:
        self._log(logging.DEBUG, event, args, fields)

    def info(self, event: str, *args: Any, **fields: Any) -> None:
        self._log(logging.INFO, event, args, fields)

    def warning(self, event: str, *args: Any, **fields: Any) -> None:
        self._log(logging.WARNING, event, args, fields)

    def error(self, event: str, *args: Any, **fields: Any) -> None:
        self._log(logging.ERROR, event, args, fields)

    def critical(self, event: str, *args: Any, **fields: Any) -> None:
        self._log(logging.CRITICAL, event, args, fields)

    def exception(self, event: str, *args: Any, **fields: Any) -> None:
        fields.setdefault("exc_info", True)
        self._log(logging.ERROR, event, args, fields)


def get_logger(name: str) -> Logger:
    """The logger of one part of memkeeper (``memkeeper.search``, ``memkeeper.job``...)."""
    if name != ROOT_LOGGER and not name.startswith(ROOT_LOGGER + "."):
        name = f"{ROOT_LOGGER}.{name}"
    return Logger(logging.getLogger(name))


_NOT_FOR_OPERATORS = frozenset({"color_message", FIELDS_ATTR})
"""Record attributes that are not part of a line: uvicorn's ANSI copy of its message, and
the fields carrier (its contents are merged into the line)."""


def _memkeeper_fields(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    """Turn a record from :class:`Logger` into its event and fields; drop what no operator
    should read (uvicorn's ``color_message`` with its ANSI escapes)."""
    record = event.get("_record")
    message = getattr(record, "msg", None)
    if isinstance(message, Event):
        event["event"] = message.event
        for key, value in message.fields.items():
            event.setdefault(key, value)
    for key in _NOT_FOR_OPERATORS:
        event.pop(key, None)
    return event


def _drop_formatter_leftovers(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    """Drop ``message``/``asctime`` that another handler's Formatter set on a stdlib record
    before ours saw it (ExtraAdder would copy them), so library lines keep our keys."""
    event.pop("message", None)
    event.pop("asctime", None)
    return event


def _redact_processor(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    if not _secrets:
        return event
    return {key: _redact_value(value) for key, value in event.items()}


def use_json(stream: TextIO, requested: str) -> bool:
    """Whether to render JSON lines: asked for, or ``auto`` and not an interactive terminal."""
    if requested == "json":
        return True
    if requested == "console":
        return False
    if os.environ.get("JOURNAL_STREAM"):
        return True
    isatty = getattr(stream, "isatty", None)
    return not (isatty and isatty())


def _shared_processors() -> list[Any]:
    import structlog

    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.stdlib.ExtraAdder(),
    ]


def _formatter(as_json: bool) -> logging.Formatter:
    """structlog's ProcessorFormatter with memkeeper's processors (imports structlog)."""
    import structlog

    renderer: Any
    if as_json:
        renderer = structlog.processors.JSONRenderer(ensure_ascii=False)
        final = [structlog.processors.format_exc_info, _redact_processor, renderer]
    else:
        # Plain tracebacks: rich's would print every frame's local variables (an API key
        # held by the LLM session, say) where redaction of the fields cannot reach.
        renderer = structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
        final = [_redact_processor, renderer]
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*_shared_processors(), _drop_formatter_leftovers, _memkeeper_fields],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *final,
        ],
    )


class _MemkeeperHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler :func:`configure` installs, so configuring again replaces it.

    Its formatter (structlog's) is built at the first record, so a command that logs nothing
    never imports structlog; and the rendered line is redacted last, tracebacks included.
    """

    def __init__(self, stream: TextIO, as_json: bool) -> None:
        super().__init__(stream)
        self.as_json = as_json

    def format(self, record: logging.LogRecord) -> str:
        if self.formatter is None:
            self.setFormatter(_formatter(self.as_json))
        return redact(super().format(record))


def _configure_structlog() -> None:
    """Route structlog's own loggers (used by code outside memkeeper's loggers) through the
    root handler; only hosts (the CLI, the service) call this, never the library."""
    import structlog

    structlog.configure(
        processors=[
            *_shared_processors(),
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


def configure(
    level: str = "info",
    fmt: str = "auto",
    stream: TextIO | None = None,
    *,
    structlog_too: bool = True,
) -> None:
    """Set up logging for this process, a host: the CLI or the service (safe to call again).

    ``structlog_too`` also routes structlog's global loggers through the same handler; the
    memory commands leave it off so they never import structlog.
    """
    stream = stream or sys.stderr
    if structlog_too:
        _configure_structlog()
    handler = _MemkeeperHandler(stream, use_json(stream, fmt))
    root = logging.getLogger()
    for existing in list(root.handlers):
        if isinstance(existing, _MemkeeperHandler):
            root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Chatty libraries: their INFO lines are noise for an operator unless debugging.
    for noisy in ("httpx", "httpcore", "apscheduler.executors.default"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if level == "debug" else logging.WARNING)
