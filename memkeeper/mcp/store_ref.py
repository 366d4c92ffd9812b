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

**Uses are buffered.** Every store of the pool records the uses of ``recall``, ``search``
and ``context`` in the process's use buffer for the file
(:mod:`memkeeper.storage.use_buffer`) instead of one write transaction per call: the
profile showed each such call taking SQLite's write lock, so the four stores queued on it
and behind every batch of a maintenance pass. A thread of the ref writes the buffer every
:data:`FLUSH_SECONDS` in one transaction; a tool that reports or changes memories flushes it
first (:func:`memkeeper.mcp.calls.call`), so does every job or write of this process (inside
its transaction), and :meth:`StoreRef.close`.

**Only a write creates the database.** ``memkeeper mcp`` starts without opening anything. A
read-only tool (or a ``forget``) on a database that does not exist yet gets the answer an
empty memory gives and creates nothing; the first write opens a store with ``create=True``.
A server given an open store (``memkeeper run --mcp``, the bench, tests) uses that one in
the first thread and opens the others on its files, with its config and clock.

**On PostgreSQL, one store.** A PostgreSQL store is already made for threads: each thread
leases its own connection from the store's one pool
(:mod:`memkeeper.storage.postgres.leases`), and the server's locks, not a mutex, keep them
apart. Several stores there would be several pools (``WORKERS`` of them, each keeping its
idle connections open on the server), against "one connection pool per store". So on a
database URL the ref opens (or is given) one store and lends it to every call at once; the
store's ``[database] pool_size`` bounds the server's connections. Which kind the ref serves
is known once its first store is open: until then openings go one at a time.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memkeeper import logs
from memkeeper.clock import Clock
from memkeeper.config import Config
from memkeeper.errors import DatabaseMissing, MemkeeperError
from memkeeper.storage import use_buffer
from memkeeper.storage.use_buffer import UseBuffer
from memkeeper.store import MemoryStore

log = logs.get_logger("memkeeper.mcp")

