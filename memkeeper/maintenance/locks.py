"""Process locks of a memory: one daemon per database, one job run at a time.

On SQLite, locks are ``flock(2)`` locks on small files next to the hot database
(``memory.db.daemon.lock`` and ``memory.db.jobs.lock``). The kernel drops a flock when its
holder dies — however it dies — so a lock left by a killed process is never obeyed: the next
process simply gets it (the stale pid written in the file is reported and overwritten). The
holder's pid is written into the file for the "held by" message.

On PostgreSQL (a storage whose ``process_lock`` it offers) the same locks are session
advisory locks on a connection of their own (:mod:`memkeeper.storage.postgres.job_locks`),
with the same waiting and refusing: :func:`jobs_lock` and :func:`daemon_lock` take the
store's storage and choose by its backend. There the job lock also *fences*: while it is
held, every transaction of the storage checks before its commit that the lock's epoch is
still this holder's (:mod:`memkeeper.storage.postgres.leadership`), so a holder that lost its
lock (paused past ``service.takeover_seconds``) commits nothing after a new holder began.

The job lock is re-entrant within one thread: the service takes it to decide whether a job
is still due and keeps it while the runner takes it again to run the job, so no other
process can run the job in between (exactly once per scheduled time across a fleet).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memkeeper.errors import LockBusy, StorageUnwritable

if TYPE_CHECKING:
    from memkeeper.storage.base import Storage

POLL_SECONDS = 0.1


def lock_path(db_path: Path, name: str) -> Path:
    """The lock file ``name`` for the database at ``db_path``."""
    return db_path.with_name(f"{db_path.name}.{name}.lock")


def _holder(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 64).decode("ascii", "replace").strip()
    except OSError:
        return "another process"
    return f"pid {text}" if text.isdigit() else "another process"


class FileLock:
    """An exclusive, non-reentrant inter-process lock on one file."""

    def __init__(self, path: Path, purpose: str) -> None:
        self.path = Path(path)
        self.purpose = purpose
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, wait_seconds: float = 0.0) -> None:
        """Take the lock, waiting up to ``wait_seconds``; raise LockBusy if it stays taken."""
        if self._fd is not None:
            raise RuntimeError(f"{self.purpose} lock is already held by this object")
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StorageUnwritable(
                f"cannot create lock file {self.path}: {exc.strerror or exc}"
            ) from None
        deadline = time.monotonic() + max(wait_seconds, 0.0)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = _holder(fd)
                    os.close(fd)
                    waited = f" after waiting {wait_seconds:g} s" if wait_seconds else ""
                    raise LockBusy(
                        f"the {self.purpose} lock ({self.path}) is held by {holder}{waited}"
                    ) from None
                time.sleep(POLL_SECONDS)
        # The holder's pid is only for messages: a full disk must not fail the lock itself.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        """Give the lock up (the file stays; an empty or stale file means nothing)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    @contextlib.contextmanager
    def hold(self, wait_seconds: float = 0.0) -> Iterator[FileLock]:
        """``with lock.hold(wait):`` — acquire, yield, always release."""
        self.acquire(wait_seconds)
        try:
            yield self
        finally:
            self.release()


class ProcessLock(Protocol):
    """What callers use of a lock: :class:`FileLock` or PostgreSQL's advisory lock."""

    purpose: str

    @property
    def held(self) -> bool: ...

    def acquire(self, wait_seconds: float = 0.0) -> None: ...

    def release(self) -> None: ...

    def hold(self, wait_seconds: float = 0.0) -> contextlib.AbstractContextManager[Any]: ...


_TAKEOVER: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
_JOB_LOCKS: weakref.WeakKeyDictionary[Any, ReentrantLock] = weakref.WeakKeyDictionary()
_REGISTRY = threading.Lock()


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
    _TAKEOVER[storage] = seconds


def _lock(where: Path | Storage, name: str, purpose: str) -> ProcessLock:
    """The lock ``name`` of a memory: ``where`` is the hot file's path or the storage."""
    process_lock = getattr(where, "process_lock", None)
    if process_lock is not None:  # PostgreSQL: no file beside the database
        lock = process_lock(name, purpose)
        if where in _TAKEOVER:
            lock.idle_limit_seconds = _TAKEOVER[where]
        return lock  # type: ignore[no-any-return]
    path = getattr(where, "hot_path", where)
    return FileLock(lock_path(Path(path), name), purpose)


