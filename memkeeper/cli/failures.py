"""The command line's edge: an exception becomes one line on stderr and a documented exit
code (see :mod:`memkeeper.errors`); a traceback is shown only at ``-vv``.

Shared by the click command line (:func:`memkeeper.cli.app.main`, which also handles click's
own usage errors) and the memory commands' quick start (:mod:`memkeeper.cli.quick`), so a
failure reads the same whichever ran the command. Nothing here loads click.
"""

from __future__ import annotations

import os

from memkeeper import logs
from memkeeper.cli.output import echo
from memkeeper.errors import EXIT_ERROR, MemkeeperError


def fail(message: str, code: int, exc: BaseException | None = None) -> int:
    """Print the one-line error (after its traceback, at ``-vv`` only); return ``code``."""
    if exc is not None and logs.debug_enabled():
        import traceback

        trace = "".join(traceback.format_exception(exc)).rstrip("\n")
        echo(logs.redact(trace), err=True)
    one_line = " ".join(message.split()) if "\n" in message or "\r" in message else message
    echo(f"memkeeper: error: {logs.redact(one_line)}", err=True)
    return code


def exit_code_of(exc: Exception) -> int:
    """Report ``exc`` (anything but click's own exceptions) and return its exit code.

    Our errors carry their code; a full disk is 73 and another OS error 1, both naming the
    file; a driver's error the driver module explains gets its code; anything else is an
    internal error (1) in one line, or re-raised with ``MEMKEEPER_DEBUG`` set.
    """
    if isinstance(exc, MemkeeperError):
        return fail(str(exc), exc.exit_code, exc)
    if isinstance(exc, OSError):
        import errno

        from memkeeper.errors import EXIT_CANT_CREATE

        where = f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            message = f"the disk is full ({where}); free some space and run the command again"
            return fail(message, EXIT_CANT_CREATE, exc)
        return fail(where, EXIT_ERROR, exc)
    # The PostgreSQL driver missing where no opening said so (the extra is not installed).
    from memkeeper.storage.postgres.driver import missing_driver

    missing = missing_driver(exc)
    if missing is not None:
        return fail(str(missing), missing.exit_code, exc)
    # A driver's error untranslated, or a bug: still one line.
    from memkeeper.storage.driver_errors import explain

    explained = explain(exc)
    if explained is not None:
        return fail(explained[0], explained[1], exc)
    if os.environ.get("MEMKEEPER_DEBUG"):
        raise exc
    return fail(
        f"internal error ({type(exc).__name__}: {exc}); set MEMKEEPER_DEBUG=1 for a traceback",
        EXIT_ERROR,
        exc,
    )
