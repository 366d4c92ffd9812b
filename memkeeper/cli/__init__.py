"""The ``memkeeper`` command line: a thin shell over the library.

Commands live in small modules by concern (memory, inspect, transfer, config, jobs, service)
and register on the one group defined here. This module also owns the edge: it is the only
place that turns memkeeper's exceptions into a one-line message and a documented exit code
(see ``memkeeper.errors``), and never shows a traceback.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from memkeeper import __version__, logs
from memkeeper.clock import fixed, parse_user_time
from memkeeper.config import Config, load_config
from memkeeper.errors import EXIT_DATABASE, EXIT_ERROR, EXIT_USAGE, MemkeeperError
from memkeeper.paths import ENV_CONFIG, ENV_NOW, default_config_path

EXIT_INTERRUPTED = 130


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

    def store(self) -> Any:
        """Open the memory store (created on first use) with this invocation's clock."""
        from memkeeper.store import MemoryStore

        store = MemoryStore(
            self.db,
            config=self.config,
            clock=fixed(self.now) if self.now else None,
            actor="cli",
        )
        self._stores.append(store)
        return store

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


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2, sort_keys=False, default=str))


def parse_now(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime | None:
    if value is None or value == "":
        return None
    try:
        return parse_user_time(value)
    except MemkeeperError as exc:
        raise click.BadParameter(str(exc)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="memkeeper")
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=str),
    help="Memory database file. Default: MEMKEEPER_DB, else database.path in the config, "
    "else memory.db in the per-user data directory.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    help=f"Config file. Default: {ENV_CONFIG}, else config.toml in the per-user config directory.",
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
    explicit = config_path is not None or bool(os.environ.get(ENV_CONFIG))
    app = App(
        db=db,
        config_path=config_path or default_config_path(),
        config_explicit=explicit,
        now=now,
        verbose=verbose,
    )
    ctx.obj = app
    ctx.call_on_close(app.close)
    level = {0: "warning", 1: "info"}.get(verbose, "debug")
    logs.configure(level=level)


def _register_commands() -> None:
    from memkeeper.cli import config_cmd, inspect_cmd, jobs_cmd, memory_cmd, transfer_cmd

    for module in (memory_cmd, inspect_cmd, transfer_cmd, config_cmd, jobs_cmd):
        module.register(cli)
    try:
        from memkeeper.cli import service_cmd
    except ImportError:  # pragma: no cover - absent only in partial checkouts
        return
    service_cmd.register(cli)


def _fail(message: str, code: int) -> int:
    click.echo(f"memkeeper: error: {logs.redact(message)}", err=True)
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
        code = _fail(str(exc), exc.exit_code)
    except sqlite3.DatabaseError as exc:
        code = _fail(f"database error: {exc}", EXIT_DATABASE)
    except OSError as exc:
        code = _fail(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), EXIT_ERROR)
    except Exception as exc:  # a bug: still one line, no traceback, unless asked for
        if os.environ.get("MEMKEEPER_DEBUG"):
            raise
        code = _fail(
            f"internal error ({type(exc).__name__}: {exc}); set MEMKEEPER_DEBUG=1 for a traceback",
            EXIT_ERROR,
        )
    else:
        code = 0
    sys.stdout.flush()
    return code


def entry() -> None:
    """The console script: run :func:`main` and exit with its code."""
    sys.exit(main())


_register_commands()
