"""Retrieval's building blocks on a real PostgreSQL: pgvector HNSW by user, words, trigrams."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import psycopg
import pytest
from psycopg import sql

from memkeeper.storage.postgres.schema import migrate
from memkeeper.storage.postgres.vector_index import (
    HNSW_MAX_DIMS,
    ensure_index,
    index_name,
    nearest,
    nearest_statement,
    scan_settings,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)
MODEL = "embedding-3"
DIMS = 8


@pytest.fixture
def db(pg_schema: tuple[str, str]):
    url, schema = pg_schema
    with psycopg.connect(url) as conn:
        migrate(conn, schema, now=NOW, where="test")
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        conn.commit()
        yield conn, schema


def _memory(conn: psycopg.Connection, memory_id: str, user: str, value: str, key=None) -> None:
    conn.execute(
        "INSERT INTO memories (id, user_id, kind, key, value, confidence, state, created_at,"
        " updated_at, state_since, last_used_at) VALUES"
        " (%s, %s, %s, %s, %s, 0.9, 'active', 't', 't', 't', 't')",
        (memory_id, user, "note" if key is None else "fact", key, value),
    )


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def test_a_users_nearest_entries_are_never_cut_off_by_other_users(db) -> None:
    conn, schema = db
    rng = np.random.default_rng(7)
    query = _unit(rng.normal(size=DIMS))
    # 3,000 rows of other users all around the query, 6 of ours further away.
    crowd = _unit(query + rng.normal(scale=0.15, size=(3000, DIMS)))
    ours = _unit(rng.normal(size=(6, DIMS)))
    rows = [(f"o{i}", f"other{i % 50}", v) for i, v in enumerate(crowd)]
    rows += [(f"m{i}", "me", v) for i, v in enumerate(ours)]
    with (
        conn.cursor() as cur,
        cur.copy(
            "COPY vectors (memory_id, user_id, model, dims, value_hash, embedding) FROM STDIN"
        ) as copy,
    ):
        for memory_id, user, v in rows:
            copy.write_row((memory_id, user, MODEL, DIMS, "h", "[" + ",".join(map(str, v)) + "]"))
    name = ensure_index(conn, schema, MODEL, DIMS)
    assert name == index_name(MODEL, DIMS)
    assert ensure_index(conn, schema, MODEL, DIMS) == name  # idempotent
    conn.execute("ANALYZE vectors")
    conn.commit()

    # Our user has 6 rows: the planner would rightly sort them exactly (vectors_by_owner).
    # Forbid that plan, as for a user with many rows, so that the HNSW scan is what runs.
    conn.execute("SET enable_seqscan = off")
    conn.execute("SET enable_bitmapscan = off")
    conn.execute("SET enable_sort = off")
    conn.commit()
    statement, params = nearest_statement(
        schema, user_id="me", model=MODEL, query=list(query), limit=5
    )
    with conn.transaction():
        scan_settings(conn)
        plan = str(conn.execute(sql.SQL("EXPLAIN ") + statement, params).fetchall())
    assert f"Index Scan using {name}" in plan

    # Without iterative scans the index's candidates are all other users' rows.
    with conn.transaction():
        conn.execute("SET LOCAL hnsw.iterative_scan = off")
        plain = conn.execute(
            sql.SQL(
                "SELECT memory_id FROM vectors WHERE model = {m} AND dims = {d} AND user_id = 'me'"
                " ORDER BY embedding::vector({d}) <=> %s::vector({d}) LIMIT 5"
            ).format(m=sql.Literal(MODEL), d=sql.Literal(DIMS)),
            ("[" + ",".join(map(str, query)) + "]",),
        ).fetchall()
    assert len(plain) < 5

    hits = nearest(conn, schema, user_id="me", model=MODEL, query=list(query), limit=5)
    exact = sorted((float(1 - ours[i] @ query), f"m{i}") for i in range(6))[:5]
    assert [memory_id for memory_id, _ in hits] == [memory_id for _, memory_id in exact]
    assert [d for _, d in hits] == pytest.approx([d for d, _ in exact], abs=1e-5)
    assert all(memory_id.startswith("m") for memory_id, _ in hits)


def test_dimensions_beyond_hnsw_get_no_index_but_still_search(db) -> None:
    conn, schema = db
    assert ensure_index(conn, schema, "huge", HNSW_MAX_DIMS + 1) is None
    v = [0.0] * (HNSW_MAX_DIMS + 1)
    v[0] = 1.0
    conn.execute(
        "INSERT INTO vectors (memory_id, user_id, model, dims, value_hash, embedding)"
        " VALUES ('m1', 'me', 'huge', %s, 'h', %s::vector)",
        (len(v), "[" + ",".join(map(str, v)) + "]"),
    )
    conn.commit()
    assert nearest(conn, schema, user_id="me", model="huge", query=v, limit=3) == [("m1", 0.0)]
    with pytest.raises(psycopg.errors.CheckViolation):  # dims must match the vector
        conn.execute(
            "INSERT INTO vectors (memory_id, user_id, model, dims, value_hash, embedding)"
            " VALUES ('m2', 'me', 'x', 3, 'h', '[1,2]')"
        )


def test_trigrams_find_latin_and_cjk_text_through_their_index(db) -> None:
    conn, _schema = db
    _memory(conn, "m1", "u1", "prefers dark mode in every editor", key="theme")
    _memory(conn, "m2", "u1", "用户喜欢深色模式和简洁的回答")
    _memory(conn, "m3", "u1", "lives in Lyon")
    for i in range(200):
        _memory(conn, f"f{i}", f"user{i}", f"filler text number {i} about nothing")
    conn.execute("ANALYZE memories")
    conn.commit()
    conn.execute("SET enable_seqscan = off")
    trigrams = "SELECT id FROM memories WHERE search_text ILIKE %s"
    assert conn.execute(trigrams, ("%dark mode%",)).fetchall() == [("m1",)]
    assert conn.execute(trigrams, ("%theme%",)).fetchall() == [("m1",)]  # the key is searched too
    assert conn.execute(trigrams, ("%深色模式%",)).fetchall() == [("m2",)]
    assert conn.execute(trigrams, ("%LYON%",)).fetchall() == [("m3",)]
    plan = str(conn.execute("EXPLAIN " + trigrams, ("%深色模式%",)).fetchall())
    assert "memories_trigrams" in plan
    similar = conn.execute(
        "SELECT id FROM memories WHERE %s <%% search_text"
        " ORDER BY word_similarity(%s, search_text) DESC",
        ("简洁的回答", "简洁的回答"),
    ).fetchall()
    assert similar[:1] == [("m2",)]
