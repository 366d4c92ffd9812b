"""The ``memkeeper`` command line on click: the group, its global options and the options
the commands share.

Commands live in small modules by concern (memory, inspect, transfer, config, jobs, service)
and register on the one group defined here. :func:`main` is the edge: it turns click's usage
errors and (through :mod:`memkeeper.cli.failures`) memkeeper's exceptions into a one-line
message and a documented exit code (see ``memkeeper.errors``); a traceback is shown only at
``-vv``. (``memkeeper.cli.main`` first offers the command to the quick start,
:mod:`memkeeper.cli.quick`.)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from memkeeper import logs, settings
from memkeeper.cli.commands import LazyGroup
from memkeeper.cli.failures import exit_code_of
from memkeeper.cli.invocation import App
from memkeeper.cli.output import print_json
from memkeeper.clock import parse_user_time
from memkeeper.errors import EXIT_USAGE, MemkeeperError
from memkeeper.paths import ENV_CONFIG, ENV_NOW

__all__ = [
    "EXIT_INTERRUPTED",
    "App",
    "cli",
    "json_option",
    "limit_type",
    "main",
    "namespace_option",
    "pass_app",
    "print_json",
    "required_text",
    "yes_option",
]

EXIT_INTERRUPTED = 130


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
# The installed distribution's version (its metadata, read only when --version is given).
@click.version_option(package_name="memkeeper", prog_name="memkeeper")
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=str),
    help="Memory database: a file, or a postgresql:// URL. Default: MEMKEEPER_DB, else "
    "database.url or database.path in the config, else memory.db in the per-user data "
    "directory (the order the library and the service use too).",
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


def main(argv: list[str] | None = None) -> int:
    """Run one command line on click; return its exit code (``memkeeper.cli.main`` calls it
    for every command the quick start leaves)."""
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
    except Exception as exc:  # ours, the OS's, a driver's, or a bug: one line (failures.py)
        code = exit_code_of(exc)
    else:
        code = 0
    sys.stdout.flush()
    return code
