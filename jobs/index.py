"""index: embed new and changed entries, so search finds them by meaning (seed 003 §2.2).

Every current hot entry (active or pending review) gets one vector of the configured
embedder's model and dimensions (``[search] embedder``: the local model, or the endpoint's
``embedding_model`` and ``embedding_dimensions``), embedded from
``key: value`` (a note: its value). An entry without one, with one of another model or
dimension, or whose key or value changed since, is stale; this job embeds the stale entries
in batches of ``[search] index_batch`` (one call each), at most
``index_max_calls_per_run`` calls per run, ``index_concurrency`` at a time, each batch
stored in its own short transaction. Writes (``remember``, ``add_note``, imports) never call
the network: a new entry is found by keyword until this job has run (every 5 minutes in the
service by default, and in ``run-once``).

A failed batch is logged in one line, counted and left stale for the next run; a run in which
every batch failed fails, with the cause. Without the local model (or the endpoint's API
key) the job is skipped. A dry run counts what is stale and calls
nothing. The machinery lives in :mod:`memkeeper.retrieval.indexing`.
"""

from __future__ import annotations

from memkeeper.maintenance.jobkit import Job, JobContext
from memkeeper.retrieval.indexing import index_stale


def run(ctx: JobContext) -> None:
    index_stale(ctx)


JOB = Job("index", "Embeddings of new and changed entries, for search by meaning", run)
