"""The configuration of retrieval by meaning: ``[search]``.

Part of the schema in :mod:`memkeeper.config` (kept apart to keep modules small). The ranking
it weighs is documented in the README ("Finding memories") and in
:mod:`memkeeper.store.search`; the ``embedding_*`` and ``index_*`` keys are read by the
embeddings client and the ``index`` job.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from memkeeper.config.base import Section
from memkeeper.paths import ENV_RETRIEVAL

__all__ = ["ENV_RETRIEVAL", "SearchSection"]


class SearchSection(Section):
    enabled: bool = Field(
        True,
        description="The retrieval switch: false makes search() and context() return nothing "
        "(logged once per process), to tell memory problems from model problems. "
        "MEMKEEPER_RETRIEVAL=off in the environment also turns it off.",
    )
    limit: int = Field(3, gt=0, le=1000, description="Hits search() returns by default.")
    fusion: Literal["anchored", "relative", "rrf"] = Field(
        "anchored",
        description="How the keyword and vector lists are fused: anchored (the keyword "
        "ranking, which the vector list only adds to, as much as it is sure: "
        "weight_vector_reorder, weight_vector_added, sure_z_low/high), relative (each list's "
        "scores "
        "on its own scale: BM25 / the best BM25, and (cosine - mean) / (best - mean) over the "
        "user's entries) or rrf (reciprocal rank: 1 / (rrf_k + rank)).",
    )
    weight_similarity: float = Field(
        1.0,
        ge=0,
        le=100,
        description="Weight of the vector list: an entry adds weight_similarity x (cosine - "
        "mean) / (best - mean) to its relevance (rrf: weight_similarity / (rrf_k + rank)). "
        "Not used by fusion = anchored.",
    )
    weight_vector_reorder: float = Field(
        0.2,
        ge=0,
        le=100,
        description="With fusion = anchored: a keyword match's relevance is raised by this x "
        "sure x its share of the vector list's scale ((cosine - mean) / (best - mean), 0-1): "
        "the vectors reorder keyword matches within that margin.",
    )
    weight_vector_added: float = Field(
        0.9,
        ge=0,
        le=100,
        description="With fusion = anchored: an entry of the vector list adds this x sure x "
        "the best keyword relevance x its share of the vector list's scale, so a clear vector "
        "hit joins or passes weak keyword matches, not strong ones.",
    )
    weak_keyword_relevance: float = Field(
        0.15,
        ge=0,
        le=1,
        description="With fusion = anchored: a keyword list whose best relevance (coverage x "
        "BM25 share) is under this counts as this when vector hits are added, so a sure vector "
        "hit passes matches that share only a common word with the query; at or above it, the "
        "list's best match stays first.",
    )
    sure_z_low: float = Field(
        2.0,
        ge=0,
        le=100,
        description="With fusion = anchored: how sure the vector list is goes from 0 when its "
        "best similarity is this many standard deviations above the mean of the user's "
        "entries...",
    )
    sure_z_high: float = Field(
        8.0,
        ge=0,
        le=100,
        description="...to 1 at this many. Unsure, the vectors change nothing of the keyword "
        "ranking; sure, they reorder keyword matches (weight_vector_reorder) and add candidates "
        "(weight_vector_added).",
    )
    weight_keyword: float = Field(
        1.0,
        ge=0,
        le=100,
        description="Weight of the keyword list (BM25 over the user's own entries): an entry "
        "adds weight_keyword x coverage x BM25 / the best BM25 (rrf: weight_keyword x "
        "coverage / (rrf_k + rank)), coverage the share of the query's idf the list's best "
        "match carries.",
    )
    rrf_k: float = Field(
        60,
        ge=1,
        le=1000,
        description="With fusion = rrf, the reciprocal-rank fusion constant: larger flattens "
        "the gap between neighbouring ranks.",
    )
    vector_candidates: int = Field(
        100,
        ge=1,
        le=10000,
        description="Depth of the vector list: the entries most similar to the query (at or "
        "above min_similarity) that are candidates, whatever the limit.",
    )
    prior_weight: float = Field(
        0.01,
        ge=0,
        le=1,
        description="How much confidence and recent use can raise a relevant entry's score: "
        "score = relevance x (1 + prior_weight x prior), prior 0-1. At 0.01 it breaks ties "
        "and relevance differences under 1 %.",
    )
    weight_confidence: float = Field(
        3.0,
        ge=0,
        le=100,
        description="Share of confidence in the prior: at 3 (with weight_recency 1) confidence "
        "counts three times as much as recent use.",
    )
    weight_recency: float = Field(
        1.0,
        ge=0,
        le=100,
        description="Share of the recent-use bonus in the prior: 0.5 ** (days since last use "
        "/ recency_half_life_days).",
    )
    recency_half_life_days: float = Field(
        30, gt=0, le=36500, description="Days after which the recent-use bonus has halved."
    )
    min_similarity: float = Field(
        0.3,
        ge=-1,
        le=1,
        description="An entry is in the vector list when its similarity to the query is at "
        "least this, or when it is an outlier (outlier_p); keyword matches are always in the "
        "keyword list.",
    )
    local_min_similarity: float = Field(
        0.25,
        ge=-1,
        le=1,
        description="min_similarity for the local model, whose cosines run lower than a "
        'hosted model\'s (all-MiniLM-L6-v2: "where does the user live?" and "city: Paris" '
        "at 0.29; unrelated texts mostly under 0.15).",
    )
    outlier_p: float = Field(
        0.01,
        ge=0,
        le=0.5,
        description="An entry below min_similarity is in the vector list when its similarity "
        "is so far above the user's other entries' that any of them reaches it only with this "
        "chance (its z-score above the normal quantile 1 - outlier_p / entries, from 20 "
        "entries up). 0: min_similarity alone.",
    )
    context_episodes: int = Field(
        5, ge=0, le=1000, description="Most recent episodes of the namespace in context()."
    )
    embedder: Literal["auto", "local", "zhipu", "openai"] = Field(
        "auto",
        description="Where vectors come from: local (a model run in this process, no server, "
        "no key: local_model), zhipu (Zhipu's embeddings API, [llm]'s key and base URL) or "
        "openai (any OpenAI-compatible endpoint: embedding_base_url). auto: the endpoint when "
        "one is configured (its key is set, or embedding_base_url, embedding_api_key_env, "
        "[llm] base_url or ZHIPUAI_BASE_URL names one), else the local model.",
    )
    local_model: str = Field(
        "sentence-transformers/all-MiniLM-L6-v2",
        min_length=1,
        description="The local model, as named in the Hugging Face model cache "
        "(~/.cache/huggingface/hub, or HF_HUB_CACHE / HF_HOME): `memkeeper models pull` puts "
        "it there. Any BERT-family sentence-transformers model or static (model2vec) model.",
    )
    local_model_path: str = Field(
        "",
        description="A directory holding the local model (tokenizer.json and .safetensors "
        "weights), used instead of the cache. Empty: the cache.",
    )
    embedding_base_url: str = Field(
        "",
        description="Base URL of the embeddings endpoint when it is not the LLM's ([llm] "
        "base_url): any OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1 (Ollama). "
        "Empty: [llm] base_url.",
    )
    embedding_api_key_env: str = Field(
        "",
        description="Environment variable holding the embeddings endpoint's key when it is "
        "not [llm] api_key_env (a local server takes any value). Empty: [llm] api_key_env.",
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
