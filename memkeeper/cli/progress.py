"""A one-line progress display on a terminal, for long work: job runs, big imports.

Standard error only, and only when it is an interactive terminal: a pipe, a file or journald
never sees carriage returns, and standard output stays the command's result.
"""

from __future__ import annotations

import sys
import time

PROGRESS_THRESHOLD = 1000
"""Items below which no display is shown: smaller work finishes before it would help."""


class TerminalProgress:
    """``progress(what, done, total)``: ``import: 5000/22000 (22%)``, redrawn at most 5
    times a second, ended by a newline when ``done`` reaches ``total``."""

    def __init__(self) -> None:
        self._last = 0.0

    def __call__(self, what: str, done: int, total: int | None) -> None:
        if total is None or total < PROGRESS_THRESHOLD:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.2:
            return
        self._last = now
        sys.stderr.write(f"\r{what}: {done}/{total} ({100 * done // max(total, 1)}%)   ")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def on_a_terminal() -> TerminalProgress | None:
    """A display when standard error is an interactive terminal, else None."""
    isatty = getattr(sys.stderr, "isatty", None)
    return TerminalProgress() if isatty is not None and isatty() else None
