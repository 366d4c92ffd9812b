"""The store behind an MCP server, opened when first needed so that only a write creates the
database (README: reads never create one).

``memkeeper mcp`` starts without opening anything. A read-only tool (or a ``forget``) on a
database that does not exist yet gets the answer an empty memory gives (no hits, found=false,
nothing forgotten) and creates nothing; the first write opens the store with ``create=True``
and keeps it for the server's life. A server given an open store (``memkeeper run --mcp``,
the bench, tests) uses that one.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from memkeeper.config import Config
from memkeeper.errors import DatabaseMissing
from memkeeper.store import MemoryStore


class StoreRef:
    """One :class:`MemoryStore`, opened on the first call that needs it."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        config: Config | None = None,
        store: MemoryStore | None = None,
    ) -> None:
        self._path = path
        self._config = config
        self._store = store
        self._owned = store is None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, store: MemoryStore | StoreRef) -> StoreRef:
        """``store`` itself if it is a ref, else a ref around the open store."""
        return store if isinstance(store, StoreRef) else cls(store=store)

    def get(self, *, create: bool) -> MemoryStore | None:
        """The store; None when it does not exist and ``create`` is false (nothing created)."""
        store = self._store
        if store is not None:
            return store
        with self._lock:
            if self._store is None:
                try:
                    self._store = MemoryStore(
                        self._path, config=self._config, actor="mcp", create=create
                    )
                except DatabaseMissing:
                    return None
            return self._store

    @property
    def opened(self) -> MemoryStore | None:
        """The store if it was opened (or given), else None."""
        return self._store

    def close(self) -> None:
        """Close the store if this ref opened it."""
        with self._lock:
            if self._store is not None and self._owned:
                self._store.close()
                self._store = None

    def __enter__(self) -> StoreRef:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
