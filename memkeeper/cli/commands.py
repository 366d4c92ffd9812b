"""The top-level command group's table of commands, loaded on first use.

Running one command imports only the module that defines it: ``memkeeper recall`` does not
import the job runner, the service, the backup code or the MCP server (README, Performance:
start-up). ``--help`` and the drift tests walk ``commands``, which loads them all.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

COMMAND_MODULES = {
    **dict.fromkeys(
        (
            "remember",
            "recall",
            "note",
            "forget",
            "forget-id",
            "forget-namespace",
            "forget-user",
            "get",
        ),
        "memory_cmd",
    ),
    **dict.fromkeys(("search", "context"), "search_cmd"),
    **dict.fromkeys(("list", "log", "explain", "history", "status"), "inspect_cmd"),
    **dict.fromkeys(("import", "export"), "transfer_cmd"),
    "config": "config_cmd",
    **dict.fromkeys(("run-once", "review", "restore", "undo"), "jobs_cmd"),
    "bench": "bench_cmd",
    "models": "models_cmd",
    "demo": "demo_cmd",
    "mcp": "mcp_cmd",
    "ui": "ui_cmd",
    **dict.fromkeys(("backup", "restore-backup"), "backup_cmd"),
    "migrate-to": "migrate_cmd",
    "summarize": "summarize_cmd",
    **dict.fromkeys(("run", "service"), "service_cmd"),
}
"""Which module of memkeeper.cli defines each command: a command's module is imported only
when that command runs (or for --help), so ``memkeeper recall`` does not import the job
runner, the service or the MCP server (README, Performance: start-up)."""


ALSO_LOADS = {"review": ("summarize_cmd",)}
"""Commands another module adds subcommands to (``review sessions`` is summarize's)."""


class LazyGroup(click.Group):
    """The top-level group: commands load from :data:`COMMAND_MODULES` on first use.

    ``commands`` (what --help and the drift tests walk) loads every module; running one
    command loads only its own.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._loaded: dict[str, click.Command] = {}
        self._modules: set[str] = set()
        self._all_loaded = False
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def commands(self) -> dict[str, click.Command]:
        if not self._all_loaded:
            self._all_loaded = True
            for module in sorted(set(COMMAND_MODULES.values())):
                self._load(module)
        return self._loaded

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._loaded = dict(value)

    def _load(self, module: str) -> None:
        if module in self._modules:
            return
        self._modules.add(module)
        importlib.import_module(f"memkeeper.cli.{module}").register(self)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        name = name or cmd.name
        assert name is not None
        self._loaded.setdefault(name, cmd)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        if module is not None:
            self._load(module)
        # Also when the command came with another one's module (run-once brings review):
        # its subcommands from elsewhere are loaded with it.
        for extra in ALSO_LOADS.get(cmd_name, ()):
            self._load(extra)
        return self._loaded.get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self._loaded) | set(COMMAND_MODULES))
