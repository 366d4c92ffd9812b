"""How a process holds its job locks: re-entrant per thread, several at once, fenced.

:mod:`memkeeper.maintenance.locks` says which locks a job run, ``undo`` or a restore take;
this module is how they are held:

- :class:`LockSet`: several process locks taken in order as one (a job run takes its own
  ``job:<name>`` lock exclusively, then the ``jobs`` lock shared), released in reverse, and
  none left held when one of them stays taken;
- :class:`ReentrantLock`: one thread may take a lock again while it holds it (the service
  takes a job's lock to decide whether the job is still due and keeps it while the runner
  takes it again to run the job, so no other process runs it in between); another thread of
  the process waits as another process would. On PostgreSQL its outermost acquisition
  installs the storage's **fence** for the holding thread: every transaction of that thread
  checks, before its commit, that the epochs its locks started are still current
  (:mod:`memkeeper.storage.postgres.leadership`), and its session gets
  ``idle_in_transaction_session_timeout`` (a holder paused inside a transaction would keep
  its row and write locks from the holder taking over).
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from memkeeper.errors import LockBusy

if TYPE_CHECKING:
    from memkeeper.maintenance.locks import ProcessLock
    from memkeeper.storage.base import Storage

POLL_SECONDS = 0.1

TAKEOVER: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
_LEADER_EPOCH: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def set_leader_epoch(storage: Storage, epoch: int | None) -> None:
    """While ``storage``'s service leads (PostgreSQL), its job transactions also prove the
    lead is still in the epoch it took (None: not leading, or a run-once)."""
    if epoch is None:
        _LEADER_EPOCH.pop(storage, None)
    else:
        _LEADER_EPOCH[storage] = epoch


def set_takeover(storage: Storage, seconds: float) -> None:
    """A PostgreSQL lock of ``storage`` whose holder stops answering is lost after
    ``seconds`` (``service.takeover_seconds``); no effect on SQLite's flocks."""
    TAKEOVER[storage] = seconds


class _AnyLost:
    """Set when any of the locks' sessions ended (the ``lost`` flag a fence reads)."""

    def __init__(self, parts: Sequence[Any]) -> None:
        self._events = [p.lost for p in parts if hasattr(p, "lost")]

    def is_set(self) -> bool:
        return any(event.is_set() for event in self._events)


class LockSet:
    """Process locks held as one: taken in order within one deadline, released in reverse."""

    def __init__(self, parts: Sequence[ProcessLock]) -> None:
        self.parts = list(parts)
        self.purpose = self.parts[0].purpose
        self.lost = _AnyLost(self.parts)

    @property
    def held(self) -> bool:
        return all(part.held for part in self.parts)

    @property
    def path(self) -> Any:
        return getattr(self.parts[0], "path", "")

    @property
    def idle_limit_seconds(self) -> float | None:
        return getattr(self.parts[0], "idle_limit_seconds", None)

    @idle_limit_seconds.setter
    def idle_limit_seconds(self, seconds: float) -> None:
        for part in self.parts:
            if hasattr(part, "idle_limit_seconds"):
                part.idle_limit_seconds = seconds  # type: ignore[attr-defined]

    @property
    def epochs(self) -> dict[str, int] | None:
        """Every part's fenced epochs (None when a part has none: no fleet tables)."""
        found: dict[str, int] = {}
        for part in self.parts:
            epochs = getattr(part, "epochs", None)
            if epochs is None:
                return None
            found.update(epochs)
        return found

    def acquire(self, wait_seconds: float = 0.0, *, asked: float | None = None) -> None:
        shown = wait_seconds if asked is None else asked
        deadline = time.monotonic() + max(wait_seconds, 0.0)
        taken: list[ProcessLock] = []
        try:
            for index, part in enumerate(self.parts):
                left = wait_seconds if index == 0 else max(deadline - time.monotonic(), 0.0)
                part.acquire(left, asked=shown)
                taken.append(part)
        except BaseException:
            for part in reversed(taken):
                part.release()
            raise

    def release(self) -> None:
        for part in reversed(self.parts):
            part.release()

    @contextlib.contextmanager
    def hold(self, wait_seconds: float = 0.0) -> Iterator[LockSet]:
        self.acquire(wait_seconds)
        try:
            yield self
        finally:
            self.release()


class ReentrantLock:
    """A process lock one thread may take again while it holds it (released by the last
    release). Another thread of the process waits as another process would. On PostgreSQL the
    outermost acquisition installs the storage's fence (see the module docstring)."""

    def __init__(self, inner: ProcessLock | LockSet, storage: Any) -> None:
        self.inner = inner
        self.purpose = inner.purpose
        self._storage = weakref.ref(storage) if storage is not None else None
        self._owner: int | None = None
        self._depth = 0
        self._guard = threading.Lock()

    @property
    def held(self) -> bool:
        return self._depth > 0 and self._owner == threading.get_ident()

    @property
    def path(self) -> Any:
        return getattr(self.inner, "path", "")

    def acquire(self, wait_seconds: float = 0.0) -> None:
        me = threading.get_ident()
        deadline = time.monotonic() + max(wait_seconds, 0.0)
        waited = False
        while True:
            with self._guard:
                if self._owner == me:
                    self._depth += 1
                    return
                if self._owner is None:
                    self._owner = me
                    break
            if time.monotonic() >= deadline:
                raise LockBusy(f"the {self.purpose} lock is held by another thread of this process")
            waited = True
            time.sleep(POLL_SECONDS)
        storage = self._storage() if self._storage is not None else None
        if (
            storage is not None
            and storage in TAKEOVER
            and hasattr(self.inner, "idle_limit_seconds")
        ):
            self.inner.idle_limit_seconds = TAKEOVER[storage]  # type: ignore[union-attr]
        try:
            left = max(deadline - time.monotonic(), 0.0) if waited else wait_seconds
            self.inner.acquire(left, asked=wait_seconds)
        except BaseException:
            with self._guard:
                self._owner = None
            raise
        self._depth = 1
        self._fence(True)

    def _fence(self, on: bool) -> None:
        storage = self._storage() if self._storage is not None else None
        hot = getattr(storage, "hot", None)
        epochs = getattr(self.inner, "epochs", None)
        if hot is None or not hasattr(hot, "fence"):
            return
        if on and epochs:
            from memkeeper.storage.postgres.leadership import Fence, limit_idle_transactions

            limit_idle_transactions(hot, getattr(self.inner, "idle_limit_seconds", None))
            epochs = dict(epochs)
            if storage in _LEADER_EPOCH:
                epochs["daemon"] = _LEADER_EPOCH[storage]
            hot.fence = Fence(storage.schema, epochs, self.inner.lost)  # type: ignore[union-attr]
        elif not on:
            hot.fence = None
            if epochs:
                from memkeeper.storage.postgres.leadership import limit_idle_transactions

                limit_idle_transactions(hot, None)

    def release(self) -> None:
        with self._guard:
            if self._owner != threading.get_ident() or self._depth == 0:
                return
            self._depth -= 1
            if self._depth:
                return
        try:
            self._fence(False)
            self.inner.release()
        finally:
            with self._guard:
                self._owner = None

    @contextlib.contextmanager
    def hold(self, wait_seconds: float = 0.0) -> Iterator[ReentrantLock]:
        """``with lock.hold(wait):`` — acquire, yield, always release."""
        self.acquire(wait_seconds)
        try:
            yield self
        finally:
            self.release()
