"""Search's vector list computed by the database itself: PostgreSQL with pgvector.

On SQLite search reads a user's current vectors (:func:`memkeeper.storage.vectors.
user_vectors`) and ranks them with numpy. On PostgreSQL the vectors stay on the server: one
statement (:func:`memkeeper.storage.postgres.vector_index.user_similarities`) compares the
query with every current vector of the user (the same selection: the user's current entries
in the namespaces and kinds searched, whose text is the one embedded) and returns how many,
the mean and spread of their similarities (the fusion's calibration) and the most similar
ones. The fusion (:mod:`memkeeper.store.fusion`) then admits and scores them with the same
code on both backends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memkeeper.storage.handle import Handle
from memkeeper.storage.vectors import CURRENT_STATES


@dataclass(frozen=True)
class Nearest:
    """A user's vector list as the database computed it: how many current vectors, the
    mean and standard deviation of their similarity to the query, and the most similar
    ``(id, similarity)``, best first (ties by id)."""

    count: int
    mean: float
    spread: float
    top: list[tuple[str, float]]


def ranks_in_database(db: Handle) -> bool:
    """Whether the database computes a user's vector list itself (:func:`nearest_entries`:
    PostgreSQL, pgvector) instead of search ranking :func:`user_vectors` with numpy."""
    return getattr(db, "dialect", "sqlite") == "postgres"


def user_has_vectors(db: Handle, *, user_id: str, model: str, dims: int) -> bool:
    """Whether the user has any vector of this model and dimension in pgvector form (a
    cheap look before the query is embedded). PostgreSQL only."""
    found = db.conn.execute(
        "SELECT 1 FROM vectors WHERE user_id = ? AND model = ? AND dims = ?"
        " AND embedding IS NOT NULL LIMIT 1",
        [user_id, model, dims],
    ).fetchone()
    return found is not None


def nearest_entries(
    db: Handle,
    *,
    user_id: str,
    namespaces: Sequence[str],
    kinds: Sequence[str],
    model: str,
    query: Sequence[float],
    depth: int,
) -> Nearest:
    """The user's vector list, computed by PostgreSQL in one statement
    (:func:`memkeeper.storage.postgres.vector_index.user_similarities`): the current
    vectors of the user's current entries in ``namespaces`` of ``kinds``, as
    :func:`user_vectors` selects them. The caller holds the storage lock."""
    from memkeeper.storage.postgres.vector_index import user_similarities

    if not namespaces or not kinds:
        return Nearest(0, 0.0, 0.0, [])
    schema: str = db.schema  # type: ignore[attr-defined]

    def similarities(raw: Any) -> tuple[int, float, float, list[tuple[str, float]]]:
        return user_similarities(
            raw,
            schema,
            user_id=user_id,
            namespaces=namespaces,
            kinds=kinds,
            states=CURRENT_STATES,
            model=model,
            query=query,
            depth=depth,
        )

    # A read like any other: a connection the server dropped is replaced and it runs again.
    count, mean, spread, top = db.conn.on_raw(similarities)  # type: ignore[attr-defined]
    return Nearest(count, mean, spread, top)
