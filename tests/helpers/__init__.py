"""Helpers shared by the foundation tests (store, files, import/export, CLI).

Import them as ``from helpers import ...``: pytest puts ``tests/`` on ``sys.path``.
"""

from helpers.databases import (
    T0,
    change_rows,
    checkpoint_files,
    database_files,
    dump_databases,
    files_containing,
    raw_rows,
)

__all__ = [
    "T0",
    "change_rows",
    "checkpoint_files",
    "database_files",
    "dump_databases",
    "files_containing",
    "raw_rows",
]
