"""The ``memkeeper`` command line: a thin shell over the library.

:func:`main` runs one command line. The three memory commands an agent's scripts call most
(``recall``, ``remember``, ``search``) are first offered to the quick start
(:mod:`memkeeper.cli.quick`), which runs the plain forms of them without loading click (about
a fifth of their start-up: README, Performance); everything else, and every form the quick
start does not take (``--help``, ``--now``, ``-v``, an unknown or malformed option...), runs on
click (:mod:`memkeeper.cli.app`). Both run the same command code, print through the same
functions and end in the same edge (:mod:`memkeeper.cli.failures`), so a command line gives
the same output and exit code either way (``tests/test_cli_quick.py`` runs both).

The names commands share (``App``, ``json_option``, ``pass_app``...) are importable from here
as before; they load :mod:`memkeeper.cli.app` (and click) at first use.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memkeeper.cli.app import (
        EXIT_INTERRUPTED,
        App,
        cli,
        json_option,
        limit_type,
        namespace_option,
        pass_app,
        print_json,
        required_text,
        yes_option,
    )

__all__ = [
    "EXIT_INTERRUPTED",
    "App",
    "cli",
    "entry",
    "json_option",
    "limit_type",
    "main",
    "namespace_option",
    "pass_app",
    "print_json",
    "required_text",
    "yes_option",
]

_FROM_APP = frozenset(__all__) - {"entry", "main"}
"""The names :mod:`memkeeper.cli.app` defines (the rest are this module's own)."""


def __getattr__(name: str) -> Any:
    """The click command line's names, loaded at first use (PEP 562)."""
    if name in _FROM_APP:
        from memkeeper.cli import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``memkeeper`` console script; returns (and exits with) a code."""
    args = sys.argv[1:] if argv is None else list(argv)
    from memkeeper.cli.quick import run_quick

    code = run_quick(args)
    if code is None:
        from memkeeper.cli.app import main as main_on_click

        code = main_on_click(args)
    return code


def entry() -> None:
    """The console script: run :func:`main` and exit with its code."""
    sys.exit(main())
