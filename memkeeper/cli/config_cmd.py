"""config check / show / init / path."""

from __future__ import annotations

import os
from pathlib import Path

import click

from memkeeper.cli import App, json_option, pass_app, print_json
from memkeeper.config.doc import render_config
from memkeeper.errors import MemkeeperError, StorageUnwritable
from memkeeper.paths import user_config_dir


@click.group("config")
def config_group() -> None:
    """Check, show or create the configuration file."""


@config_group.command("check")
@click.argument("file", required=False, type=click.Path(path_type=Path, dir_okay=False))
@json_option
@pass_app
def check(app: App, file: Path | None, as_json: bool) -> None:
    """Validate FILE (default: the config this invocation reads); exit 78 naming the file
    and the key at fault if it is invalid (or FILE does not exist)."""
    from memkeeper.config import load_config

    where = file if file is not None else app.config_path
    try:
        if file is not None:
            load_config(file, explicit=True)
        else:
            app.config  # noqa: B018 - loading is the check
    except MemkeeperError as exc:
        if as_json:
            print_json({"path": str(where) if where else None, "valid": False, "error": str(exc)})
        raise
    if where is not None and not where.exists():
        where = None
    if as_json:
        print_json({"path": str(where) if where else None, "valid": True})
    else:
        click.echo(f"{where}: valid" if where else "no config file: using the defaults (valid)")


@config_group.command("show")
@json_option
@pass_app
def show(app: App, as_json: bool) -> None:
    """Print the effective configuration (the file merged over the defaults)."""
    if as_json:
        print_json(app.config.model_dump())
    else:
        click.echo(render_config(app.config), nl=False)


@config_group.command("path")
@pass_app
def path(app: App) -> None:
    """Print which config file this invocation reads (it may not exist)."""
    click.echo(str(app.config_path))


@config_group.command("init")
@pass_app
def init(app: App) -> None:
    """Write the documented default config to the user config directory (never overwrites)."""
    target = app.config_path if app.config_explicit else user_config_dir() / "config.toml"
    assert target is not None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # FileExistsError here means a FILE is in the directory's way
        raise StorageUnwritable(f"cannot create {target}: {exc.strerror or exc}") from None
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise StorageUnwritable(f"{target} already exists; config init never overwrites") from None
    except OSError as exc:
        raise StorageUnwritable(f"cannot create {target}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(render_config())
    click.echo(f"wrote {target}")


def register(group: click.Group) -> None:
    group.add_command(config_group)
