"""The storage layer: one interface, two backends, and the one mechanism that changes memory.

- :mod:`~memkeeper.storage.base`: :class:`~memkeeper.storage.base.Storage`, the interface
  both backends implement; :mod:`~memkeeper.storage.opening` picks one from the settings;
- :mod:`~memkeeper.storage.sqlite`: the embedded default, two SQLite files (opening them
  safely, migrations, ``BEGIN IMMEDIATE``, the FTS5 index, erasure's scrub, backups);
- :mod:`~memkeeper.storage.postgres`: one PostgreSQL schema (hot and cold tables, advisory
  write locks, pgvector and pg_trgm);
- shared by both (each statement runs on SQLite as written and on PostgreSQL through
  :mod:`~memkeeper.storage.postgres.dialect`): :mod:`~memkeeper.storage.changelog` (the
  change-log row written with every change), :mod:`~memkeeper.storage.transitions` (every
  change to a memory), :mod:`~memkeeper.storage.forgetting` (erasure with no residue),
  :mod:`~memkeeper.storage.retention` (thinning old change-log images),
  :mod:`~memkeeper.storage.keywords` (keyword candidates), :mod:`~memkeeper.storage.columns`
  (the columns of a memory image). Shared modules import neither driver: where they need
  what one backend alone has (FTS5, the byte scrub, a server-side statement), they dispatch
  on the handle's ``dialect`` to that backend's module (import-linter contracts "Within
  storage, only storage.sqlite imports the SQLite driver" and its PostgreSQL twin).

The statements of the layers above live here too, one function each, named for what it does
(issue 22: nothing outside ``storage/`` runs SQL, so a PostgreSQL backend can offer the same
functions; ``tests/test_sql_boundary.py`` checks it and lists what is left):
:mod:`~memkeeper.storage.due` (what the jobs select), :mod:`~memkeeper.storage.job_runs`,
:mod:`~memkeeper.storage.messages`, :mod:`~memkeeper.storage.change_reads`,
:mod:`~memkeeper.storage.merge_candidates` and :mod:`~memkeeper.storage.sqlite.restore_hold`; the
layers above open a write transaction with
:func:`~memkeeper.storage.transaction.write_transaction`, never through a backend's module;
:data:`~memkeeper.storage.handle.Handle` names the database handle they take.

Nothing here imports a layer above it (see the import-linter contract in pyproject.toml).
"""
