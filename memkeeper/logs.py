"""Logging: memkeeper's loggers are stdlib ``logging`` loggers; the CLI and service render them.

As a library memkeeper is quiet: every module logs through :func:`get_logger`, a small
structlog-style wrapper (``log.info("job started", job="merge")``, ``log.bind(run_id=...)``)
around ``logging.getLogger("memkeeper.<part>")``. The ``memkeeper`` logger has a
``NullHandler``, so nothing is printed unless the host program configures ``logging``, and
memkeeper never touches the host's global ``logging`` or structlog configuration. The
wrapper is not structlog itself so that importing memkeeper (and running ``memkeeper
recall``) does not import structlog, which costs ~90 ms through asyncio.

The CLI and the service are hosts: :func:`configure` installs one handler on the root logger
(:mod:`memkeeper.log_rendering`). memkeeper imports ``logging`` itself only when a record
could be seen (:func:`_stdlib`): a library use that never meets a host's ``logging``, and a
plain ``memkeeper recall`` (:func:`configure_at_first_record`), start without it.

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
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import logging

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
    if not _listening(DEBUG):
        return False
    return _stdlib().getLogger().isEnabledFor(DEBUG)


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
        verbose = debug(DEBUG) if debug else debug_enabled()
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

DEBUG, INFO, WARNING, ERROR, CRITICAL = 10, 20, 30, 40, 50
"""The stdlib's levels, without importing it."""

_LEVELS = {"debug": DEBUG, "info": INFO, "warning": WARNING, "error": ERROR, "critical": CRITICAL}


class _Setup:
    """This process's logging set-up, as far as memkeeper made it."""

    deferred: str | None = None
    """The level :func:`configure_at_first_record` left for later, if any."""
    ready = False
    """Whether the ``memkeeper`` logger has its ``NullHandler``."""


_setup = _Setup()


def _stdlib() -> Any:
    """The ``logging`` module, made ready for memkeeper at its first use.

    memkeeper imports ``logging`` only when someone could see a record: once any module of
    the process has imported it (a host that configures logging must), or a record reaches a
    level :func:`configure_at_first_record` asked for. Until then a record cannot reach any
    handler (no host handler can exist), so dropping it changes nothing a host could see.
    At first use the ``memkeeper`` logger gets its ``NullHandler`` and a left-over
    configuration is carried out.
    """
    import logging

    if not _setup.ready:
        _setup.ready = True
        logging.getLogger(ROOT_LOGGER).addHandler(logging.NullHandler())
    if _setup.deferred is not None:
        level, _setup.deferred = _setup.deferred, None
        configure(level, structlog_too=False)
    return logging


def _listening(level: int) -> bool:
    """Whether a record of ``level`` could reach a handler (see :func:`_stdlib`)."""
    if "logging" in sys.modules:
        return True
    return _setup.deferred is not None and level >= _LEVELS[_setup.deferred]


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
    and the fields before the record exists, so no host handler ever sees them. The stdlib
    logger is looked up at the first record anyone could see (:func:`_stdlib`).
    """

    __slots__ = ("_context", "_logger", "_name")

    def __init__(self, name: str, context: dict[str, Any] | None = None) -> None:
        self._name = name
        self._logger: logging.Logger | None = None
        self._context = context or {}

    @property
    def name(self) -> str:
        return self._name

    def bind(self, **fields: Any) -> Logger:
        """A logger that adds ``fields`` to every line (a job's name and run id, say)."""
        return Logger(self._name, {**self._context, **fields})

    def _target(self, level: int) -> logging.Logger | None:
        if self._logger is None:
            if not _listening(level):
                return None
            self._logger = _stdlib().getLogger(self._name)
        return self._logger

    def is_enabled_for(self, level: int) -> bool:
        logger = self._target(level)
        return logger.isEnabledFor(level) if logger is not None else False

    def _log(self, level: int, event: str, args: tuple[Any, ...], fields: dict[str, Any]) -> None:
        logger = self._target(level)
        if logger is None or not logger.isEnabledFor(level):
            return
        exc_info = fields.pop("exc_info", None)
        stack_info = bool(fields.pop("stack_info", False))
        merged = {**self._context, **fields}
        text = str(event) % args if args else str(event)
        if _secrets:
            text = redact(text)
            merged = {key: _redact_value(value) for key, value in merged.items()}
        logger.log(
            level,
            Event(text, merged),
            exc_info=exc_info,
            stack_info=stack_info,
            stacklevel=3,
            extra={FIELDS_ATTR: merged},
        )

    def debug(self, event: str, *args: Any, **fields: Any) -> None:
        self._log(DEBUG, event, args, fields)

    def info(self, event: str, *args: Any, **fields: Any) -> None:
        self._log(INFO, event, args, fields)

    def warning(self, event: str, *args: Any, **fields: Any) -> None:
        self._log(WARNING, event, args, fields)

    def error(self, event: str, *args: Any, **fields: Any) -> None:
        self._log(ERROR, event, args, fields)

    def critical(self, event: str, *args: Any, **fields: Any) -> None:
        self._log(CRITICAL, event, args, fields)

    def exception(self, event: str, *args: Any, **fields: Any) -> None:
        fields.setdefault("exc_info", True)
        self._log(ERROR, event, args, fields)


def get_logger(name: str) -> Logger:
    """The logger of one part of memkeeper (``memkeeper.search``, ``memkeeper.job``...)."""
    if name != ROOT_LOGGER and not name.startswith(ROOT_LOGGER + "."):
        name = f"{ROOT_LOGGER}.{name}"
    return Logger(name)


_NOT_FOR_OPERATORS = frozenset({"color_message", FIELDS_ATTR})
"""Record attributes that are not part of a line: uvicorn's ANSI copy of its message, and
the fields carrier (its contents are merged into the line)."""


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
    _setup.deferred = None
    _stdlib()
    from memkeeper import log_rendering

    log_rendering.install(level, fmt, stream or sys.stderr, structlog_too=structlog_too)


def configure_at_first_record(level: str) -> None:
    """:func:`configure` (stderr, ``auto``, no structlog) when a record of ``level`` or above
    first comes, or when :func:`settle` is called: the memory commands' quick start.

    Configuring imports ``logging`` (about 10 ms of a memory command's start-up), and a
    plain recall logs nothing at the default level, so it never pays for it. A module that
    loads a library which logs through ``logging`` itself (the LLM SDK, the PostgreSQL
    driver) calls :func:`settle` first, so that library's records meet the handler too.
    """
    if "logging" in sys.modules:
        configure(level, structlog_too=False)
    else:
        _setup.deferred = level


def settle() -> None:
    """Carry out a configuration :func:`configure_at_first_record` left for later, now."""
    if _setup.deferred is not None:
        _stdlib()
