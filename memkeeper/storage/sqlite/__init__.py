"""SQLite's storage, the embedded default: two files, a hot database and cold storage.

- :mod:`~memkeeper.storage.sqlite.opening`: opening files safely (WAL, busy timeout,
  ``secure_delete``, 0600 files), migrations, checkpoints;
- :mod:`~memkeeper.storage.sqlite.writing`: the write transaction (``BEGIN IMMEDIATE``);
- :mod:`~memkeeper.storage.sqlite.schema` and :mod:`~memkeeper.storage.sqlite.steps`: the
  tables of both files, as ordered migrations;
- :mod:`~memkeeper.storage.sqlite.files`: :class:`SqliteStorage`, the two files behind a store;
- :mod:`~memkeeper.storage.sqlite.fts`: the FTS5 keyword index (its triggers, its purge of
  deleted rows, its trigram candidates);
- :mod:`~memkeeper.storage.sqlite.erasure`: a forget's ``pending_scrubs`` row and scrub;
  :mod:`~memkeeper.storage.sqlite.scrub`, :mod:`~memkeeper.storage.sqlite.rawfile`,
  :mod:`~memkeeper.storage.sqlite.space`: erased bytes leaving the files, free pages;
- :mod:`~memkeeper.storage.sqlite.errors`: SQLite's failures as memkeeper's errors, and in words;
- :mod:`~memkeeper.storage.sqlite.backup` and its checks: online backups of both files.

The storage functions the layers above call (the transition mechanism, the change log, the
jobs' selections) are shared by both backends and live one level up, in
:mod:`memkeeper.storage`; only this package imports ``sqlite3`` and ``sqlite_utils``.
"""
