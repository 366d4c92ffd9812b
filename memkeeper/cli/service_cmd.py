"""``memkeeper run`` (the service) and ``memkeeper service install``."""

from __future__ import annotations

import getpass
import os
import sys
from pathlib import Path

import click

from memkeeper.cli import App, pass_app
from memkeeper.errors import ConfigError, StorageUnwritable
from memkeeper.paths import ENV_DB, default_config_path
from memkeeper.service_files import (
    ENV_FILE_NAME,
    SYSTEM_DB,
    Installation,
    Scope,
    ServiceFile,
    installation_read_paths,
    launchd_enable_command,
    launchd_files,
    launchd_log_dir,
    memkeeper_command,
    systemd_enable_command,
    systemd_files,
)
from memkeeper.store import resolve_paths


@click.command("run")
@pass_app
def run_command(app: App) -> None:
    """Run the maintenance service in the foreground until stopped.

    Runs every enabled job on its schedule (service.timezone), first catching up runs missed
    while the service was down. One service per database: a second one exits 75. SIGHUP
    reloads config.toml; SIGTERM or Ctrl-C stops after the current batch. Speaks systemd's
    notify protocol (READY, WATCHDOG, STOPPING). A bad configuration exits 78.
    """
    from memkeeper.daemon import Daemon

    if app.now is not None:
        raise ConfigError(
            "--now / MEMKEEPER_NOW cannot be used with run: the service follows the real clock"
        )
    config = app.config
    Daemon(
        db=app.db,
        config=config,
        config_path=app.config_path,
        config_explicit=app.config_explicit,
        log_level={0: None, 1: "info"}.get(app.verbose, "debug"),
    ).run()


@click.group("service")
def service_group() -> None:
    """Install memkeeper run as a systemd or launchd service."""


def _init_system(choice: str) -> str:
    if choice != "auto":
        return choice
    if sys.platform.startswith("linux"):
        return "systemd"
    if sys.platform == "darwin":
        return "launchd"
    raise ConfigError(
        f"no service manager support for {sys.platform}; run `memkeeper run` yourself"
    )


def _system_user() -> str | None:
    """The account a system service runs as: whoever ran sudo, else the current user."""
    name = os.environ.get("SUDO_USER") or getpass.getuser()
    return None if name == "root" else name


def _installation(app: App, scope: Scope, init_system: str) -> Installation:
    config = app.config  # an invalid config is refused (exit 78) before anything is written
    explicit_db = bool(app.db or os.environ.get(ENV_DB) or config.database.path)
    hot, cold = resolve_paths(
        SYSTEM_DB if scope == "system" and not explicit_db else app.db, config
    )
    hot = hot.absolute()
    cold = cold.absolute()
    config_file = (app.config_path or default_config_path()).absolute()
    config_path = config_file if config_file.exists() else None
    return Installation(
        command=memkeeper_command(),
        db_path=hot,
        config_path=config_path,
        scope=scope,
        user=_system_user() if scope == "system" else None,
        cold_path=cold if cold.parent != hot.parent else None,
        log_dir=launchd_log_dir(scope) if init_system == "launchd" else None,
        env_file=config_file.with_name(ENV_FILE_NAME),
        read_paths=installation_read_paths(),
    )


def _write(files: list[ServiceFile]) -> None:
    for item in files:
        try:
            item.path.parent.mkdir(parents=True, exist_ok=True)
            replaced = item.path.exists()
            item.path.write_text(item.text, encoding="utf-8")
        except PermissionError:
            raise StorageUnwritable(
                f"cannot write {item.path}: permission denied (use sudo for --system, or --print)"
            ) from None
        except OSError as exc:
            raise StorageUnwritable(f"cannot write {item.path}: {exc.strerror or exc}") from None
        click.echo(f"{'replaced' if replaced else 'wrote'} {item.path}")


@service_group.command("install")
@click.option(
    "--user", "scope", flag_value="user", help="A per-user service (default unless root)."
)
@click.option("--system", "scope", flag_value="system", help="A system-wide service (needs root).")
@click.option(
    "--print", "print_only", is_flag=True, help="Print the file(s) instead of writing them."
)
@click.option(
    "--timer",
    is_flag=True,
    help="Install `run-once --due` with an hourly systemd timer instead of the service.",
)
@click.option(
    "--init-system",
    type=click.Choice(["auto", "systemd", "launchd"]),
    default="auto",
    show_default=True,
    help="Which service manager to write for (auto: systemd on Linux, launchd on macOS).",
)
@pass_app
def install(app: App, scope: Scope | None, print_only: bool, timer: bool, init_system: str) -> None:
    """Write the service definition for this installation and print how to enable it.

    The unit (or plist) runs this memkeeper with this database and config file, by absolute
    path. Nothing is enabled or started: the last line printed is the one command to do it.
    """
    scope = scope or ("system" if os.geteuid() == 0 else "user")
    manager = _init_system(init_system)
    inst = _installation(app, scope, manager)
    if manager == "launchd":
        if timer:
            raise click.UsageError("--timer is for systemd; launchd runs the service (KeepAlive)")
        files = launchd_files(inst)
        enable = launchd_enable_command(scope, files[0].path)
    else:
        files = systemd_files(inst, timer=timer)
        enable = systemd_enable_command(scope, timer=timer)
    if print_only:
        for item in files:
            if len(files) > 1:
                click.echo(f"# ---- {item.path} ----")
            click.echo(item.text, nl=False)
        click.echo(
            f"# install as {', '.join(str(f.path) for f in files)}; then: {enable}", err=True
        )
        return
    if inst.log_dir is not None:
        _write_dir(inst.log_dir)
    _write(files)
    click.echo(f"enable it with: {enable}")


def _write_dir(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageUnwritable(f"cannot create {directory}: {exc.strerror or exc}") from None


def register(group: click.Group) -> None:
    group.add_command(run_command)
    group.add_command(service_group)
