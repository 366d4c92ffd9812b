"""Reading the config file: the defaults when there is none, else the schema's validation.

:func:`load_config` is the one reader (the library, the CLI and the service reach it through
:func:`memkeeper.settings.resolve`). A missing default file gives the defaults as
:func:`memkeeper.config.view.defaults` (no pydantic: the memory commands start faster, README
Performance: start-up); a file that exists is always validated by the schema
(:func:`memkeeper.config.parse_config`), so a bad value fails the same way, with the same
message (exit 78), on every command.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memkeeper.config.view import defaults
from memkeeper.errors import ConfigError

if TYPE_CHECKING:
    from memkeeper.config.schema import Config


def load_config(path: Path | None, *, explicit: bool = False) -> Config:
    """Load and validate a config file; ``None`` or a missing implicit file gives defaults."""
    if path is None:
        return defaults()
    path = Path(path).expanduser()
    try:
        exists = path.exists()
        is_dir = exists and path.is_dir()
    except OSError as exc:  # a directory on the way this user may not enter
        raise ConfigError(
            f"cannot read config file {path}: {exc.strerror or exc} (check the permissions "
            f"of {path.parent})"
        ) from None
    if not exists:
        if explicit:
            raise ConfigError(f"config file {path} does not exist")
        return defaults()
    if is_dir:
        raise ConfigError(f"config file {path} is a directory")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    import tomllib  # only a file that exists needs it

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    from memkeeper.config.schema import parse_config  # the schema: only when there is a file

    return parse_config(data, path)