WORKERS = 4
"""Threads running tool calls at once, each with its own store."""
FLUSH_SECONDS = 0.05
"""How often the buffered uses are written: a crash loses at most this much of them."""


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
            path, config, self._clock = _location(store), store.config, store.clock
        self._path = path
        self._config = config
        self._given = store
        self._mine: list[MemoryStore] = []
        self._free: list[MemoryStore] = []
        self._lock = threading.Lock()
        self._shared: MemoryStore | None = None
        """PostgreSQL: the one store every call borrows at once (None on SQLite)."""
        self._sharing = 0
        """How many calls have the shared store now (:meth:`borrow_free` keeps a free
        connection of its pool for the event loop's calls)."""
        self._opening = threading.Lock()
        self._kind_known = False
        self.workers = workers
        self._limiter: Any = None
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        self._buffer: UseBuffer | None = None
        if store is not None:
            self._enlist(store)
            self._settle_kind(store)

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
        with self._lent(self._take(create)) as store:
            yield store

    @contextmanager
    def borrow_free(self) -> Iterator[MemoryStore | None]:
        """A store that is open and free now, or None (nothing is opened: opening may write
        its file, and this is for the event loop, which must not wait for that)."""
        with self._lock:
            if self._shared is not None:
                # Only while the pool has a connection to spare: the loop must not wait.
                spare = self._sharing < _pool_size(self._shared)
                store = self._shared if spare else None
                if store is not None:
                    self._sharing += 1
            else:
                store = self._free.pop() if self._free else None
        with self._lent(store) as lent:
            yield lent

    @contextmanager
    def _lent(self, store: MemoryStore | None) -> Iterator[MemoryStore | None]:
        """``store`` for the length of the block, then back among the free ones."""
        try:
            yield store
        finally:
            if store is not None:
                with self._lock:
                    if store is self._shared:
                        self._sharing -= 1
                    else:
                        self._free.append(store)

    def _take(self, create: bool) -> MemoryStore | None:
        taken = self._lend()
        if taken is not None:
            return taken
        if self._kind_known:
            return self._open(create)
        with self._opening:  # the first store tells whether the others share it
            taken = self._lend()
            if taken is not None:
                return taken
            store = self._open(create)
            if store is not None:
                self._settle_kind(store)
                return self._lend() if self._shared is store else store
            return None

    def _lend(self) -> MemoryStore | None:
        """A free store (the shared one, always), or None."""
        with self._lock:
            if self._shared is not None:
                self._sharing += 1
                return self._shared
            return self._free.pop() if self._free else None

    def _open(self, create: bool) -> MemoryStore | None:
        try:
            store = MemoryStore(
                self._path, config=self._config, clock=self._clock, actor="mcp", create=create
            )
        except DatabaseMissing:
            return None
        self._enlist(store)
        with self._lock:
            self._mine.append(store)
        return store

    def _settle_kind(self, store: MemoryStore) -> None:
        """Learn from the first open store whether calls share it (PostgreSQL) or each take
        one of their own (SQLite: the store is given back among the free ones, unless a
        call holds it now, which gives it back itself)."""
        with self._lock:
            self._kind_known = True
            if store.storage.one_database:
                self._shared = store
            elif store is self._given:
                self._free.append(store)

    def _enlist(self, store: MemoryStore) -> None:
        """Make ``store`` buffer its uses, and start the thread that writes them."""
        buffer = use_buffer.enable(store.storage)
        with self._lock:
            self._buffer = buffer
            if self._flusher is None and not self._stop.is_set():
                self._flusher = threading.Thread(
                    target=_flush_often,
                    args=(weakref.ref(self), self._stop),
                    name="memkeeper-mcp-uses",
                    daemon=True,
                )
                self._flusher.start()

    def flush(self) -> int:
        """Write the buffered uses now (through a pooled store); how many were written."""
        if self._buffer is None or not len(self._buffer):
            return 0
        with self.borrow(create=False) as store:
            return use_buffer.flush(store.storage) if store is not None else 0

    def close(self) -> None:
        """Write the buffered uses, then close the stores this ref opened (a given store
        stays its owner's to close; its own close writes what is left)."""
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join(timeout=10)
        try:
            self.flush()
        except MemkeeperError as exc:  # a read-only file: the uses go unrecorded
            log.warning("buffered uses could not be written", cause=logs.redact(str(exc)))
        finally:
            with self._lock:
                mine, self._mine = self._mine, []
                self._free = [store for store in self._free if store not in mine]
                if self._shared in mine:
                    self._shared = None
            for store in mine:
                store.close()

    def __enter__(self) -> StoreRef:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def _pool_size(store: MemoryStore) -> int:
    """How many connections a PostgreSQL store's pool opens at most."""
    return int(getattr(getattr(store.storage, "pool", None), "max_size", 1))


def _location(store: MemoryStore) -> str | Path:
    """What opens ``store``'s database again: its file, or on PostgreSQL its URL as given
    (``store.path`` is then the URL with its password masked, for messages: opening that
    would be refused)."""
    if store.storage.one_database:
        return store.storage.url.conninfo()  # type: ignore[attr-defined]
    return store.path


def _flush_often(ref: weakref.ref[StoreRef], stop: threading.Event) -> None:
    """The flusher thread: write the ref's buffered uses every :data:`FLUSH_SECONDS` until
    the ref closes (or is gone)."""
    failing = False
    while not stop.wait(FLUSH_SECONDS):
        stores = ref()
        if stores is None:
            return
        try:
            stores.flush()
            failing = False
        except MemkeeperError as exc:
            # The uses stay buffered for the next try (the write lock was busy past the
            # busy timeout, or the file cannot be written for now); said once per streak.
            if not failing:
                log.warning("buffered uses not written yet", cause=logs.redact(str(exc)))
            failing = True
        except Exception as exc:  # the owner closed the given store (its close wrote them)
            log.debug("the use flusher stops", cause=type(exc).__name__)
            return
        del stores
