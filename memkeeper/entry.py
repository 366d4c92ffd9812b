"""The ``memkeeper`` program's own process: prepared before the command line loads.

``memkeeper`` (the console script) and ``python -m memkeeper`` start here. One setting makes
the commands start faster (issue 20 item 13; README, Performance) and applies to this process
only, never to a program that imports memkeeper as a library: pydantic's plugin scan is off
(``PYDANTIC_DISABLE_PLUGINS``, unless the environment already sets it). Without it, the first
model built reads every installed distribution's entry points (measured ~20-30 ms) to look
for plugins memkeeper has no use for. (The memory commands build no model at all when there
is no config file, and import neither pydantic nor sqlite-utils: :mod:`memkeeper.config.view`,
:mod:`memkeeper.storage.sqlite.connection`.)
"""

from __future__ import annotations

import os


def prepare_process() -> None:
    """Set up this process as the ``memkeeper`` program (see the module's docstring)."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def entry() -> None:
    """The console script and ``python -m memkeeper``: prepare the process, run the CLI."""
    prepare_process()
    from memkeeper.cli import entry as run_cli

    run_cli()
