"""The PostgreSQL driver is an optional extra: a missing one is said in words, not as an
``ImportError``.

SQLite's paths never import psycopg; a PostgreSQL URL does, at the store's opening (and
``migrate-to``, the fleet's service). Without the extra ``memkeeper[postgres]`` that import
fails: :func:`driver_needed` turns the failure into
:class:`~memkeeper.errors.DriverMissing` (exit 78, the install's configuration), whose
message names the extra to install. This module imports no driver itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from memkeeper.errors import DriverMissing

DRIVER_MODULES = frozenset({"psycopg", "psycopg_pool", "pgvector", "psycopg_binary", "psycopg_c"})
"""The top-level modules of the ``postgres`` extra (and psycopg's implementations)."""

INSTALL = "pip install 'memkeeper[postgres]'"
"""What installs the driver (the extra of pyproject.toml)."""


def missing_driver(exc: BaseException, where: str | None = None) -> DriverMissing | None:
    """Our error for ``exc`` when it is the driver's import failing; None otherwise.

    ``where`` names the database (its URL, password masked) when the caller knows it.
    """
    if not isinstance(exc, ImportError):
        return None
    name = getattr(exc, "name", None) or ""
    if not name:  # raised by hand (an import hook) without its name: read it from the words
        said = re.search(r"No module named '([^']+)'", str(exc))
        name = said.group(1) if said else ""
    if name.split(".")[0] not in DRIVER_MODULES:
        return None
    what = (
        f"{where} is a PostgreSQL database and its driver is not installed"
        if where
        else "the PostgreSQL driver is not installed"
    )
    return DriverMissing(f"{what} (no module named {name!r}); install the extra: {INSTALL}")


@contextmanager
def driver_needed(where: str | None = None) -> Iterator[None]:
    """Run the block; a failed import of the driver in it raises
    :class:`~memkeeper.errors.DriverMissing` instead (naming ``where``)."""
    try:
        yield
    except ImportError as exc:
        translated = missing_driver(exc, where)
        if translated is None:
            raise
        raise translated from None
