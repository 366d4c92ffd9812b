"""Retrieval by meaning: the machinery behind the ``index`` job (and, later, search).

:mod:`~memkeeper.retrieval.indexing` embeds the hot entries whose vector is missing or stale
(:func:`memkeeper.storage.vectors.stale_entries`) through
:class:`memkeeper.llm.embeddings.Embedder`, in batches, within the run's call budget, on a
small pool of threads, each batch stored in its own short transaction.
"""

from memkeeper.retrieval.indexing import index_stale, search_settings

__all__ = ["index_stale", "search_settings"]
