"""The semantic half of search: the retrieval switch, and the query's own embedding.

Where the embedding comes from is :mod:`memkeeper.store.vector_source`'s (``[search]
embedder``): the local model, run in this process and kept loaded
(:func:`memkeeper.store.vector_source.local_embedder`), or an embeddings endpoint, as below.

The query is embedded with one call of at most ``[search] query_timeout_s`` through one
:class:`memkeeper.llm.embeddings.Embedder` per endpoint, key and settings, kept for the
process and shared with the ``index`` job (:func:`shared_embedder`: a pooled client,
connections stay open between searches and runs; the summarizer's key, base URL and error
handling; timeouts and retries are each call's), and kept in a small per-process LRU cache
keyed by endpoint, model, dimensions and text. Without a key, or when the call fails in any
way (timeout, HTTP error, a vector of the wrong size, NaN), the search is keyword-only: one
warning per process and cause, never an exception to the agent.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memkeeper import logs
from memkeeper.paths import ENV_RETRIEVAL

if TYPE_CHECKING:  # numpy and the embeddings client load only once a query is embedded
    import numpy as np

    from memkeeper.config import Config, LlmSection
    from memkeeper.llm.embeddings import Embedder

log = logs.get_logger("memkeeper.search")

CACHE_SIZE = 256
"""Query embeddings kept per process."""

_OFF_WORDS = frozenset({"off", "0", "false", "no", "disabled"})
_lock = threading.Lock()
_cache: OrderedDict[tuple[str, ...], np.ndarray] = OrderedDict()
_embedders: dict[tuple[object, ...], Embedder] = {}

EMBEDDER_CONNECTIONS = 4
"""Kept-alive connections for queries (searches of several threads at once), beside the
index job's."""

EMBEDDERS_KEPT = 4
"""Embedders kept per process (one per endpoint, key and settings in use)."""
_warned: set[str] = set()


def warn_once(reason: str, message: str, *, level: str = "warning", **fields: Any) -> None:
    """Log ``message`` (a warning, or at ``level``) the first time ``reason`` happens in this
    process."""
    with _lock:
        if reason in _warned:
            return
        _warned.add(reason)
    getattr(log, level)(message, **fields)


def said_elsewhere() -> None:
    """The caller shows why a search is keyword-only itself (the CLI's timing line): no
    warning for want of a model or a key in this process."""
    with _lock:
        _warned.update(("no model", "no key"))


def reset() -> None:
    """Forget the cache, the warnings already given and the embedders (tests)."""
    from memkeeper.store import vector_source

    with _lock:
        _cache.clear()
        _warned.clear()
        _looked.clear()
        _failing.clear()
        embedders = list(_embedders.values())
        _embedders.clear()
    for embedder in embedders:
        embedder.close()
    vector_source.reset()


def retrieval_enabled(config: Config, environ: Mapping[str, str] | None = None) -> bool:
    """The retrieval switch: ``[search] enabled`` and not ``MEMKEEPER_RETRIEVAL=off``."""
    env = os.environ if environ is None else environ
    switched_off = env.get(ENV_RETRIEVAL, "").strip().lower() in _OFF_WORDS
    if config.search.enabled and not switched_off:
        return True
    why = f"{ENV_RETRIEVAL}=off" if switched_off else "[search] enabled = false"
    warn_once(
        "retrieval off", "long-term retrieval is off: search and context return nothing", switch=why
    )
    return False


def embeddings_llm(config: Config) -> LlmSection:
    """The ``[llm]`` section the embeddings use: its base URL and key variable replaced by
    ``[search] embedding_base_url`` / ``embedding_api_key_env`` when those are set (a local
    embeddings server beside a hosted LLM)."""
    update = {}
    if config.search.embedding_base_url:
        update["base_url"] = config.search.embedding_base_url
    if config.search.embedding_api_key_env:
        update["api_key_env"] = config.search.embedding_api_key_env
    return config.llm.model_copy(update=update) if update else config.llm


def can_embed(config: Config) -> bool:
    """Whether a query can be embedded at all: the embedder ``[search] embedder`` names is
    there (the local model in the cache, or the endpoint's API key set;
    :func:`memkeeper.store.vector_source.source`). Without it search is keyword-only and
    reads no vectors (nor loads numpy: start-up, README Performance)."""
    from memkeeper.store import vector_source

    return vector_source.source(config).available


has_key = can_embed
"""The former name of :func:`can_embed` (from when only an endpoint's key could embed)."""


