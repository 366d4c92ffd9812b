"""``memkeeper run`` (the service) and ``memkeeper service install``."""

from __future__ import annotations

import getpass
import os
import pwd
import shlex
import sys
from pathlib import Path

import click

from memkeeper import settings
from memkeeper.cli import App, pass_app
from memkeeper.errors import ConfigError, StorageUnwritable
from memkeeper.paths import ENV_DB
from memkeeper.service.unit_files import (
    ENV_FILE_NAME,
    SYSTEM_DB,
    Installation,
    Scope,
    ServiceFile,
    directories_to_create,
    installation_read_paths,
    launchd_enable_command,
    launchd_files,
    launchd_log_dir,
    memkeeper_command,
    systemd_enable_command,
    systemd_files,
)
from memkeeper.settings import DB_SOURCE_TEXT, Settings

ALLOW_FLAG = "--allow-db-mismatch"


@click.command("run")
@click.option(
    "--mcp",
    "mcp_listen",
    metavar="[HOST:]PORT",
    help="Also serve the MCP server over HTTP (as memkeeper mcp --http) inside the service.",
)
@click.option(
    "--mcp-no-auth",
    is_flag=True,
    help="The MCP server without tokens, for the OS user: on 127.0.0.1 only.",
)
@pass_app
def run_command(app: App, mcp_listen: str | None, mcp_no_auth: bool) -> None:
    """Run the maintenance service in the foreground until stopped.

    Runs every enabled job on its schedule (service.timezone), first catching up runs missed
    while the service was down. One service per database: a second one exits 75. SIGHUP
    reloads config.toml; SIGTERM or Ctrl-C stops after the current batch. Speaks systemd's
    notify protocol (READY, WATCHDOG, STOPPING). A bad configuration exits 78.
    """
    from memkeeper.service.daemon import Daemon

    if app.now is not None:
        raise ConfigError(
            "--now / MEMKEEPER_NOW cannot be used with run: the service follows the real clock"
        )
    config = app.config
    mcp_plan = None
    if mcp_listen:
        from memkeeper.cli.mcp_cmd import default_user
        from memkeeper.mcp.http import plan

        user = default_user() if mcp_no_auth else None
        mcp_plan = plan(mcp_listen, config, no_auth=mcp_no_auth, user=user)
    elif mcp_no_auth:
        raise click.UsageError("--mcp-no-auth applies to --mcp only")
    Daemon(
        db=app.db,
        config=config,
        config_path=app.config_path,
        config_explicit=app.config_explicit,
        log_level={0: None, 1: "info"}.get(app.verbose, "debug"),
        mcp_plan=mcp_plan,
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


def _installation(
    app: App, scope: Scope, init_system: str, *, state_dir: bool = True
) -> tuple[Installation, Settings]:
    """What the unit will run, and this account's own resolution of the database (the one
    its agents and ``memkeeper status`` use), to compare the two.

    ``state_dir`` false (root, without --system): the system service maintains root's own
    database, the one root's agents use, so the README's quick start works for root too.
    """
    config = app.config  # an invalid config is refused (exit 78) before anything is written
    own = settings.resolve(app.db, config)
    if own.url is not None:
        _refuse_a_password_in_the_unit(own.url)
    if scope == "system" and own.db_source == "default" and state_dir:
        # Nobody named a database: a system service keeps its own in /var/lib/memkeeper.
        hot, cold, _source = settings.database_paths(SYSTEM_DB, config)
    else:
        hot, cold = own.hot_path, own.cold_path
    config_file = (app.config_path or settings.config_file()[0]).absolute()
    config_path = config_file if config_file.exists() else None
    inst = Installation(
        command=memkeeper_command(),
        db_path=hot.absolute(),
        config_path=config_path,
        scope=scope,
        user=_system_user() if scope == "system" else None,
        cold_path=cold.absolute(),
        log_dir=launchd_log_dir(scope) if init_system == "launchd" else None,
        env_file=config_file.with_name(ENV_FILE_NAME),
        read_paths=installation_read_paths(),
        database_url=own.url,
    )
    return inst, own


def _masked(url: str) -> str:
    from memkeeper.storage.postgres.url import mask_url

    return mask_url(url)


def _refuse_a_password_in_the_unit(url: str) -> None:
    """A unit file is readable by others: a URL that holds a password is not written there."""
    from memkeeper.storage.postgres.url import parse_url

    if parse_url(url).has_password:
        raise click.UsageError(
            "the database URL holds a password, which a service file must not: give the URL "
            "without it and put the password in ~/.pgpass (or a libpq service file, or "
            "PGPASSWORD in the environment file beside the config, mode 0600)"
        )


def _check_same_database(inst: Installation, own: Settings, allow: bool) -> None:
    """Refuse (exit 2) a unit that would maintain another database than this account's."""
    if own.url is not None and own.url == inst.database_url:
        return
    mine = (own.hot_path.absolute(), own.cold_path.absolute())
    if own.url is None and inst.database_url is None and (inst.db_path, inst.cold_file) == mine:
        return
    theirs = inst.database_url or inst.db_path
    ours = _masked(own.url) if own.url is not None else mine[0]
    where = f"{ours} (from {DB_SOURCE_TEXT[own.db_source]})"
    if allow:
        click.echo(
            f"note: this account's agents and `memkeeper status` use {where}; point the "
            f"agents at the service's database with {ENV_DB}={theirs}",
            err=True,
        )
        return
    raise click.UsageError(
        f"the {inst.scope} service would maintain {theirs}, but this account's agents "
        f"and `memkeeper status` use {where}. Name the database your agents use with --db "
        f"(or {ENV_DB}, or database.path in the config file), or pass {ALLOW_FLAG} to install "
        f"for {theirs} anyway and point the agents at it."
    )


def _create_dirs(directories: list[Path], user: str | None) -> None:
    """Create the service's database directories, owned by the account it runs as (0700)."""
    for directory in directories:
        if directory.is_dir():
            continue
        owner = _account_ids(user, directory)
        try:
            directory.mkdir(parents=True, mode=0o700)
            if owner is not None:
                os.chown(directory, *owner)
        except OSError as exc:
            raise StorageUnwritable(f"cannot create {directory}: {exc.strerror or exc}") from None
        who = f"owner {user}, " if user else ""
        click.echo(f"created {directory} ({who}mode 0700)")


def _account_ids(user: str | None, directory: Path) -> tuple[int, int] | None:
    if user is None:
        return None
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise StorageUnwritable(
            f"cannot create {directory} for the service account {user!r}: no such account"
        ) from None
    return entry.pw_uid, entry.pw_gid


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
    ALLOW_FLAG,
    "allow_other_db",
    is_flag=True,
    help="Install even though the service's database differs from the one this account's "
    "agents and `memkeeper status` use (a system service without --db maintains "
    "/var/lib/memkeeper/memory.db).",
)
@click.option(
    "--init-system",
    type=click.Choice(["auto", "systemd", "launchd"]),
    default="auto",
    show_default=True,
    help="Which service manager to write for (auto: systemd on Linux, launchd on macOS).",
)
@pass_app
def install(
    app: App,
    scope: Scope | None,
    print_only: bool,
    timer: bool,
    allow_other_db: bool,
    init_system: str,
) -> None:
    """Write the service definition for this installation and print how to enable it.

    The unit (or plist) runs this memkeeper with this database and config file, by absolute
    path; the database is resolved as for every command and printed.
    A unit that would maintain another database than this account's agents use is refused
    (exit 2) unless --allow-db-mismatch is given. Nothing is enabled or started: the last line
    printed is the one command to do it.
    """
    explicit = scope is not None
    scope = scope or ("system" if os.geteuid() == 0 else "user")
    manager = _init_system(init_system)
    # --system keeps its database in the state directory (/var/lib/memkeeper) unless one is
    # named; root's plain `service install` maintains the database root's agents use.
    inst, own = _installation(app, scope, manager, state_dir=explicit)
    _check_same_database(inst, own, allow_other_db)
    click.echo(
        f"the service maintains {inst.database}",
        err=print_only,
    )
    if manager == "launchd":
        if timer:
            raise click.UsageError("--timer is for systemd; launchd runs the service (KeepAlive)")
        files = launchd_files(inst)
        enable = launchd_enable_command(scope, files[0].path)
    else:
        files = systemd_files(inst, timer=timer)
        enable = systemd_enable_command(scope, timer=timer)
    directories = directories_to_create(inst, manager)
    if print_only:
        for item in files:
            if len(files) > 1:
                click.echo(f"# ---- {item.path} ----")
            click.echo(item.text, nl=False)
        for directory in directories:
            if not directory.is_dir():
                owner = f" -o {shlex.quote(inst.user)}" if inst.user else ""
                click.echo(
                    f"# create first: install -d -m 0700{owner} {shlex.quote(str(directory))}",
                    err=True,
                )
        click.echo(
            f"# install as {', '.join(str(f.path) for f in files)}; then: {enable}", err=True
        )
        return
    _create_dirs(directories, inst.user)
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
