"""pgvector: one partial HNSW index per embedding model and dimension, and the filtered query.

The ``vectors.embedding`` column has no fixed dimension (models differ, and vectors of
different models or dimensions never mix), so an index is built over the cast
``embedding::vector(N)`` and restricted to its model and dimension: the pattern pgvector
documents for mixed dimensions. pgvector's HNSW takes at most 2,000 dimensions; above that
the query still works, scanning the user's rows in order (no index).

A search is always for one user. With a plain HNSW scan, PostgreSQL would take the index's
``ef_search`` nearest rows of ALL users and then drop other users' rows, so a user among
many could get fewer hits than asked, or none; ``hnsw.iterative_scan = relaxed_order``
(pgvector 0.8) keeps scanning until enough of the user's own rows pass the filter, and the
outer ``ORDER BY`` restores the exact order that relaxed scanning may loosen.

For a user with few rows the planner rightly prefers ``vectors_by_owner`` and an exact sort
of those rows; the HNSW index serves the users with many.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import psycopg
from psycopg import sql

HNSW_MAX_DIMS = 2000
# How many of the user's rows the iterative scan may visit before it gives up (pgvector's
# default is 20,000); ef_search is the candidate list of each step.
MAX_SCAN_TUPLES = 20_000
EF_SEARCH = 100


def index_name(model: str, dims: int) -> str:
    """A stable, valid name for the model's index (model names hold any characters)."""
    digest = hashlib.sha256(f"{model}\0{dims}".encode()).hexdigest()[:12]
    return f"vectors_hnsw_{dims}_{digest}"


def ensure_index(
    conn: psycopg.Connection, schema: str, model: str, dims: int, *, concurrently: bool = False
) -> str | None:
    """Create the HNSW index for ``model`` at ``dims`` if missing; its name, or None when the
    dimension is beyond what HNSW indexes. Runs in the caller's transaction; with
    ``concurrently`` (a connection in autocommit, outside any transaction: the index job) it
    is built without blocking writes to ``vectors`` (a forget, another batch) for the minutes
    a million vectors take, and a build left invalid by an interruption is built again."""
    if not 0 < dims <= HNSW_MAX_DIMS:
        return None
    name = index_name(model, dims)
    if concurrently:
        valid = conn.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = %s",
            (schema, name),
        ).fetchone()
        if valid is not None and valid[0]:
            return name
        if valid is not None:  # an interrupted concurrent build: drop it, build it again
            conn.execute(
                sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(schema, name))
            )
    conn.execute(
        sql.SQL(
            "CREATE INDEX {how} IF NOT EXISTS {name} ON {schema}.vectors USING hnsw "
            "((embedding::vector({dims})) vector_cosine_ops) "
            "WHERE model = {model} AND dims = {dims}"
        ).format(
            how=sql.SQL("CONCURRENTLY" if concurrently else ""),
            name=sql.Identifier(name),
            schema=sql.Identifier(schema),
            dims=sql.Literal(dims),
            model=sql.Literal(model),
        )
    )
    return name


def nearest_statement(
    schema: str,
    *,
    user_id: str,
    model: str,
    query: Sequence[float],
    limit: int,
    namespaces: Sequence[str] | None = None,
) -> tuple[sql.Composed, dict[str, object]]:
    """The statement of :func:`nearest` and its parameters (for EXPLAIN in tests and bench).

    Model and dimension are literals in the statement so that the planner can match the
    partial index (a parameter could not prove its predicate)."""
    dims = len(query)
    owner = sql.SQL("user_id = %(user)s")
    if namespaces is not None:
        owner = sql.SQL("{} AND namespace = ANY(%(namespaces)s)").format(owner)
    statement = sql.SQL(
        "WITH hits AS MATERIALIZED ("
        " SELECT memory_id, embedding::vector({dims}) <=> %(query)s::vector({dims}) AS distance"
        " FROM {schema}.vectors WHERE model = {model} AND dims = {dims} AND {owner}"
        " ORDER BY distance LIMIT %(limit)s)"
        " SELECT memory_id, distance FROM hits ORDER BY distance, memory_id"
    ).format(
        dims=sql.Literal(dims), schema=sql.Identifier(schema), model=sql.Literal(model), owner=owner
    )
    text = "[" + ",".join(repr(float(x)) for x in query) + "]"
    params = {"user": user_id, "query": text, "limit": limit, "namespaces": namespaces}
    return statement, params


def scan_settings(conn: psycopg.Connection) -> None:
    """Iterative, bounded HNSW scans for the rest of the caller's transaction."""
    conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
    conn.execute(f"SET LOCAL hnsw.max_scan_tuples = {int(MAX_SCAN_TUPLES)}")
    conn.execute(f"SET LOCAL hnsw.ef_search = {int(EF_SEARCH)}")


def nearest(
    conn: psycopg.Connection,
    schema: str,
    *,
    user_id: str,
    model: str,
    query: Sequence[float],
    limit: int,
    namespaces: Sequence[str] | None = None,
) -> list[tuple[str, float]]:
    """The user's ``limit`` nearest entries to ``query`` as (memory id, cosine distance),
    nearest first (ties by id)."""
    statement, params = nearest_statement(
        schema, user_id=user_id, model=model, query=query, limit=limit, namespaces=namespaces
    )
    with conn.transaction():
        scan_settings(conn)
        rows = conn.execute(statement, params).fetchall()
    return [(memory_id, float(distance)) for memory_id, distance in rows]


