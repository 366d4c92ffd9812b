"""The ``memkeeper`` program's own process: prepared before the command line loads.

``memkeeper`` (the console script) and ``python -m memkeeper`` start here. Two settings make
the memory commands start faster (issue 20 item 13; README, Performance) and apply to this
process only, never to a program that imports memkeeper as a library:

- pydantic's plugin scan is off (``PYDANTIC_DISABLE_PLUGINS``, unless the environment already
  sets it): without it, the first model built reads every installed distribution's entry
  points (measured ~20-30 ms) to look for plugins memkeeper has no use for.
- sqlite_utils is imported without numpy. sqlite_utils imports numpy (~50 ms, more than
  half of sqlite_utils' import) only to add numpy's scalar types to the column types its
  ``insert`` API infers; memkeeper writes through SQL and stores vectors as bytes, so it never
  passes numpy values to that API. numpy itself stays importable and loads where memkeeper
  uses it (vectors, search by meaning).
"""

from __future__ import annotations

import os
import sys

_NOT_FOR_SQLITE_UTILS = ("numpy", "pandas")
"""What sqlite_utils imports only for its own optional type mapping (pandas needs numpy)."""


def _import_sqlite_utils_alone() -> None:
    """Import sqlite_utils with numpy and pandas unimportable for the length of that import."""
    if "sqlite_utils" in sys.modules:
        return
    hidden = [name for name in _NOT_FOR_SQLITE_UTILS if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # `import name` raises ImportError
    try:
        import sqlite_utils  # noqa: F401
    finally:
        for name in hidden:
            del sys.modules[name]


def prepare_process() -> None:
    """Set up this process as the ``memkeeper`` program (see the module's docstring)."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _import_sqlite_utils_alone()


def entry() -> None:
    """The console script and ``python -m memkeeper``: prepare the process, run the CLI."""
    prepare_process()
    from memkeeper.cli import entry as run_cli

    run_cli()
