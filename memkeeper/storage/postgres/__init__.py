"""The PostgreSQL backend (issue 22, in progress): URLs, the connection pool, the schema, status.

Nothing above ``storage/`` uses it yet: ``MemoryStore`` cannot open a ``postgresql://`` URL.
The driver (psycopg 3, psycopg_pool, pgvector) is the optional extra ``memkeeper[postgres]``;
importing this package does not import it (``url`` needs no driver).
"""
