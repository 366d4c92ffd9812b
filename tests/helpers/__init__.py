"""Helpers shared by the tests: raw reads of both files, dumps, where entries live, log replay.

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
from helpers.state import current_images, locations, replay

__all__ = [
    "T0",
    "change_rows",
    "checkpoint_files",
    "current_images",
    "database_files",
    "dump_databases",
    "files_containing",
    "locations",
    "raw_rows",
    "replay",
]