def user_similarities(
    conn: psycopg.Connection,
    schema: str,
    *,
    user_id: str,
    namespaces: Sequence[str],
    kinds: Sequence[str],
    states: Sequence[str],
    model: str,
    query: Sequence[float],
    depth: int,
) -> tuple[int, float, float, list[tuple[str, float]]]:
    """Search's vector list of one user, in one statement: over the user's current vectors
    (of this model and dimension, of entries in ``namespaces``, ``kinds`` and ``states``
    whose text is the one embedded), how many, the mean and the (population) standard
    deviation of their similarity to ``query`` (a unit vector: the inner product, as the
    SQLite side's dot product), and the ``depth`` most similar, best first, ties by id.

    Exact (every vector of the user compared): the same list as SQLite's numpy, up to the
    last bits of float32 sums. The user's rows come through ``vectors_by_owner``; the
    statistics need every one of them anyway, which an HNSW scan would not give.
    """
    from memkeeper.storage.postgres.vectors import vector_literal

    dims = len(query)
    names = _names(schema)
    statement = sql.SQL(
        "WITH mine AS MATERIALIZED ("
        " SELECT v.memory_id, -(v.embedding <#> %(query)s::vector) AS similarity"
        " FROM {vectors} AS v JOIN {memories} AS m ON m.id = v.memory_id"
        " WHERE v.user_id = %(user)s AND v.model = %(model)s AND v.dims = %(dims)s"
        " AND v.embedding IS NOT NULL AND {current} LIMIT %(exact)s),"
        " stats AS (SELECT count(*) AS n, avg(similarity) AS mean,"
        " stddev_pop(similarity) AS spread FROM mine)"
        " SELECT stats.n, stats.mean, stats.spread, top.memory_id, top.similarity FROM stats"
        " LEFT JOIN LATERAL (SELECT memory_id, similarity FROM mine"
        ' ORDER BY similarity DESC, memory_id COLLATE "C" LIMIT %(depth)s) AS top ON true'
    ).format(**names)
    params = {
        "query": vector_literal(query),
        "user": user_id,
        "model": model,
        "dims": dims,
        "namespaces": list(namespaces),
        "kinds": list(kinds),
        "states": list(states),
        "depth": depth,
        "exact": EXACT_UP_TO + 1,
    }
    rows = conn.execute(statement, params).fetchall()
    count, mean, spread = int(rows[0][0]), float(rows[0][1] or 0.0), float(rows[0][2] or 0.0)
    top = [(memory_id, float(s)) for _, _, _, memory_id, s in rows if memory_id is not None]
    if count > EXACT_UP_TO:  # a large user: the statistics of a sample, the top from HNSW
        top = _nearest_by_index(conn, names, params, model, dims)
        count = _vector_count(conn, names, params)
    return count, mean, spread, top


EXACT_UP_TO = 20_000
"""Up to this many current vectors a user's vector list is exact (every vector compared,
as SQLite's numpy does). Beyond, the most similar come from the HNSW index (an iterative,
filtered scan) and the mean and spread from the first ``EXACT_UP_TO`` of the user's vectors
the owner index gives: a bounded cost at any size."""

_CURRENT = (
    "m.user_id = %(user)s AND m.namespace = ANY(%(namespaces)s) AND m.kind = ANY(%(kinds)s)"
    " AND m.state = ANY(%(states)s) AND v.value_hash = "
)


def _names(schema: str) -> dict[str, sql.Composable]:
    from memkeeper.storage.postgres.vectors import TEXT_HASH_SQL

    return {
        "vectors": sql.Identifier(schema, "vectors"),
        "memories": sql.Identifier(schema, "memories"),
        "current": sql.SQL(_CURRENT + TEXT_HASH_SQL),
    }


def _nearest_by_index(
    conn: psycopg.Connection,
    names: dict[str, sql.Composable],
    params: dict[str, object],
    model: str,
    dims: int,
) -> list[tuple[str, float]]:
    """The ``depth`` most similar current vectors of a large user through the HNSW index
    of ``model`` at ``dims`` (:func:`ensure_index`): the index's nearest of the user's own
    rows (iterative scan, so other users' rows never crowd them out), then the same filters
    and order as the exact statement. Twice ``depth`` are taken from the index, for the
    entries the filters drop (another namespace or kind, a stale vector). The outer read
    names the user too (the rows are the user's already): every statement on ``vectors``
    carries its user filter (docs/guides/scaling.md)."""
    statement = sql.SQL(
        "WITH near AS MATERIALIZED ("
        " SELECT memory_id FROM {vectors} WHERE model = {model} AND dims = {dims}"
        " AND user_id = %(user)s"
        " ORDER BY embedding::vector({dims}) <=> %(query)s::vector({dims}) LIMIT %(scan)s)"
        " SELECT v.memory_id, -(v.embedding <#> %(query)s::vector) AS similarity"
        " FROM near JOIN {vectors} AS v ON v.memory_id = near.memory_id"
        " JOIN {memories} AS m ON m.id = v.memory_id WHERE v.user_id = %(user)s AND {current}"
        ' ORDER BY similarity DESC, v.memory_id COLLATE "C" LIMIT %(depth)s'
    ).format(**names, model=sql.Literal(model), dims=sql.Literal(dims))
    with conn.transaction():
        scan_settings(conn)
        rows = conn.execute(statement, {**params, "scan": 2 * int(params["depth"])}).fetchall()
    return [(memory_id, float(similarity)) for memory_id, similarity in rows]


def _vector_count(
    conn: psycopg.Connection, names: dict[str, sql.Composable], params: dict[str, object]
) -> int:
    """How many current vectors the user has (the outlier rule's number of entries)."""
    statement = sql.SQL(
        "SELECT count(*) FROM {vectors} AS v JOIN {memories} AS m ON m.id = v.memory_id"
        " WHERE v.user_id = %(user)s AND v.model = %(model)s AND v.dims = %(dims)s"
        " AND v.embedding IS NOT NULL AND {current}"
    ).format(**names)
    return int(conn.execute(statement, params).fetchone()[0])