def missing(config: Config) -> str:
    """Why no query can be embedded ("" when one can): no model, or no key."""
    from memkeeper.store import vector_source

    return vector_source.source(config).missing


_failing: dict[str, str] = {}
"""The embedder whose last query embedding failed, by model id: the cause, in words."""


def failing(model: str) -> str:
    """Why the last query embedding of ``model`` failed ("" when it did not)."""
    with _lock:
        return _failing.get(model, "")


VECTOR_LOOK_SECONDS = 60.0
"""How often a keyword-only search looks (per open database) for stored vectors it cannot
use, until it has warned: a round trip of every search otherwise (on PostgreSQL one of the
few of a small user's search)."""

_looked: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


def look_for_unused_vectors(db: Any) -> bool:
    """Whether a keyword-only search should look for stored vectors in ``db`` now: never once
    the warning was given, else at most every :data:`VECTOR_LOOK_SECONDS`."""
    now = time.monotonic()
    with _lock:
        if "no key" in _warned:
            return False
        last = _looked.get(db)
        if last is not None and now - last < VECTOR_LOOK_SECONDS:
            return False
        _looked[db] = now
    return True


def warn_no_key(config: Config) -> None:
    """Say once per process that search is keyword-only, and why: no key for the endpoint,
    or no local model (where to get it)."""
    why = missing(config)
    if why.startswith("no model"):
        # A fresh install's normal state, not a fault: said once, at info (a library is quiet
        # at warning); every search's keyword_only says it too.
        warn_once("no model", f"keyword-only search: {why}", level="info")
        return
    warn_once(
        "no key",
        "search is keyword-only: no API key for embeddings",
        variable=embeddings_llm(config).api_key_env,
    )


def query_vector(config: Config, query: str) -> np.ndarray | None:
    """The query's unit embedding, or None (keyword-only search) when it cannot be had."""
    from memkeeper.store import vector_source

    found = vector_source.source(config)
    if not found.available:
        warn_no_key(config)
        return None
    if found.kind == "local":
        return _local_query_vector(found, query)
    from memkeeper.llm.endpoint import describe_endpoint, read_api_key
    from memkeeper.llm.errors import LlmNotConfigured

    try:
        key = read_api_key(embeddings_llm(config))
    except LlmNotConfigured:
        warn_no_key(config)
        return None
    settings = config.search
    cache_key = (
        describe_endpoint(embeddings_llm(config).base_url or None),
        settings.embedding_model,
        str(settings.embedding_dimensions),
        query,
    )
    with _lock:
        cached = _cache.get(cache_key)
        if cached is not None:
            _cache.move_to_end(cache_key)
            return cached
    from memkeeper.llm.embeddings import DimensionMismatch

    try:
        vector = _embed(config, key, query)
    except DimensionMismatch as exc:
        _fail(
            found.model,
            f"endpoint failing: its vectors have {exc.got} dimensions, not {exc.expected}",
        )
        warn_once(
            "dimension mismatch",
            "search is keyword-only: the embeddings endpoint's vectors have another dimension",
            endpoint_dimensions=exc.got,
            embedding_dimensions=exc.expected,
            fix=f"set [search] embedding_dimensions = {exc.got}",
        )
        return None
    except Exception as exc:  # any failure of the service: keyword-only, never raised
        _fail(found.model, f"endpoint failing: {type(exc).__name__}")
        warn_once(
            f"embed failed: {type(exc).__name__}",
            "search is keyword-only: the query could not be embedded",
            cause=type(exc).__name__,
        )
        return None
    _keep(cache_key, vector, found.model)
    return vector


def _keep(cache_key: tuple[str, ...], vector: np.ndarray, model: str) -> None:
    with _lock:
        _failing.pop(model, None)
        _cache[cache_key] = vector
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)


def _fail(model: str, why: str) -> None:
    with _lock:
        _failing[model] = why


UNREAD_SHARE = 1 / 3
"""A query with at least this share of its tokens unknown to the local model (its vocabulary's
unknown token, or bytes of characters it has no token for) is searched by keywords alone:
the model cannot read it, and its vector would only add noise. all-MiniLM-L6-v2 and
wordllama, English models, each leave at least a third of 82 of the 86 Chinese questions of
the generated recall evaluation unknown (medians 78 % and 64 %) and none of 172 English ones
or LoCoMo's 985; with those vectors counted, the Chinese users' recall@10 fell from 0.863
(keyword-only) to 0.825 and 0.750."""


