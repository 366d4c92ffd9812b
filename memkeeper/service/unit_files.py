"""Service definitions for ``memkeeper run``: systemd units, the timer alternative, launchd.

Everything is rendered from one :class:`Installation` — the absolute command that starts this
memkeeper, the database and the config file — so an installed unit runs exactly the
memkeeper, database and configuration it was installed from. The files checked in under
``systemd/`` and ``launchd/`` are these renderings for :data:`PACKAGED` (a test keeps them
from drifting).

systemd hardening. A system unit gets the full sandbox: a read-only system
(``ProtectSystem=strict``) with only the database directory writable, no home directories
unless the installation lives in one (then read-only), a private /tmp unless the installation
lives there, no devices, kernel knobs or capabilities, ``@system-service`` system calls, and
only the address families the LLM call and the notify socket need. A user unit keeps the
parts that need no mount namespace (a user manager can only build one where unprivileged user
namespaces are allowed, and a unit that cannot be sandboxed fails to start at all).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import memkeeper
from memkeeper.service.installation import Installation, Scope
from memkeeper.service.launchd_plist import LAUNCHD_LABEL, render_plist

SERVICE_NAME = "memkeeper.service"
RUN_ONCE_SERVICE_NAME = "memkeeper-run-once.service"
RUN_ONCE_TIMER_NAME = "memkeeper-run-once.timer"
ENV_FILE_NAME = "memkeeper.env"
STATE_ROOT = Path("/var/lib")
SYSTEM_DB = STATE_ROOT / "memkeeper" / "memory.db"
HOME_ROOTS = (Path("/home"), Path("/root"), Path("/run/user"))
TMP_ROOTS = (Path("/tmp"), Path("/var/tmp"))  # noqa: S108 - recognized, never used


PACKAGED = Installation(
    command=("/usr/local/bin/memkeeper",),
    db_path=SYSTEM_DB,
    config_path=Path("/etc/memkeeper/config.toml"),
    scope="system",
    user="memkeeper",
    env_file=Path("/etc/memkeeper") / ENV_FILE_NAME,
)
"""The installation the checked-in systemd units describe (a packaged, system-wide one)."""

PACKAGED_LAUNCHD = Installation(
    command=("/usr/local/bin/memkeeper",),
    db_path=Path("/usr/local/var/memkeeper/memory.db"),
    config_path=None,
    scope="user",
    log_dir=Path("/usr/local/var/log/memkeeper"),
)
"""The installation the checked-in launchd plist describes."""


def memkeeper_command() -> tuple[str, ...]:
    """How to start this very memkeeper: its console script beside the interpreter, else
    ``python -m memkeeper`` (absolute paths; the venv's interpreter link is kept, not resolved)."""
    python = os.path.abspath(sys.executable)
    script = Path(python).parent / "memkeeper"
    if script.is_file() and os.access(script, os.X_OK):
        return (str(script),)
    return (python, "-m", "memkeeper")


def installation_read_paths() -> tuple[Path, ...]:
    """Where this memkeeper's code lives (interpreter, environment, package source)."""
    package_root = Path(memkeeper.__file__).resolve().parent.parent
    paths = [Path(sys.executable).resolve(), Path(sys.prefix), Path(sys.base_prefix), package_root]
    return tuple(dict.fromkeys(paths))


# -- systemd -----------------------------------------------------------------------------------


def systemd_quote(word: str) -> str:
    """One word of a systemd command line or path list, quoted and escaped as needed."""
    word = word.replace("%", "%%").replace("$", "$$")
    if word and not any(c.isspace() or c in "\"'\\;" for c in word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _command_line(words: list[str]) -> str:
    return " ".join(systemd_quote(word) for word in words)


def _under(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _sandbox(inst: Installation) -> list[str]:
    """The hardening lines for a unit of ``inst`` (see the module docstring)."""
    lines = [
        "# Hardening: see docs/guides/service.md. memkeeper writes only its database directory.",
        "NoNewPrivileges=yes",
    ]
    if inst.scope == "system":
        lines.append("ProtectSystem=strict")
        state = [d for d in inst.writable_dirs if _state_managed(d)]
        others = [d for d in inst.writable_dirs if not _state_managed(d)]
        for directory in state:
            lines += [f"StateDirectory={directory.name}", "StateDirectoryMode=0700"]
        if others:
            lines += [
                "# These directories must exist before the service starts (service install",
                "# creates them); the database, its cold file, WAL and lock files live there.",
                "ReadWritePaths=" + " ".join(systemd_quote(str(d)) for d in others),
            ]
        in_home = _under_any(inst.all_paths, HOME_ROOTS)
        lines.append(f"ProtectHome={'read-only' if in_home else 'yes'}")
        if _under_any(inst.all_paths, TMP_ROOTS):
            lines.append("# PrivateTmp=yes is left out: this installation lives under /tmp.")
        else:
            lines.append("PrivateTmp=yes")
        lines += [
            "PrivateDevices=yes",
            "PrivateMounts=yes",
            "ProtectProc=invisible",
            "RemoveIPC=yes",
            "ProtectKernelTunables=yes",
            "ProtectKernelModules=yes",
            "ProtectKernelLogs=yes",
            "ProtectControlGroups=yes",
            "ProtectClock=yes",
            "ProtectHostname=yes",
            "RestrictNamespaces=yes",
            "CapabilityBoundingSet=",
        ]
    lines += [
        "LockPersonality=yes",
        "RestrictRealtime=yes",
        "RestrictSUIDSGID=yes",
        "# AF_UNIX: the notify socket and journald; AF_INET/AF_INET6: the LLM API over HTTPS.",
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
        "SystemCallFilter=@system-service",
        "SystemCallErrorNumber=EPERM",
        "SystemCallArchitectures=native",
        "UMask=0077",
        "# Background work: low CPU priority; lowest best-effort I/O (not idle: a job holding",
        "# the database's write lock must not be starved while agents wait for it).",
        "Nice=10",
        "IOSchedulingClass=best-effort",
        "IOSchedulingPriority=7",
    ]
    return lines


def _under_any(paths: list[Path], roots: tuple[Path, ...]) -> bool:
    return any(_under(path, roots) for path in paths)


def _state_managed(directory: Path) -> bool:
    """Whether systemd creates ``directory`` itself (``StateDirectory=``, /var/lib/NAME)."""
    return directory.parent == STATE_ROOT


def directories_to_create(inst: Installation, init_system: str) -> list[Path]:
    """The directories ``service install`` must create for ``inst`` to start.

    A system service runs as another account inside a read-only system: its database
    directories must exist before it starts (``ReadWritePaths=`` refuses a missing path) and
    belong to that account. systemd creates a ``StateDirectory=`` itself. A user service
    creates its own directories, like any memkeeper.
    """
    if inst.scope != "system":
        return []
    return [d for d in inst.writable_dirs if not (init_system == "systemd" and _state_managed(d))]


def database_comment(inst: Installation) -> str:
    """The comment line naming the files a unit maintains."""
    return f"# Database: {inst.database}."


def _unit_header(description: str, inst: Installation) -> list[str]:
    lines = ["[Unit]", f"Description={description}"]
    if inst.scope == "system":
        lines += ["Wants=network-online.target", "After=network-online.target"]
    return lines


def _account(inst: Installation) -> list[str]:
    lines = [f"User={inst.user}"] if inst.scope == "system" and inst.user else []
    if inst.env_file is not None:
        lines += [
            "# Secrets such as ZHIPUAI_API_KEY=... (for summarization) go in this optional file,",
            "# readable by its owner only; they never belong in config.toml.",
            # One path, taken whole (no quoting); only specifiers need escaping.
            f"EnvironmentFile=-{str(inst.env_file).replace('%', '%%')}",
        ]
    return lines


def render_service(inst: Installation) -> str:
    """``memkeeper.service``: the long-running scheduler (``Type=notify``, watchdog)."""
    lines = [
        "# memkeeper: the maintenance service for AI agents' memory (memkeeper run).",
        "# Generated by `memkeeper service install`; edit with "
        f"`{'systemctl --user' if inst.scope == 'user' else 'systemctl'} edit memkeeper`.",
        database_comment(inst),
        *_unit_header("memkeeper memory maintenance service", inst),
        "",
        "[Service]",
        "Type=notify",
        "NotifyAccess=main",
        f"ExecStart={_command_line(inst.args('run'))}",
        "ExecReload=/bin/kill -HUP $MAINPID",
        *_account(inst),
        "# Exit 78 is a configuration error: fix config.toml, do not restart in a loop.",
        "Restart=on-failure",
        "RestartSec=10s",
        "RestartPreventExitStatus=78",
        "WatchdogSec=60s",
        "TimeoutStopSec=30s",
        *_sandbox(inst),
        "",
        "[Install]",
        f"WantedBy={'multi-user.target' if inst.scope == 'system' else 'default.target'}",
    ]
    return "\n".join(lines) + "\n"


def render_run_once_service(inst: Installation) -> str:
    """``memkeeper-run-once.service``: run the due jobs once (started by the timer)."""
    lines = [
        "# memkeeper: run the maintenance jobs that are due, then exit.",
        f"# Started by {RUN_ONCE_TIMER_NAME}; the alternative to {SERVICE_NAME}.",
        database_comment(inst),
        *_unit_header("memkeeper: run due memory maintenance jobs", inst),
        "",
        "[Service]",
        "Type=oneshot",
        f"ExecStart={_command_line(inst.args('run-once', '--due'))}",
        *_account(inst),
        *_sandbox(inst),
    ]
    return "\n".join(lines) + "\n"


def render_timer(on_calendar: str = "hourly") -> str:
    """``memkeeper-run-once.timer``: start the run-once service regularly, catching up."""
    lines = [
        "# memkeeper: run the due maintenance jobs every hour. Persistent=true starts a",
        "# run missed while the machine was off as soon as it is back.",
        "[Unit]",
        "Description=memkeeper: run due memory maintenance jobs regularly",
        "",
        "[Timer]",
        f"OnCalendar={on_calendar}",
        "Persistent=true",
        "RandomizedDelaySec=60s",
        f"Unit={RUN_ONCE_SERVICE_NAME}",
        "",
        "[Install]",
        "WantedBy=timers.target",
    ]
    return "\n".join(lines) + "\n"


# -- where files go ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ServiceFile:
    """One file to write, and what it contains."""

    path: Path
    text: str


def systemd_unit_dir(scope: Scope) -> Path:
    """Where a locally installed unit goes (``~/.config/systemd/user`` for a user unit)."""
    if scope == "system":
        return Path("/etc/systemd/system")
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home) / "systemd" / "user"


def launchd_dir(scope: Scope) -> Path:
    """Where a launchd job goes: LaunchDaemons (system) or the user's LaunchAgents."""
    return (
        Path("/Library/LaunchDaemons")
        if scope == "system"
        else Path.home() / "Library/LaunchAgents"
    )


def launchd_log_dir(scope: Scope) -> Path:
    """Where the launchd job's log file goes (launchd does not create the directory)."""
    return (
        Path("/Library/Logs/memkeeper")
        if scope == "system"
        else Path.home() / "Library/Logs/memkeeper"
    )


def systemd_files(inst: Installation, *, timer: bool) -> list[ServiceFile]:
    directory = systemd_unit_dir(inst.scope)
    if timer:
        return [
            ServiceFile(directory / RUN_ONCE_SERVICE_NAME, render_run_once_service(inst)),
            ServiceFile(directory / RUN_ONCE_TIMER_NAME, render_timer()),
        ]
    return [ServiceFile(directory / SERVICE_NAME, render_service(inst))]


def launchd_files(inst: Installation) -> list[ServiceFile]:
    return [ServiceFile(launchd_dir(inst.scope) / f"{LAUNCHD_LABEL}.plist", render_plist(inst))]


def systemd_enable_command(scope: Scope, *, timer: bool) -> str:
    unit = RUN_ONCE_TIMER_NAME if timer else SERVICE_NAME
    if scope == "user":
        return f"systemctl --user daemon-reload && systemctl --user enable --now {unit}"
    sudo = "" if os.geteuid() == 0 else "sudo "
    return f"{sudo}systemctl daemon-reload && {sudo}systemctl enable --now {unit}"


def launchd_enable_command(scope: Scope, plist: Path) -> str:
    if scope == "system":
        sudo = "" if os.geteuid() == 0 else "sudo "
        return f"{sudo}launchctl bootstrap system {plist}"
    return f"launchctl bootstrap gui/{os.getuid()} {plist}"


def packaged_files() -> dict[str, str]:
    """The checked-in service files (path in the repository -> text), rendered for
    :data:`PACKAGED` and :data:`PACKAGED_LAUNCHD`. Regenerate them after a template change::

        python -c "from memkeeper.service.unit_files import write_packaged_files as w; w('.')"
    """
    return {
        f"systemd/{SERVICE_NAME}": render_service(PACKAGED),
        f"systemd/{RUN_ONCE_SERVICE_NAME}": render_run_once_service(PACKAGED),
        f"systemd/{RUN_ONCE_TIMER_NAME}": render_timer(),
        f"launchd/{LAUNCHD_LABEL}.plist": render_plist(PACKAGED_LAUNCHD),
    }


def write_packaged_files(root: str | Path) -> None:
    """Write :func:`packaged_files` under the repository root ``root``."""
    for relative, text in packaged_files().items():
        target = Path(root) / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
