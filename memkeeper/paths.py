"""Where memkeeper keeps its files when nobody says otherwise.

The database lives in the per-user data directory (``~/.local/share/memkeeper`` on Linux,
``~/Library/Application Support/memkeeper`` on macOS) and the configuration in the per-user
config directory (``~/.config/memkeeper/config.toml`` on Linux). Which file is actually used
(arguments, ``MEMKEEPER_DB``, ``MEMKEEPER_CONFIG``, ``database.path``) is decided in one place
for every caller: :func:`memkeeper.settings.resolve`.
"""

from __future__ import annotations

import re
from pathlib import Path

import platformdirs

APP_NAME = "memkeeper"
DB_FILENAME = "memory.db"
CONFIG_FILENAME = "config.toml"
ENV_DB = "MEMKEEPER_DB"
ENV_CONFIG = "MEMKEEPER_CONFIG"
ENV_NOW = "MEMKEEPER_NOW"
ENV_RETRIEVAL = "MEMKEEPER_RETRIEVAL"
"""``MEMKEEPER_RETRIEVAL=off`` turns retrieval off whatever the config says (seed 003 §4.3)."""


def user_data_dir() -> Path:
    """The per-user data directory for memkeeper (not created here)."""
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def user_config_dir() -> Path:
    """The per-user configuration directory for memkeeper (not created here)."""
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


_DATABASE_URL = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)


def is_database_url(text: object) -> bool:
    """True when ``text`` names a PostgreSQL database (a URL), not a SQLite file path."""
    return isinstance(text, str) and _DATABASE_URL.match(text) is not None


def cold_path_for(hot_path: Path) -> Path:
    """The cold-storage file that sits beside a hot database: ``memory.db`` → ``memory-cold.db``."""
    return hot_path.with_name(f"{hot_path.stem}-cold{hot_path.suffix or '.db'}")
