"""Where memkeeper keeps its files when nobody says otherwise.

The database lives in the per-user data directory (``~/.local/share/memkeeper`` on Linux,
``~/Library/Application Support/memkeeper`` on macOS) and the configuration in the per-user
config directory (``~/.config/memkeeper/config.toml`` on Linux). Which file is actually used
(arguments, ``MEMKEEPER_DB``, ``MEMKEEPER_CONFIG``, ``database.path``) is decided in one place
for every caller: :func:`memkeeper.settings.resolve`.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

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
    plain = _plain_xdg("XDG_DATA_HOME", ".local/share")
    if plain is not None:
        return plain
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def user_config_dir() -> Path:
    """The per-user configuration directory for memkeeper (not created here)."""
    plain = _plain_xdg("XDG_CONFIG_HOME", ".config")
    if plain is not None:
        return plain
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def _plain_xdg(variable: str, under_home: str) -> Path | None:
    """platformdirs' answer on a plain Linux desktop or server, without importing it; None
    for every other case, which platformdirs answers.

    Every command resolves the config directory (and, without ``MEMKEEPER_DB``, the data
    directory), and importing platformdirs (it loads ``tempfile``, ``shutil`` and their
    compression modules) cost about 11 ms of the memory commands' 150 ms start-up budget
    (README, Performance: start-up). The plain case is the XDG rule: the variable when it
    holds an absolute path, else ``$HOME/<under_home>``, when ``HOME`` is absolute, then
    ``memkeeper``. Android, a missing or relative ``HOME``, macOS and Windows go to
    platformdirs; ``tests/test_paths.py`` checks that both give the same directory.
    """
    if sys.platform != "linux" or ("ANDROID_DATA" in os.environ and "ANDROID_ROOT" in os.environ):
        return None
    base = os.environ.get(variable, "")
    if not os.path.isabs(base):
        home = os.environ.get("HOME", "")
        if not os.path.isabs(home):
            return None
        base = os.path.join(os.path.expanduser("~"), under_home)
    return Path(os.path.join(base, APP_NAME))


_DATABASE_URL = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)


def is_database_url(text: object) -> bool:
    """True when ``text`` names a PostgreSQL database (a URL), not a SQLite file path."""
    return isinstance(text, str) and _DATABASE_URL.match(text) is not None


def cold_path_for(hot_path: Path) -> Path:
    """The cold-storage file that sits beside a hot database: ``memory.db`` → ``memory-cold.db``."""
    return hot_path.with_name(f"{hot_path.stem}-cold{hot_path.suffix or '.db'}")
