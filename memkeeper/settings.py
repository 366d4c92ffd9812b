"""Which database and which configuration: one resolution for every caller.

The library (``MemoryStore()``), the command line and the service (``memkeeper run``, the
units ``memkeeper service install`` writes) all call :func:`resolve`, so an agent and the
maintenance service can never silently work on different databases or with different limits.
The order, documented once in the README ("Configuration"):

1. The **config file**: the ``config`` argument (``--config``, ``MemoryStore(config=PATH)``),
   else ``MEMKEEPER_CONFIG``, else ``config.toml`` in the per-user config directory. A missing
   default file means the defaults; a missing file that was named is a
   :class:`~memkeeper.errors.ConfigError`. A :class:`~memkeeper.config.Config` object passed
   instead is used as it is (no file is read).
2. The **hot database**: the ``db`` argument (``--db``, ``MemoryStore(PATH)``), else
   ``MEMKEEPER_DB``, else ``database.path`` of the config, else ``memory.db`` in the per-user
   data directory.
3. The **cold file**: ``database.cold_path`` when the hot file is the one the config names
   (``database.path``, or the default when that is empty); otherwise ``<hot name>-cold.db``
   beside the hot file, so a database named by ``--db`` or ``MEMKEEPER_DB`` never shares the
   configured cold file of another database.
4. **Every other setting** (``[limits]``, ``[jobs]``...): the config, else the defaults.
   ``MEMKEEPER_DB`` sets the path only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from memkeeper.config.file import load_config
from memkeeper.paths import (
    CONFIG_FILENAME,
    DB_FILENAME,
    ENV_CONFIG,
    ENV_DB,
    cold_path_for,
    is_database_url,
    user_config_dir,
    user_data_dir,
)

if TYPE_CHECKING:
    from memkeeper.config import Config

DbSource = Literal["argument", "environment", "config", "default"]
"""Where the hot database path came from: ``--db``/argument, ``MEMKEEPER_DB``,
``database.path``, or the per-user default."""

DB_SOURCE_TEXT: dict[DbSource, str] = {
    "argument": "--db",
    "environment": ENV_DB,
    "config": "database.path in the config file",
    "default": "the default: the per-user data directory",
}


@dataclass(frozen=True)
class Settings:
    """The outcome of :func:`resolve`: the configuration and the two database files."""

    config: Config
    config_path: Path | None
    """The config file consulted (it may not exist); None when a Config object was given."""
    config_explicit: bool
    """Whether the file was named (argument or MEMKEEPER_CONFIG): then it must exist."""
    hot_path: Path
    cold_path: Path
    db_source: DbSource
    url: str | None = None
    """A PostgreSQL database (``postgresql://...``) instead of the two files; then
    ``hot_path`` and ``cold_path`` are unused."""


def config_file(path: str | Path | None = None) -> tuple[Path, bool]:
    """The config file to read and whether it was named explicitly (so must exist).

    ``path`` (``--config``), else ``MEMKEEPER_CONFIG``, else the per-user config file.
    """
    if path is not None and str(path) != "":
        return Path(path).expanduser(), True
    env = os.environ.get(ENV_CONFIG)
    if env:
        return Path(env).expanduser(), True
    return user_config_dir() / CONFIG_FILENAME, False


def load(config: Config | str | Path | None = None) -> tuple[Config, Path | None, bool]:
    """The configuration: ``config`` itself if it is a Config, else the file it names or
    the default file (see :func:`config_file`). Returns (config, file consulted, explicit)."""
    if config is not None and not isinstance(config, str | os.PathLike):
        return config, None, False  # a Config (or the defaults' view): used as it is
    path, explicit = config_file(config)
    return load_config(path, explicit=explicit), path, explicit


def _same_file(a: Path, b: Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError):  # a symlink loop: compare the names as given
        return os.path.abspath(a) == os.path.abspath(b)


def database_paths(db: str | Path | None, config: Config) -> tuple[Path, Path, DbSource]:
    """The hot file, the cold file and where the hot path came from (rules 2 and 3)."""
    source: DbSource
    configured = (
        Path(config.database.path).expanduser()
        if config.database.path
        else user_data_dir() / DB_FILENAME
    )
    if db is not None and str(db) != "":
        hot, source = Path(db).expanduser(), "argument"
    elif os.environ.get(ENV_DB):
        hot, source = Path(os.environ[ENV_DB]).expanduser(), "environment"
    else:
        hot, source = configured, "config" if config.database.path else "default"
    own = source in ("config", "default") or _same_file(hot, configured)
    if config.database.cold_path and own:
        return hot, Path(config.database.cold_path).expanduser(), source
    return hot, cold_path_for(hot), source


def database_url(db: str | Path | None, config: Config) -> tuple[str, DbSource] | None:
    """The PostgreSQL URL the same order names (rule 2), if it names one rather than a file:
    ``db``, else ``MEMKEEPER_DB``, else ``database.url`` (which a path or ``MEMKEEPER_DB``
    given as a file overrides), else None: SQLite."""
    if db is not None and str(db) != "":
        return (str(db), "argument") if is_database_url(db) else None
    env = os.environ.get(ENV_DB)
    if env:
        return (env, "environment") if is_database_url(env) else None
    if config.database.url:
        return config.database.url, "config"
    return None


def resolve(db: str | Path | None = None, config: Config | str | Path | None = None) -> Settings:
    """Resolve the configuration and the database files the way every caller does.

    ``db``: a database path (``--db``), or None for ``MEMKEEPER_DB`` / ``database.path`` /
    the default. ``config``: a Config object, a config file path (``--config``), or None for
    ``MEMKEEPER_CONFIG`` / the per-user config file. Raises ConfigError for an invalid
    config file, or a named one that does not exist.
    """
    loaded, path, explicit = load(config)
    url = database_url(db, loaded)
    if url is not None:
        unused = Path("(postgresql)")  # never the URL itself: it may hold a password
        return Settings(loaded, path, explicit, unused, unused, url[1], url=url[0])
    hot, cold, source = database_paths(db, loaded)
    return Settings(
        config=loaded,
        config_path=path,
        config_explicit=explicit,
        hot_path=hot,
        cold_path=cold,
        db_source=source,
    )