class ReentrantLock:
    """A process lock one thread may take again while it holds it (released by the last
    release). Another thread of the process waits as another process would. On PostgreSQL the
    outermost acquisition installs the storage's fence (see the module docstring)."""

    def __init__(self, inner: ProcessLock, storage: Any) -> None:
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
            and storage in _TAKEOVER
            and hasattr(self.inner, "idle_limit_seconds")
        ):
            self.inner.idle_limit_seconds = _TAKEOVER[storage]  # type: ignore[attr-defined]
        try:
            left = max(deadline - time.monotonic(), 0.0) if waited else wait_seconds
            self.inner.acquire(left)
        except BaseException:
            with self._guard:
                self._owner = None
            raise
        self._depth = 1
        self._fence(True)

    def _fence(self, on: bool) -> None:
        storage = self._storage() if self._storage is not None else None
        hot = getattr(storage, "hot", None)
        epoch = getattr(self.inner, "epoch", None)
        if hot is None or not hasattr(hot, "fence"):
            return
        if on and epoch is not None:
            from memkeeper.storage.postgres.leadership import Fence, limit_idle_transactions

            # A holder paused inside a transaction would keep its row and write locks: the
            # server ends such a session after the takeover time, rolling it back.
            limit_idle_transactions(hot, getattr(self.inner, "idle_limit_seconds", None))

            epochs = {"jobs": epoch}
            if storage in _LEADER_EPOCH:
                epochs["daemon"] = _LEADER_EPOCH[storage]
            hot.fence = Fence(storage.schema, epochs, self.inner.lost)  # type: ignore[attr-defined]
        elif not on:
            hot.fence = None
            if epoch is not None:
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


def daemon_lock(where: Path | Storage) -> ProcessLock:
    """The lock a ``memkeeper run`` service holds for its whole life."""
    return _lock(where, "daemon", "service instance")


def jobs_lock(where: Path | Storage) -> ProcessLock:
    """The lock every job run holds, from the service or from run-once (one object per
    storage, re-entrant within a thread)."""
    if isinstance(where, Path | str):
        return _lock(where, "jobs", "job run")
    with _REGISTRY:
        lock = _JOB_LOCKS.get(where)
        if lock is None:
            lock = _JOB_LOCKS[where] = ReentrantLock(_lock(where, "jobs", "job run"), where)
        return lock


FLEET_SEEN_SECONDS = 30.0
"""``status`` lists the services of a fleet seen within this long (they beat every 2 s)."""


def _fleet(storage: Any) -> dict[str, Any]:
    """PostgreSQL: the leader's lease, the services seen recently, each job's last runs and
    the host that ran them (``status`` shows them as the service's fleet)."""
    from datetime import timedelta

    from memkeeper.clock import system_now
    from memkeeper.storage.postgres.leadership import fleet_status

    return fleet_status(
        storage.url,
        storage.schema,
        connect_timeout=storage.connect_timeout,
        now=system_now(),
        recent=timedelta(seconds=FLEET_SEEN_SECONDS),
    )


def service_state(where: Path | Storage) -> dict[str, Any]:
    """Whether a service holds the instance lock of ``where`` (for ``status``), and its pid.

    Probes with a shared, non-blocking flock released at once; never creates the lock file.
    On PostgreSQL, asks ``pg_locks`` (the pid is the holding process's), and adds the fleet:
    ``leader`` (host, pid, since, epoch), ``members`` seen recently, ``runs`` with hosts.
    """
    if getattr(where, "process_lock", None) is not None:
        state: dict[str, Any] = daemon_lock(where).holder_state()  # type: ignore[attr-defined]
        state.update(_fleet(where))
        return state
    path = lock_path(Path(getattr(where, "hot_path", where)), "daemon")
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return {"running": False, "pid": None}
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 32).decode("ascii", "replace").strip()
            return {"running": True, "pid": int(text) if text.isdigit() else None}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return {"running": False, "pid": None}
    finally:
        os.close(fd)