def unreadable(config: Config, query: str) -> str:
    """Why the local model cannot read ``query`` ("" when it can, and for an endpoint):
    :data:`UNREAD_SHARE` of its tokens or more are unknown to the model. Said once per
    process in the log."""
    from memkeeper.store import vector_source

    found = vector_source.source(config)
    if not found.available or found.kind != "local":
        return ""
    try:
        unknown, tokens = vector_source.local_embedder(found).unknown_tokens(query)
    except Exception:  # a model that fails to load is said by query_vector
        return ""
    if not tokens or unknown < UNREAD_SHARE * tokens:
        return ""
    warn_once(
        "query not read",
        "search is keyword-only for queries the local embedding model cannot read",
        level="info",
        model=found.model,
        fix="a multilingual model: [search] local_model (docs: Search by meaning)",
    )
    return (
        f"the local model {found.model.removeprefix('local:')} cannot read this query "
        f"({unknown} of its {tokens} tokens are unknown to it); a multilingual model can "
        "([search] local_model)"
    )


def _local_query_vector(found: Any, query: str) -> np.ndarray | None:
    """The query's embedding by the local model (loaded on first use); None when it fails
    to load or run (said once)."""
    from memkeeper.store import vector_source

    cache_key = ("local", found.model, found.folder, query)
    with _lock:
        cached = _cache.get(cache_key)
        if cached is not None:
            _cache.move_to_end(cache_key)
            return cached
    try:
        (vector,) = vector_source.local_embedder(found).embed([query])
    except Exception as exc:  # a broken model file or a missing runtime: keyword-only
        _fail(found.model, f"local model failing: {type(exc).__name__}: {exc}")
        warn_once(
            f"local failed: {type(exc).__name__}",
            "search is keyword-only: the local embedding model could not be loaded or run",
            model=found.model,
            folder=found.folder,
            cause=f"{type(exc).__name__}: {exc}",
        )
        return None
    _keep(cache_key, vector, found.model)
    return vector


def shared_embedder(config: Config, key: str) -> Embedder:
    """The process's embedder for this endpoint, key, model and settings, shared by search
    and the ``index`` job: one pooled client (kept-alive connections), made on first use —
    building the HTTP and SDK clients cost 19-54 ms a query when each query made its own.
    Timeouts and retries are each call's (a query: ``[search] query_timeout_s``, no retry;
    the job: ``[llm]``'s); the pool has room for :data:`EMBEDDER_CONNECTIONS` searches
    beside the job's ``[search] index_concurrency`` calls. Never close it: :func:`reset`
    does."""
    import hashlib  # here, not with the module: a keyword-only search never needs it

    from memkeeper.llm.embeddings import Embedder
    from memkeeper.llm.endpoint import describe_endpoint

    settings = config.search
    llm = embeddings_llm(config)
    connections = EMBEDDER_CONNECTIONS + settings.index_concurrency
    ident = (
        describe_endpoint(llm.base_url or None),
        hashlib.sha256(key.encode()).hexdigest(),
        settings.embedding_model,
        settings.embedding_dimensions,
        connections,
        llm.model_dump_json(),
    )
    with _lock:
        found = _embedders.get(ident)
        if found is not None:
            return found
    made = Embedder(
        llm,
        api_key=key,
        model=settings.embedding_model,
        dimensions=settings.embedding_dimensions,
        timeout_s=llm.timeout_seconds,
        max_connections=connections,
    )
    with _lock:
        kept = _embedders.setdefault(ident, made)
        stale = list(_embedders)[:-EMBEDDERS_KEPT] if len(_embedders) > EMBEDDERS_KEPT else []
        closing = [_embedders.pop(i) for i in stale if i != ident]
    if kept is not made:
        made.close()
    for embedder in closing:  # a search or the index job may still be calling through it
        embedder.close_when_unused()
    return kept


def _embed(config: Config, key: str, query: str) -> np.ndarray:
    import numpy as np

    settings = config.search
    vectors = (
        shared_embedder(config, key)
        .embed_counted(
            [query],
            timeout_s=settings.query_timeout_s,
            max_retries=0,  # the agent is waiting
        )
        .vectors
    )
    if len(vectors) != 1:
        raise ValueError(f"{len(vectors)} vectors for one query")
    vector = np.asarray(vectors[0], dtype=np.float32).reshape(-1)
    if vector.shape != (settings.embedding_dimensions,):
        raise ValueError(f"a vector of {vector.size} dimensions")
    norm = float(np.linalg.norm(vector))
    if not np.isfinite(vector).all() or norm == 0:
        raise ValueError("a vector that is not finite or is zero")
    return vector / norm
