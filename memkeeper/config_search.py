"""The configuration of retrieval by meaning: ``[search]``.

Part of the schema in :mod:`memkeeper.config` (kept apart to keep modules small). The ranking
it weighs is documented in the README ("Finding memories") and in
:mod:`memkeeper.store.search`; the ``embedding_*`` and ``index_*`` keys are read by the
embeddings client and the ``index`` job.
"""

from __future__ import annotations

from pydantic import Field

from memkeeper.config_base import Section

ENV_RETRIEVAL = "MEMKEEPER_RETRIEVAL"
"""``MEMKEEPER_RETRIEVAL=off`` turns retrieval off whatever the config says (seed 003 §4.3)."""


class SearchSection(Section):
    enabled: bool = Field(
        True,
        description="The retrieval switch: false makes search() and context() return nothing "
        "(logged once per process), to tell memory problems from model problems. "
        "MEMKEEPER_RETRIEVAL=off in the environment also turns it off.",
    )
    limit: int = Field(3, gt=0, le=1000, description="Hits search() returns by default.")
    weight_similarity: float = Field(
        1.0, ge=0, le=1000, description="Weight of the semantic similarity (cosine, 0-1)."
    )
    weight_keyword: float = Field(
        0.5, ge=0, le=1000, description="Weight of the keyword match (FTS5 trigram, 0-1)."
    )
    weight_confidence: float = Field(
        3.0,
        ge=0,
        le=1000,
        description="Weight of the entry's confidence (seed 003: confidence x 3).",
    )
    weight_recency: float = Field(
        1.0,
        ge=0,
        le=1000,
        description="Weight of the recent-use bonus: 0.5 ** (days since last use / "
        "recency_half_life_days).",
    )
    recency_half_life_days: float = Field(
        30, gt=0, le=36_500, description="Days after which the recent-use bonus has halved."
    )
    min_similarity: float = Field(
        0.3,
        ge=-1,
        le=1,
        description="An entry found only by its embedding is a candidate when its similarity "
        "is at least this (keyword matches always are).",
    )
    context_episodes: int = Field(
        5, ge=0, le=1000, description="Most recent episodes of the namespace in context()."
    )
    embedding_model: str = Field(
        "embedding-3", min_length=1, description="Embedding model name sent to the API."
    )
    embedding_dimensions: int = Field(
        512,
        gt=0,
        le=8192,
        description="Dimensions asked of the embedding model. Vectors of another model or "
        "dimension are never compared: they are re-embedded by the index job.",
    )
    query_timeout_s: float = Field(
        3.0,
        gt=0,
        le=600,
        description="Timeout of the query's own embedding call, in seconds; on timeout or any "
        "failure search is keyword-only.",
    )
    index_batch: int = Field(
        32, gt=0, le=2048, description="Entries embedded per API call by the index job."
    )
    index_max_calls_per_run: int = Field(
        200, ge=0, le=1_000_000, description="Most embedding calls one run of the index job makes."
    )
    index_concurrency: int = Field(
        2, gt=0, le=64, description="Embedding calls the index job makes at the same time."
    )
