"""The stores behind an MCP server: a few :class:`MemoryStore` objects on the same files,
opened when first needed, so that calls run side by side and only a write creates the
database.

**Why several stores.** A :class:`MemoryStore` is one SQLite connection guarded by one
lock: every call of every client waited for the one before it (the profile of
``memkeeper bench --mcp-clients 8`` showed the worker threads spending most of their time
acquiring that lock, while SQLite in WAL mode lets readers run beside each other and beside
one writer). A call borrows a store from a small pool (:meth:`StoreRef.borrow`) and gives it
back; writers still take SQLite's write lock one at a time, with the busy timeout. At most
:data:`WORKERS` calls run at once (:attr:`StoreRef.limiter`), so the pool never holds more
stores than that: SQLite releases the GIL while it works, so a few threads overlap its I/O
and CPU with the server's Python.

**Only a write creates the database.** ``memkeeper mcp`` starts without opening anything. A
read-only tool (or a ``forget``) on a database that does not exist yet gets the answer an
empty memory gives and creates nothing; the first write opens a store with ``create=True``.
A server given an open store (``memkeeper run --mcp``, the bench, tests) uses that one in
the first thread and opens the others on its files, with its config and clock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memkeeper.clock import Clock
from memkeeper.config import Config
from memkeeper.errors import DatabaseMissing
from memkeeper.store import MemoryStore

WORKERS = 4
"""Threads running tool calls at once, each with its own store."""


class StoreRef:
    """The stores of one server: a pool, each store opened on first need."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        config: Config | None = None,
        store: MemoryStore | None = None,
        workers: int = WORKERS,
    ) -> None:
        self._clock: Clock | None = None
        if store is not None:
            path, config, self._clock = store.path, store.config, store.clock
        self._path = path
        self._config = config
        self._given = store
        self._mine: list[MemoryStore] = []
        self._free: list[MemoryStore] = [store] if store is not None else []
        self._lock = threading.Lock()
        self.workers = workers
        self._limiter: Any = None

    @classmethod
    def of(cls, store: MemoryStore | StoreRef) -> StoreRef:
        """``store`` itself if it is a ref, else a ref around the open store."""
        return store if isinstance(store, StoreRef) else cls(store=store)

    @property
    def limiter(self) -> Any:
        """The anyio CapacityLimiter of the worker threads (made in the event loop's thread)."""
        if self._limiter is None:
            import anyio

            self._limiter = anyio.CapacityLimiter(self.workers)
        return self._limiter

    @contextmanager
    def borrow(self, *, create: bool) -> Iterator[MemoryStore | None]:
        """A store for one call, given back after it; None when the database does not exist
        and ``create`` is false (nothing is created)."""
        store = self._take(create)
        try:
            yield store
        finally:
            if store is not None:
                with self._lock:
                    self._free.append(store)

    def _take(self, create: bool) -> MemoryStore | None:
        with self._lock:
            if self._free:
                return self._free.pop()
        try:
            store = MemoryStore(
                self._path, config=self._config, clock=self._clock, actor="mcp", create=create
            )
        except DatabaseMissing:
            return None
        with self._lock:
            self._mine.append(store)
        return store

    def close(self) -> None:
        """Close the stores this ref opened (a given store stays its owner's to close)."""
        with self._lock:
            mine, self._mine = self._mine, []
            self._free = [store for store in self._free if store not in mine]
        for store in mine:
            store.close()

    def __enter__(self) -> StoreRef:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
