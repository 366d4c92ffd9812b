"""Where memkeeper keeps its files when nobody says otherwise.

The database lives in the per-user data directory (``~/.local/share/memkeeper`` on Linux,
``~/Library/Application Support/memkeeper`` on macOS) and the configuration in the per-user
config directory (``~/.config/memkeeper/config.toml`` on Linux). ``MEMKEEPER_DB`` and
``MEMKEEPER_CONFIG`` override them; the CLI's ``--db`` and ``--config`` override those.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "memkeeper"
DB_FILENAME = "memory.db"
CONFIG_FILENAME = "config.toml"
ENV_DB = "MEMKEEPER_DB"
ENV_CONFIG = "MEMKEEPER_CONFIG"
ENV_NOW = "MEMKEEPER_NOW"


def user_data_dir() -> Path:
    """The per-user data directory for memkeeper (not created here)."""
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def user_config_dir() -> Path:
    """The per-user configuration directory for memkeeper (not created here)."""
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def default_config_path() -> Path:
    """The config file path used when ``--config`` is not given."""
    env = os.environ.get(ENV_CONFIG)
    if env:
        return Path(env).expanduser()
    return user_config_dir() / CONFIG_FILENAME


def cold_path_for(hot_path: Path) -> Path:
    """The cold-storage file that sits beside a hot database: ``memory.db`` → ``memory-cold.db``."""
    return hot_path.with_name(f"{hot_path.stem}-cold{hot_path.suffix or '.db'}")
