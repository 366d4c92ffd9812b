"""Process locks of a memory: one service per database, per-job locks for job runs.

Which lock what holds:

- ``daemon``: a ``memkeeper run`` service for its whole life (on PostgreSQL, the fleet's
  leader: :mod:`memkeeper.service.fleet`);
- a run of job ``name`` (from the service or from ``run-once``, on any host):
  ``job:<name>`` **exclusively**, so one run of a job at a time, and ``jobs`` **shared**, so
  runs of different jobs go on side by side (a ``run-once merge`` does not wait for a
  ``summarize`` running elsewhere) — :func:`job_lock`. Jobs of :data:`EXCLUSIVE_JOBS`
  (``prune``) hold ``jobs`` exclusively instead: they run alone;
- ``undo`` and a backup restore: ``jobs`` **exclusively** (:func:`jobs_lock`), so they wait
  for every running job and no job starts while they run.

Two different jobs at once are safe because every change goes through one transition
mechanism that re-reads each entry under the write lock and leaves alone any entry changed
since it was selected (as it does for agents' writes), merge applies a group whole or not at
all, each run writes only its own ``job_runs`` row and closes only its own job's abandoned
rows, and each job's watermark is its own. Prune is the exception (above).

On SQLite, locks are ``flock(2)`` locks on small files next to the hot database
(``memory.db.daemon.lock``, ``memory.db.jobs.lock``, ``memory.db.job-merge.lock``; the
shared ``jobs`` lock is ``LOCK_SH``), each there only while someone holds it: its last
holder removes it as it lets go (a waiter that locked the removed file notices and takes the
one now at the path), so a database nobody is working on has no lock file beside it, and a
running service shows its ``daemon.lock``. The kernel drops a flock when its holder dies —
however it dies — so a lock left by a killed process is never obeyed: the next process
simply gets it (the stale pid written in the file is overwritten) and removes the file when
it is done. An exclusive holder's pid is written
into the file for the "held by" message; a shared holder clears it. The message names the
holders the kernel lists (Linux: ``/proc/locks``, shared holders included), else the file's
pid if that process is alive, else "another process": never a killed holder's pid.

On PostgreSQL (a storage whose ``process_lock`` it offers) the same locks are session
advisory locks on a connection of their own (:mod:`memkeeper.storage.postgres.job_locks`;
shared: ``pg_try_advisory_lock_shared``), with the same waiting and refusing. There the job
locks also *fence*: while one is held, every transaction of its thread checks before its
commit that the locks' epochs are still this holder's
(:mod:`memkeeper.storage.postgres.leadership`), so a holder that lost its lock (paused past
``service.takeover_seconds``) commits nothing after a new holder began.

Every lock of a storage is one object per process (:mod:`memkeeper.maintenance.held_locks`),
re-entrant within one thread: the service takes a job's lock to decide whether the job is
still due and keeps it while the runner takes it again to run the job, so no other process
can run the job in between (exactly once per scheduled time across a fleet).
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
from memkeeper.maintenance.held_locks import (
    TAKEOVER,
    LockSet,
    ReentrantLock,
    set_leader_epoch,  # noqa: F401 - re-exported: the service sets it
    set_takeover,  # noqa: F401 - re-exported: the service and run-once set it
)

if TYPE_CHECKING:
    from memkeeper.storage.base import Storage

POLL_SECONDS = 0.1

_HELD: weakref.WeakKeyDictionary[Any, dict[str, ReentrantLock]] = weakref.WeakKeyDictionary()
_REGISTRY = threading.Lock()


def lock_path(db_path: Path, name: str) -> Path:
    """The lock file ``name`` for the database at ``db_path``."""
    return db_path.with_name(f"{db_path.name}.{name}.lock")


def _holder(fd: int) -> str:
    """Who holds the flock of ``fd``'s file, for the "held by" message: the processes the
    kernel names (Linux's ``/proc/locks``: shared holders too, which write no pid), else
    the pid the exclusive holder wrote if that process is alive, else "another process"
    (a pid left by a killed holder names nobody: never shown)."""
    holders = _flock_holders(fd)
    if holders:
        return ("pid " if len(holders) == 1 else "pids ") + ", ".join(map(str, holders))
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 64).decode("ascii", "replace").strip()
    except OSError:
        return "another process"
    if text.isdigit() and _alive(int(text)):
        return f"pid {text}"
    return "another process"


PROC_LOCKS = Path("/proc/locks")


def _flock_holders(fd: int) -> list[int]:
    """The pids holding a flock on ``fd``'s file, as the kernel lists them (Linux), in the
    order listed; empty where there is no ``/proc/locks`` or it names none."""
    try:
        stat = os.fstat(fd)
        lines = PROC_LOCKS.read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return []
    mine = (os.major(stat.st_dev), os.minor(stat.st_dev), stat.st_ino)
    pids: list[int] = []
    for line in lines:
        # "1: FLOCK  ADVISORY  READ 4242 fe:00:2146323 0 EOF"; a waiter's line has "->".
        parts = line.split()
        if len(parts) < 6 or parts[1] != "FLOCK":
            continue
        try:
            major, minor, inode = parts[5].split(":")
            key = (int(major, 16), int(minor, 16), int(inode))
            pid = int(parts[4])
        except ValueError:
            continue
        if key == mine and pid > 0 and pid not in pids:
            pids.append(pid)
    return pids


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (on this host: the lock files are local)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by another user
        return True
    return True


class FileLock:
    """A non-reentrant inter-process lock on one file: exclusive, or ``shared`` (many shared
    holders at once, none while an exclusive one holds it)."""

    def __init__(self, path: Path, purpose: str, *, shared: bool = False) -> None:
        self.path = Path(path)
        self.purpose = purpose
        self.shared = shared
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, wait_seconds: float = 0.0, *, asked: float | None = None) -> None:
        """Take the lock, waiting up to ``wait_seconds``; raise LockBusy if it stays taken
        (saying it waited ``asked`` seconds: the caller's whole wait, default this one)."""
        if self._fd is not None:
            raise RuntimeError(f"{self.purpose} lock is already held by this object")
        deadline = time.monotonic() + max(wait_seconds, 0.0)
        mode = fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX
        fd = self._open()
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = _holder(fd)
                    os.close(fd)
                    shown = wait_seconds if asked is None else asked
                    waited = f" after waiting {shown:g} s" if shown else ""
                    raise LockBusy(
                        f"the {self.purpose} lock ({self.path}) is held by {holder}{waited}"
                    ) from None
                time.sleep(POLL_SECONDS)
                continue
            if self._still_at_path(fd):
                break
            # Its last holder removed the file while this process waited on it: the lock
            # is the file now at the path (a new one, perhaps another process's already).
            os.close(fd)
            fd = self._open()
        # The holder's pid is only for messages: a full disk must not fail the lock itself.
        # A shared holder writes none (there may be many) but clears what the file holds:
        # with the lock shared no exclusive holder exists, so a pid there is a killed one's.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            if not self.shared:
                os.lseek(fd, 0, os.SEEK_SET)
                os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StorageUnwritable(
                f"cannot create lock file {self.path}: {exc.strerror or exc}"
            ) from None

    def _still_at_path(self, fd: int) -> bool:
        """Whether the file locked through ``fd`` is still the one at the path."""
        try:
            here, there = os.fstat(fd), os.stat(self.path)
        except OSError:
            return False
        return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)

    def release(self) -> None:
        """Give the lock up, and remove its file when no one else holds it: a database
        whose locks nobody holds has no lock file beside it. An exclusive holder removes
        it before unlocking; a shared one only when it can take it exclusively at once
        (the other shared holders gone). A process waiting on the removed file notices
        when it gets it and takes the file now at the path (:meth:`acquire`)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if self.shared:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return  # another holder still has it: the file stays theirs
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # no pid: a file left behind names no holder
                if self._still_at_path(fd):
                    os.unlink(self.path)
        finally:
            with contextlib.suppress(OSError):
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

    def acquire(self, wait_seconds: float = 0.0, *, asked: float | None = None) -> None: ...

    def release(self) -> None: ...

    def hold(self, wait_seconds: float = 0.0) -> contextlib.AbstractContextManager[Any]: ...


def _lock(where: Path | Storage, name: str, purpose: str, *, shared: bool = False) -> ProcessLock:
    """The lock ``name`` of a memory: ``where`` is the hot file's path or the storage."""
    process_lock = getattr(where, "process_lock", None)
    if process_lock is not None:  # PostgreSQL: no file beside the database
        lock = process_lock(name, purpose, shared=shared)
        if where in TAKEOVER:
            lock.idle_limit_seconds = TAKEOVER[where]
        return lock  # type: ignore[no-any-return]
    path = getattr(where, "hot_path", where)
    file_name = name.replace(":", "-")  # job:merge -> memory.db.job-merge.lock
    return FileLock(lock_path(Path(path), file_name), purpose, shared=shared)


def daemon_lock(where: Path | Storage) -> ProcessLock:
    """The lock a ``memkeeper run`` service holds for its whole life."""
    return _lock(where, "daemon", "service instance")


EXCLUSIVE_JOBS = frozenset({"prune"})
"""Jobs that run alone, holding ``jobs`` exclusively like ``undo``: prune cuts each user down
to the cap from a count of active facts that expire, demote and merge lower as they run
(beside them it would retire more than the cap asks; README "Running a fleet")."""


def _registered(where: Storage, name: str, make: Any) -> ReentrantLock:
    with _REGISTRY:
        locks = _HELD.get(where)
        if locks is None:
            locks = _HELD[where] = {}
        lock = locks.get(name)
        if lock is None:
            lock = locks[name] = ReentrantLock(make(), where)
        return lock


def jobs_lock(where: Path | Storage) -> ProcessLock:
    """The lock that excludes every job run: ``undo`` and a backup restore hold it
    exclusively (a job run holds it shared: :func:`job_lock`). One object per storage,
    re-entrant within a thread."""
    if isinstance(where, Path | str):
        return _lock(where, "jobs", "job run")
    return _registered(where, "jobs", lambda: _lock(where, "jobs", "job run"))  # type: ignore[return-value]


def job_lock(where: Path | Storage, name: str) -> ProcessLock:
    """The lock a run of job ``name`` holds, from the service or from run-once, on any host:
    ``job:<name>`` exclusively (one run of a job at a time; a run of another job may run
    beside it) and ``jobs`` shared (no ``undo`` meanwhile). A job of :data:`EXCLUSIVE_JOBS`
    holds ``jobs`` exclusively instead. One object per storage and job, re-entrant within a
    thread."""
    if name in EXCLUSIVE_JOBS:
        return jobs_lock(where)

    def make() -> LockSet:
        own = _lock(where, f"job:{name}", f"{name} job")
        return LockSet([own, _lock(where, "jobs", "job run", shared=True)])

    if isinstance(where, Path | str):
        return make()  # type: ignore[return-value]
    return _registered(where, f"job:{name}", make)  # type: ignore[return-value]


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
