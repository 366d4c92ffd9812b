"""One invocation of the command line: its global options and the config and stores made from
them (:class:`App`), without click.

Both ways a command runs share it: the click command line (:mod:`memkeeper.cli.app`) and the
memory commands' quick start (:mod:`memkeeper.cli.quick`), which must not load click.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memkeeper.clock import fixed, system_now
from memkeeper.config.file import load_config
from memkeeper.paths import ENV_NOW

if TYPE_CHECKING:
    from memkeeper.config import Config

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
        and ``--dry-run`` previews are free to pretend. (Only the click command line gets
        here with a pretend time: the quick start leaves --now to it.)
        """
        if self.now is None or yes or dry_run:
            return
        drift = self.now - system_now()
        if abs(drift) <= NOW_TOLERANCE:
            return
        import click
        from click.core import ParameterSource

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
