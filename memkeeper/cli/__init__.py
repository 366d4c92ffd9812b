"""The ``memkeeper`` command line: a thin shell over the library.

Commands live in small modules by concern (memory, inspect, transfer, config, jobs, service)
and register on the one group defined here. This module also owns the edge: it is the only
place that turns memkeeper's exceptions into a one-line message and a documented exit code
(see ``memkeeper.errors``); a traceback is shown only at ``-vv``.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from memkeeper import __version__, logs, settings
from memkeeper.cli.commands import LazyGroup
from memkeeper.clock import fixed, parse_user_time, system_now
from memkeeper.config.file import load_config
from memkeeper.errors import EXIT_ERROR, EXIT_USAGE, MemkeeperError
from memkeeper.paths import ENV_CONFIG, ENV_NOW

if TYPE_CHECKING:
    from memkeeper.config import Config

EXIT_INTERRUPTED = 130
NOW_TOLERANCE = timedelta(minutes=1)
"""How far --now may be from the real clock before a writing command asks for --yes."""


def _span(delta: timedelta) -> str:
    """A rough human length of time: '3 minutes', '5 hours', '400 days'."""
    seconds = delta.total_seconds()
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{int(seconds)} seconds"


@dataclass
class App:
    """Per-invocation state: global options, and the config and store made from them."""

    db: str | None = None
    config_path: Path | None = None
    config_explicit: bool = False
    now: datetime | None = None
    verbose: int = 0
    _config: Config | None = None
    _stores: list[Any] = field(default_factory=list)

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = load_config(self.config_path, explicit=self.config_explicit)
        return self._config

    def store(self, *, create: bool = True, db: str | None = None) -> Any:
        """Open the memory store with this invocation's clock.

        ``create`` false is for commands that only read, or change what must already be
        there: a database that does not exist raises DatabaseMissing (exit 66, naming the
        path) and nothing — no directory, no file — is created. ``db`` opens another
        database than --db's (``migrate-to``'s target).
        """
        from memkeeper.store import MemoryStore

        store = MemoryStore(
            db or self.db,
            config=self.config,
            clock=fixed(self.now) if self.now else None,
            actor="cli",
            create=create,
        )
        self._stores.append(store)
        return store

    def check_now(self, *, yes: bool, dry_run: bool = False) -> None:
        """Refuse to write at a pretend time unless the operator said ``--yes``.

        The one guard of every writing command: a ``--now`` (or ``MEMKEEPER_NOW``) more than
        :data:`NOW_TOLERANCE` from the real clock would write that time into the real
        database (created, used, retired at...), which then steers every later job. Reads
        and ``--dry-run`` previews are free to pretend.
        """
        if self.now is None or yes or dry_run:
            return
        drift = self.now - system_now()
        if abs(drift) <= NOW_TOLERANCE:
            return
        ctx = click.get_current_context()
        from_env = ctx.find_root().get_parameter_source("now") is ParameterSource.ENVIRONMENT
        given = f"{ENV_NOW}={self.now.isoformat()}" if from_env else f"--now {self.now.isoformat()}"
        direction = "ahead of" if drift > timedelta(0) else "behind"
        how = (
            "Add --dry-run to preview, or --yes to do it anyway."
            if any(param.name == "dry_run" for param in ctx.command.params)
            else "Add --yes to do it anyway."
        )
        raise click.UsageError(
            f"{given} is {_span(abs(drift))} {direction} the real clock, and "
            f"'{ctx.command_path}' would write that time into the database. {how}"
        )

    def close(self) -> None:
        for store in self._stores:
            store.close()
        self._stores.clear()


pass_app = click.make_pass_decorator(App)


def json_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """The shared ``--json`` flag of every read command."""
    return click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON document instead of text."
    )(func)


def namespace_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "-n",
        "--namespace",
        default="",
        show_default="'' (none)",
        help="Project namespace the memory belongs to.",
    )(func)


_RAW_IN_JSON = re.compile("[\u0080-\u009f\u2028\u2029]")
"""Characters json.dumps leaves raw with ensure_ascii=False that a terminal may act on: the C1
controls (U+009B starts an escape sequence on some terminals) and the line separators."""


def _finite(data: Any) -> Any:
    """``data`` with every infinite or NaN float replaced by None."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: _finite(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(value) for value in data]
    return data


def print_json(data: Any) -> None:
    """``data`` as indented JSON, exact for a program and inert on a terminal: control
    characters are escaped (``\\u009b``), which JSON decodes back to the same text."""
    try:
        text = json.dumps(
            data, ensure_ascii=False, indent=2, sort_keys=False, default=str, allow_nan=False
        )
    except ValueError:  # Infinity and NaN are not JSON: a non-finite number prints as null
        text = json.dumps(_finite(data), ensure_ascii=False, indent=2, sort_keys=False, default=str)
    click.echo(_RAW_IN_JSON.sub(lambda found: f"\\u{ord(found.group()):04x}", text))


