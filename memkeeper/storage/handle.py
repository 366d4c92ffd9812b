"""The database handle the storage functions take, named for the layers above storage.

Layers above ``storage/`` never import a database driver (the import-linter contract "Only
storage talks to a database driver"); where they pass a handle along, they name its type
:data:`Handle`: :class:`memkeeper.storage.sqlite.connection.Database` on SQLite, and
:class:`memkeeper.storage.postgres.database.PostgresDatabase`, which offers the same calls.
"""

from __future__ import annotations

from memkeeper.storage.sqlite.connection import Database

Handle = Database
"""One open memkeeper database (the hot file, or cold storage)."""
