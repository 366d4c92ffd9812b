"""The ``index`` job's run: embed what is stale, batch by batch.

Order of work: select up to ``index_batch * index_max_calls_per_run`` stale entries (one
short read under the storage lock), split them into batches of ``index_batch``, and embed
them on ``index_concurrency`` threads — one call per batch (of the embeddings endpoint, or
of the local model in this process: :mod:`memkeeper.store.vector_source`), no database lock
held while waiting. Each answer is stored as it arrives, in its own short write transaction. A batch
that fails (the endpoint down past its retries, a refused key, an unusable answer) is
counted, logged in one line and skipped: its entries stay stale and are tried again next
run, and nothing of it is stored. An auth error stops new calls (the rest would fail too).
A value changed while its batch was in flight is stored with the old text's hash, so it is
stale again and re-embedded next run; an entry erased meanwhile gets no row.

The run's statistics: ``entries_stale`` (selected: at most ``index_batch`` times the call
budget), ``more_stale`` (more were stale than the budget allowed: left for the next runs),
``entries_indexed``, ``entries_failed``, ``batches_done``, ``batches_failed``,
``batches_deferred`` (not sent: a stop was requested, or an auth error), ``embed_calls``
(HTTP attempts, retries included), ``embed_retries`` and ``embed_tokens``. The call budget
counts batches; a batch's retries (``[llm] max_retries``) come on top.

Two failures are not passed over, or search would stay keyword-only for good, quietly:
vectors of another dimension than ``[search] embedding_dimensions``
(:class:`~memkeeper.llm.embeddings.DimensionMismatch`) stop the run's calls and fail it with
one error naming both numbers; and a run in which every batch failed (nothing embedded: a
refused key, an endpoint down) fails with the last batch's error (:class:`IndexFailed`).
``status`` shows either, and ``run-once`` exits non-zero. Without the local model in the
cache (or, for an endpoint, without its key) the job is skipped, saying how to get it.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Any

from memkeeper.config import Config, LlmSection
from memkeeper.llm.embeddings import DimensionMismatch, Embedded, Embedder
from memkeeper.llm.endpoint import read_api_key
from memkeeper.llm.errors import LlmAuthError, LlmError, LlmNotConfigured
from memkeeper.maintenance.jobkit import JobContext, JobSkipped
from memkeeper.storage.vectors import prepare_index, stale_entries, store_vectors, text_hash
from memkeeper.store import vector_source
from memkeeper.store.semantic import embeddings_llm, shared_embedder

MAX_TEXT_CHARS = 4000
"""Longest text sent for one entry, in characters (embedding models take a few thousand
tokens per input); the hash is still of the whole text."""


@dataclass(frozen=True)
class SearchSettings:
    """The ``[search]`` keys the index job reads."""

    model: str = "embedding-3"
    dimensions: int = 512
    batch: int = 32
    max_calls: int = 200
    concurrency: int = 2


def search_settings(config: Config) -> SearchSettings:
    """The embedding settings of ``config.search`` (defaults for any key it lacks)."""
    section = getattr(config, "search", None)
    base = SearchSettings()
    return SearchSettings(
        model=getattr(section, "embedding_model", base.model),
        dimensions=getattr(section, "embedding_dimensions", base.dimensions),
        batch=getattr(section, "index_batch", base.batch),
        max_calls=getattr(section, "index_max_calls_per_run", base.max_calls),
        concurrency=getattr(section, "index_concurrency", base.concurrency),
    )


def _require_key(llm: LlmSection) -> str:
    try:
        return read_api_key(llm)
    except LlmNotConfigured:
        raise JobSkipped(
            f"embeddings need the LLM key ({llm.api_key_env} is not set, as summarize "
            "says): search is keyword-only until it is"
        ) from None


def _new_stats(settings: SearchSettings) -> dict[str, Any]:
    stats: dict[str, Any] = dict.fromkeys(
        (
            "entries_stale",
            "entries_indexed",
            "entries_failed",
            "batches_done",
            "batches_failed",
            "batches_deferred",
            "embed_calls",
            "embed_retries",
            "embed_tokens",
        ),
        0,
    )
    stats["model"] = settings.model
    stats["dimensions"] = settings.dimensions
    return stats


def index_stale(ctx: JobContext) -> None:
    """Embed the stale entries of ``ctx.store`` (the index job's run), through the
    process's embedder that search uses too (:func:`memkeeper.store.semantic.shared_embedder`),
    with ``[llm]``'s timeout and retries for each call."""
    config = ctx.store.config
    llm = embeddings_llm(config)
    found = vector_source.source(config)
    if found.kind == "local" and not found.available:
        raise JobSkipped(f"search is keyword-only: {found.missing}")
    key = _require_key(llm) if found.kind == "endpoint" else ""
    settings = replace(search_settings(config), model=found.model, dimensions=found.dims)
    storage = ctx.store.storage
    ctx.stats.update(_new_stats(settings))
    most = settings.batch * settings.max_calls  # what this run's call budget can embed
    with storage.lock:
        if not ctx.dry_run:  # PostgreSQL: the HNSW index, and pgvector forms still missing
            filled = prepare_index(storage.hot, model=settings.model, dims=settings.dimensions)
            if filled:
                ctx.stats["embeddings_filled"] = filled
        stale = stale_entries(
            storage.hot, model=settings.model, dims=settings.dimensions, limit=most + 1
        )
    ctx.stats["more_stale"] = len(stale) > most  # left for the next runs
    stale = stale[:most]
    batches = [stale[i : i + settings.batch] for i in range(0, len(stale), settings.batch)]
    ctx.stats["entries_stale"] = len(stale)
    ctx.set_total(len(stale))
    if ctx.dry_run or not batches:
        return
    embedder = shared_embedder(config, key) if key else vector_source.local_embedder(found)
    _run_batches(ctx, embedder, llm, batches, settings)
    mismatch = ctx.stats.pop("_mismatch", None)
    last_error = ctx.stats.pop("_last_error", "")
    if mismatch is not None:
        raise mismatch  # a setting to fix, not a passing failure: the run fails, status shows it
    if ctx.stats["batches_failed"] and not ctx.stats["batches_done"]:
        # Nothing embedded at all: not a passing failure either (search stays keyword-only).
        raise IndexFailed(
            f"every embedding batch failed ({ctx.stats['batches_failed']} of "
            f"{len(batches)}, {ctx.stats['entries_failed']} entries) with "
            f"{getattr(embedder, 'endpoint', 'the embedder')}: {last_error}"
        )


class IndexFailed(LlmError):
    """A run of the index job in which every batch failed: the run fails with the cause."""


Batch = list[tuple[str, str]]


def _run_batches(
    ctx: JobContext,
    embedder: Embedder,
    llm: LlmSection,
    batches: list[Batch],
    settings: SearchSettings,
) -> None:
    pending = list(reversed(batches))
    stop = False
    with ThreadPoolExecutor(settings.concurrency, thread_name_prefix="index") as pool:
        running: dict[Future[Embedded], Batch] = {}
        while pending or running:
            while pending and not stop and len(running) < settings.concurrency:
                if ctx.should_stop():
                    stop = True
                    break
                batch = pending.pop()
                texts = [text[:MAX_TEXT_CHARS] for _, text in batch]
                call = pool.submit(
                    embedder.embed_counted,
                    texts,
                    timeout_s=llm.timeout_seconds,
                    max_retries=llm.max_retries,
                )
                running[call] = batch
            if stop:
                ctx.stats["batches_deferred"] += len(pending)
                pending.clear()
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                batch = running.pop(future)
                if not _finish(ctx, future, batch, settings):
                    stop = True


def _finish(
    ctx: JobContext, future: Future[Embedded], batch: Batch, settings: SearchSettings
) -> bool:
    """Store one batch's answer, or count its failure; False when no more calls should go."""
    stats = ctx.stats
    try:
        result = future.result()
    except LlmError as exc:
        stats["batches_failed"] += 1
        stats["entries_failed"] += len(batch)
        stats["embed_calls"] += max(exc.attempts, 1)
        stats["embed_retries"] += max(exc.attempts - 1, 0)
        ctx.log.warning(
            "embedding batch failed; its entries stay stale until the next run",
            entries=len(batch),
            error=str(exc),
            error_type=type(exc).__name__,
        )
        stats["_last_error"] = str(exc)
        ctx.advance(len(batch))
        if isinstance(exc, DimensionMismatch):
            stats.setdefault("_mismatch", exc)
            return False  # every other batch would fail alike
        return not isinstance(exc, LlmAuthError)
    stats["embed_calls"] += result.attempts
    stats["embed_retries"] += result.retries
    stats["embed_tokens"] += result.tokens
    rows = [
        (memory_id, settings.model, settings.dimensions, text_hash(text), vector)
        for (memory_id, text), vector in zip(batch, result.vectors, strict=True)
    ]
    storage = ctx.store.storage
    with storage.lock:
        written = store_vectors(storage.hot, rows)
    stats["batches_done"] += 1
    stats["entries_indexed"] += written
    ctx.advance(len(batch))
    return True
