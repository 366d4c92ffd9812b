"""What a service definition points at: one memkeeper, one database, one config.

Its own module so that the renderers (:mod:`~memkeeper.service.unit_files` for systemd,
:mod:`~memkeeper.service.launchd_plist` for launchd) both import it and neither imports the
other's module back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from memkeeper.paths import cold_path_for

Scope = Literal["user", "system"]


@dataclass(frozen=True)
class Installation:
    """What a service definition points at: one memkeeper, one database, one config."""

    command: tuple[str, ...]
    db_path: Path
    config_path: Path | None
    scope: Scope
    user: str | None = None
    cold_path: Path | None = None
    log_dir: Path | None = None
    env_file: Path | None = None
    read_paths: tuple[Path, ...] = field(default_factory=tuple)
    database_url: str | None = None
    """A PostgreSQL database (no password in it: libpq reads that from ~/.pgpass, a service
    file or PGPASSWORD in the environment file) instead of ``db_path``."""

    def args(self, *command: str) -> list[str]:
        """The full command line of ``memkeeper <command>`` for this installation."""
        config = ["--config", str(self.config_path)] if self.config_path else []
        database = self.database_url or str(self.db_path)
        return [*self.command, "--db", database, *config, *command]

    @property
    def database(self) -> str:
        """The database, named for people (the URL, or the two files)."""
        if self.database_url is not None:
            return f"{self.database_url} (PostgreSQL)"
        return f"{self.db_path} (cold storage: {self.cold_file})"

    @property
    def cold_file(self) -> Path:
        """The cold-storage file the service uses (``cold_path``, else beside the database)."""
        return self.cold_path or cold_path_for(self.db_path)

    @property
    def writable_dirs(self) -> list[Path]:
        """The directories the service writes: the database's (its WAL, SHM and lock files
        live beside it) and the cold file's; none for PostgreSQL (the server writes)."""
        if self.database_url is not None:
            return []
        dirs = [self.db_path.parent]
        if self.cold_file.parent not in dirs:
            dirs.append(self.cold_file.parent)
        return dirs

    @property
    def all_paths(self) -> list[Path]:
        extra = [Path(self.command[0]), *self.read_paths]
        return [*extra, *self.writable_dirs, *([self.config_path] if self.config_path else [])]
