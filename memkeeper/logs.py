"""Logging: structlog everywhere, one renderer for memkeeper's own and stdlib records.

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
import sqlite3
import sys
import threading
from typing import Any, TextIO

import structlog

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


def expected_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is an operational failure an operator fixes, not a bug in memkeeper.

    memkeeper's own errors (the LLM endpoint down, 401, 429 after retries, a read-only or
    locked database...), SQLite's operational errors (a full disk, an I/O error) and the
    file-system errors behind them (no space, read-only file system, permission denied).
    """
    if isinstance(exc, MemkeeperError | sqlite3.OperationalError):
        return True
    return isinstance(exc, OSError) and exc.errno in _OPERATIONAL_ERRNOS


def log_failure(logger: Any, event: str, exc: BaseException, **fields: Any) -> None:
    """Log a failure: one line naming the cause when it is expected (the traceback only at
    debug level), the full traceback when it is a bug."""
    if expected_failure(exc):
        logger.error(event, exc_info=exc if debug_enabled() else False, **fields)
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


class _MemkeeperHandler(logging.StreamHandler):
    """The handler :func:`configure` installs, so configuring again replaces it."""


def configure(level: str = "info", fmt: str = "auto", stream: TextIO | None = None) -> None:
    """Set up structlog and stdlib logging for this process (safe to call again)."""
    stream = stream or sys.stderr
    as_json = use_json(stream, fmt)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.stdlib.ExtraAdder(),
    ]
    renderer: Any
    if as_json:
        renderer = structlog.processors.JSONRenderer(ensure_ascii=False)
        final = [structlog.processors.format_exc_info, _redact_processor, renderer]
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
        final = [_redact_processor, renderer]

    structlog.configure(
        processors=[
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, _drop_formatter_leftovers],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *final],
    )
    handler = _MemkeeperHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for existing in list(root.handlers):
        if isinstance(existing, _MemkeeperHandler):
            root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Chatty libraries: their INFO lines are noise for an operator unless debugging.
    for noisy in ("httpx", "httpcore", "apscheduler.executors.default"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if level == "debug" else logging.WARNING)
