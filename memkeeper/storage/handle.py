"""The database handle the storage functions take, named for the layers above storage.

Layers above ``storage/`` never import the driver (an import-linter contract will say so once
``store/`` is clean too, issue 22); where they pass a handle along, they name its type
:data:`Handle`. Today it is :class:`memkeeper.storage.connection.Database`; a PostgreSQL
backend offers its own.
"""

from __future__ import annotations

from memkeeper.storage.connection import Database

Handle = Database
"""One open memkeeper database (the hot file, or cold storage)."""
