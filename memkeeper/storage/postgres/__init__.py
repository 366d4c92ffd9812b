"""The PostgreSQL backend (issue 22): the same memory, API, jobs and change log on a server.

:class:`~memkeeper.storage.postgres.storage.PostgresStorage` is the ``Storage`` of a
``postgresql://`` URL (:mod:`memkeeper.storage.opening` picks it); the storage functions of
``storage/`` run on its :class:`~memkeeper.storage.postgres.database.PostgresDatabase`
through :mod:`~memkeeper.storage.postgres.dialect`, and the modules here hold what only
PostgreSQL does: the schema and its migrations (``ddl``, ``schema``), the write locks
(``write_locks``), job and service locks (``job_locks``), keyword candidates and vector
hashes (``keywords``, ``vectors``), forget's VACUUM (``forgetting``), status, backups'
refusal, ``migrate-to``, URLs and connections (``url``, ``connecting``, ``pool``: a pool of
memkeeper's own, without threads, and ``leases``: each thread of a store on a connection of
its pool). The driver (psycopg 3, pgvector) is the optional extra ``memkeeper[postgres]``;
importing this package does not import it (``url`` and ``driver`` need no driver; ``driver``
says which extra to install when it is missing).
"""
