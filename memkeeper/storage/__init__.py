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

The statements of the layers above live here too, one function each, named for what it does
(issue 22: nothing outside ``storage/`` runs SQL, so a PostgreSQL backend can offer the same
functions; ``tests/test_sql_boundary.py`` checks it and lists what is left):
:mod:`~memkeeper.storage.due` (what the jobs select), :mod:`~memkeeper.storage.job_runs`,
:mod:`~memkeeper.storage.messages`, :mod:`~memkeeper.storage.change_reads`,
:mod:`~memkeeper.storage.merge_candidates` and :mod:`~memkeeper.storage.restore_hold`; the
layers above open a write transaction with
:func:`~memkeeper.storage.transaction.write_transaction`, never through ``storage.sqlite``;
:data:`~memkeeper.storage.handle.Handle` names the database handle they take.

Nothing here imports a layer above it (see the import-linter contract in pyproject.toml).
"""