def limit_type() -> click.IntRange:
    """The one rule of every ``--limit``: a whole number from 1 to 1,000,000 (the library's
    limit); anything else is a usage error (exit 2), before anything opens."""
    from memkeeper.validation import MAX_LIMIT

    return click.IntRange(1, MAX_LIMIT)


def required_text(_ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """An identifier argument (USER, KEY, QUERY, an id) that is empty or blank is a usage
    error (exit 2), like a missing one; values stay data (an empty VALUE is exit 65)."""
    for text in value if isinstance(value, tuple) else (value,):
        if isinstance(text, str) and not text.strip():
            raise click.BadParameter("must not be empty", param=param)
    return value


def yes_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """The shared ``--yes`` of every writing command: see :meth:`App.check_now`."""
    return click.option(
        "--yes",
        is_flag=True,
        help="Write even though --now (or MEMKEEPER_NOW) is more than a minute from the real "
        "clock.",
    )(func)


def parse_now(_ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """``--now`` / ``MEMKEEPER_NOW``: an ISO-8601 time in range; empty is an error, not unset."""
    if value is None:
        # click reads an empty variable as unset; an empty pretend clock is a mistake to report.
        if os.environ.get(ENV_NOW) == "":
            raise click.BadParameter(
                f"{ENV_NOW} is set but empty; unset it or give an ISO-8601 time", param=param
            )
        return None
    try:
        return parse_user_time(value)
    except MemkeeperError as exc:
        raise click.BadParameter(str(exc), param=param) from None


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="memkeeper")
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=str),
    help="Memory database file. Default: MEMKEEPER_DB, else database.path in the config, "
    "else memory.db in the per-user data directory (the order the library and the service "
    "use too: README, Configuration).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    help=f"Config file. Default: {ENV_CONFIG}, else config.toml in the per-user config directory "
    "(absent: the defaults).",
)
@click.option(
    "--now",
    envvar=ENV_NOW,
    callback=parse_now,
    metavar="ISO-8601",
    help=f"Pretend it is this time (also {ENV_NOW}): previews like 'what expires on 2027-03-01'.",
)
@click.option("-v", "--verbose", count=True, help="Log progress (-v: info, -vv: debug).")
@click.pass_context
def cli(
    ctx: click.Context, db: str | None, config_path: Path | None, now: datetime | None, verbose: int
) -> None:
    """memkeeper keeps AI agents' long-term memory healthy.

    Agents write facts, preferences, notes and conversations into one SQLite memory database;
    memkeeper expires, reviews, demotes, prunes, settles and summarizes them on a schedule,
    and logs every change so it can be explained and undone.
    """
    # The config file and (in App.store) the database: memkeeper.settings, the one
    # resolution the library and the service use too (README "Configuration").
    config_file, explicit = settings.config_file(config_path)
    app = App(
        db=db,
        config_path=config_file,
        config_explicit=explicit,
        now=now,
        verbose=verbose,
    )
    ctx.obj = app
    ctx.call_on_close(app.close)
    level = {0: "warning", 1: "info"}.get(verbose, "debug")
    # structlog stays unimported: every memkeeper logger is a stdlib one (memkeeper.logs).
    logs.configure(level=level, structlog_too=False)


def _fail(message: str, code: int, exc: BaseException | None = None) -> int:
    """Print the one-line error (after its traceback, at ``-vv`` only); return ``code``."""
    if exc is not None and logs.debug_enabled():
        import traceback

        trace = "".join(traceback.format_exception(exc)).rstrip("\n")
        click.echo(logs.redact(trace), err=True)
    one_line = " ".join(message.split()) if "\n" in message or "\r" in message else message
    click.echo(f"memkeeper: error: {logs.redact(one_line)}", err=True)
    return code


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``memkeeper`` console script; returns (and exits with) a code."""
    try:
        cli.main(args=argv, prog_name="memkeeper", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("memkeeper: aborted", err=True)
        code = EXIT_INTERRUPTED
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.ClickException as exc:
        exc.show()
        code = exc.exit_code if exc.exit_code else EXIT_USAGE
    except MemkeeperError as exc:
        code = _fail(str(exc), exc.exit_code, exc)
    except OSError as exc:
        import errno

        from memkeeper.errors import EXIT_CANT_CREATE

        where = f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            message = f"the disk is full ({where}); free some space and run the command again"
            code = _fail(message, EXIT_CANT_CREATE, exc)
        else:
            code = _fail(where, EXIT_ERROR, exc)
    except Exception as exc:  # a driver's error untranslated, or a bug: still one line
        from memkeeper.storage.driver_errors import explain

        explained = explain(exc)
        if explained is not None:
            code = _fail(explained[0], explained[1], exc)
        elif os.environ.get("MEMKEEPER_DEBUG"):
            raise
        else:
            code = _fail(
                f"internal error ({type(exc).__name__}: {exc}); set MEMKEEPER_DEBUG=1 for a "
                "traceback",
                EXIT_ERROR,
                exc,
            )
    else:
        code = 0
    sys.stdout.flush()
    return code


def entry() -> None:
    """The console script: run :func:`main` and exit with its code."""
    sys.exit(main())
