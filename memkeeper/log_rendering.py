"""How the CLI and the service render log records: structlog's formatter on one root handler.

Only hosts load this (:func:`memkeeper.logs.configure`): it imports ``logging`` and, at the
first record, structlog. A library use of memkeeper never does.
"""

from __future__ import annotations

import logging
from typing import Any, TextIO

from memkeeper.logs import _NOT_FOR_OPERATORS, Event, _redact_value, _secrets, redact, use_json


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


def install(level: str, fmt: str, stream: TextIO, *, structlog_too: bool) -> None:
    """Install the one root handler at ``level`` (see :func:`memkeeper.logs.configure`)."""
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
