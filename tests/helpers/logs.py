"""Capture memkeeper's log lines in a test, as structlog.testing.capture_logs did.

memkeeper logs through stdlib ``logging`` (memkeeper.logs); this handler on the
``memkeeper`` logger turns each record into the dict structlog's helper gave: ``event``,
``log_level`` and the line's fields.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memkeeper import logs


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.msg
        if isinstance(message, logs.Event):
            line = {"event": message.event, **message.fields}
        else:
            line = {"event": record.getMessage()}
        line["log_level"] = record.levelname.lower()
        self.lines.append(line)


@contextmanager
def capture_logs() -> Iterator[list[dict[str, Any]]]:
    """Every memkeeper line logged inside the block, at every level."""
    logger = logging.getLogger(logs.ROOT_LOGGER)
    handler = _Capture()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
