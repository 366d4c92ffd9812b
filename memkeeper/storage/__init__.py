"""The storage layer: the two SQLite files and the one mechanism that changes them.

- :mod:`~memkeeper.storage.sqlite`: opening files safely, migrations, the write transaction;
- :mod:`~memkeeper.storage.schema`: the tables of the hot file and of cold storage;
- :mod:`~memkeeper.storage.files`: the hot file and cold storage behind one store;
- :mod:`~memkeeper.storage.changelog`: the change-log row written with every change;
- :mod:`~memkeeper.storage.transitions`: every change to a memory, crash-safe across files;
- :mod:`~memkeeper.storage.forgetting` and :mod:`~memkeeper.storage.scrub`: erasure with no
  residue.
- :mod:`~memkeeper.storage.retention` and :mod:`~memkeeper.storage.space`: thinning old
  change-log images, returning free pages, measuring the files.

Nothing here imports a layer above it (see the import-linter contract in pyproject.toml).
"""
