"""Buffered uses: recalls of active entries held in memory and written in one batch.

Recording a use (:mod:`memkeeper.storage.uses`) is a write: one ``BEGIN IMMEDIATE`` per
recall or search. Under many concurrent callers (the MCP server) those transactions queue on
SQLite's one write lock, and behind a maintenance pass's batches. A store that buffers its
uses (:func:`enable`) reads without the write lock and
adds each use of an active entry to this process's :class:`UseBuffer` for its hot file; the
buffer is written by :func:`flush` in one short transaction for many uses:

* by its owner every few milliseconds (the MCP server: :mod:`memkeeper.mcp.store_ref`) and
  when it closes;
* inside every :func:`~memkeeper.storage.transitions.apply` of this process on that file,
  under the write lock and before the transitions' entries are re-read, so a job, an undo or
  a write of this process sees every use that happened before it: the agent still wins;
* never for an erased entry: :func:`~memkeeper.storage.uses.delete_uses` (forget) discards
  its buffered uses, and a flush drops a use whose entry is gone.

A flush applies each use as a recall at that moment would: an entry still active records it
in place (``access_count`` up by the uses, ``last_accessed_at`` the latest); an entry a job
of *another* process put to pending review meanwhile is renewed, one moved to cold storage is
restored (a logged ``renew`` / ``restore``, as a recall right after the job would do); a
superseded or erased entry drops it. What buffering costs: a crash loses the uses of the
last interval (they were never acknowledged as writes, unlike a ``remember``), and another
process sees a use up to one interval late.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memkeeper import logs
from memkeeper.storage.base import Storage
from memkeeper.storage.batches import placeholders
from memkeeper.storage.changelog import image_of
from memkeeper.storage.transaction import immediate_transaction
from memkeeper.storage.transitions import (
    Image,
    Transition,
    apply,
    hot_image,
    used_image,
)
from memkeeper.storage.uses import record_uses

log = logs.get_logger("memkeeper.storage")

MAX_PENDING = 100_000
"""Most uses a buffer holds (a few MB): past it, while the file cannot be written, a use
goes unrecorded with a warning, as a recall on a read-only database does."""

_REASONS = {
    "recall": ("recalled while pending review", "recalled from cold storage"),
    "search": ("found by search while pending review", "found by search in cold storage"),
}


@dataclass(frozen=True, slots=True)
class Use:
    """One buffered use: when, and by which actor and verb (``recall`` or ``search``)."""

    at: datetime
    actor: str
    by: str


class UseBuffer:
    """The uses of one hot file not yet written, by memory id (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, list[Use]] = {}
        self._count = 0
        self._full = False

    def add(self, memory_id: str, at: datetime, actor: str, by: str) -> bool:
        """Buffer a use; False (and a warning, once until the next flush) when full."""
        with self._lock:
            if self._count >= MAX_PENDING:
                warn, self._full = not self._full, True
            else:
                self._pending.setdefault(memory_id, []).append(Use(at, actor, by))
                self._count += 1
                return True
        if warn:
            log.warning("uses not recorded: the use buffer is full", pending=MAX_PENDING)
        return False

    def pending(self, memory_id: str) -> int:
        """How many uses of ``memory_id`` are buffered."""
        with self._lock:
            return len(self._pending.get(memory_id, ()))

    def take(self) -> dict[str, list[Use]]:
        """Every pending use, removed from the buffer."""
        with self._lock:
            taken, self._pending, self._count = self._pending, {}, 0
            self._full = False
            return taken

    def put_back(self, uses: dict[str, list[Use]]) -> None:
        """Return uses a flush could not write (they go before any added since)."""
        with self._lock:
            for memory_id, items in uses.items():
                self._pending[memory_id] = [*items, *self._pending.get(memory_id, ())]
                self._count += len(items)

    def discard(self, memory_ids: Iterable[str]) -> None:
        """Forget the buffered uses of these entries (they are being erased)."""
        with self._lock:
            for memory_id in memory_ids:
                self._count -= len(self._pending.pop(memory_id, ()))

    def __len__(self) -> int:
        return self._count


class NeedsWrite(Exception):
    """Raised inside :func:`reads_only` where a call would write (a renewal, a restore):
    the caller runs it again where writing (and waiting for the write lock) is fine."""


_ATTEMPT = threading.local()


@contextmanager
def reads_only() -> Iterator[None]:
    """Within this block, this thread's recall and search raise :class:`NeedsWrite` instead
    of writing: the MCP server tries them on its event loop, which must never wait for
    SQLite's write lock, and in a worker thread only when they need to write."""
    _ATTEMPT.on = True
    try:
        yield
    finally:
        _ATTEMPT.on = False


def may_write() -> None:
    """Raise :class:`NeedsWrite` inside :func:`reads_only`; else nothing."""
    if getattr(_ATTEMPT, "on", False):
        raise NeedsWrite


_BUFFERS: dict[str, UseBuffer] = {}
_REGISTRY_LOCK = threading.Lock()


def _key(storage: Storage) -> str:
    """Which buffer a storage's uses go to: its hot file's real path, or on PostgreSQL the
    URL (masked, as stores print it) and schema — never a path made of the URL, which
    would change with the working directory."""
    if storage.one_database:
        return f"{storage.hot_path}#{getattr(storage, 'schema', '')}"
    return os.path.realpath(storage.hot_path)


_BUFFERING: weakref.WeakKeyDictionary[Storage, UseBuffer] = weakref.WeakKeyDictionary()


def enable(storage: Storage) -> UseBuffer:
    """From now on, recall and search through ``storage`` buffer their uses (in this
    process's buffer for its hot file, made on first need); returns the buffer. Whoever
    enables it flushes it often (the MCP server: :mod:`memkeeper.mcp.store_ref`)."""
    key = _key(storage)
    with _REGISTRY_LOCK:
        buffer = _BUFFERS.setdefault(key, UseBuffer())
        _BUFFERING[storage] = buffer
    return buffer


def buffering(storage: Storage) -> UseBuffer | None:
    """The buffer ``storage``'s recalls and searches add their uses to, if it buffers."""
    return _BUFFERING.get(storage) if _BUFFERING else None


def discard_everywhere(memory_ids: Iterable[str]) -> None:
    """Drop the buffered uses of these ids from every buffer of this process (ids are
    unique across files, so an erasure needs no path)."""
    ids = list(memory_ids)
    for buffer in list(_BUFFERS.values()):
        if len(buffer):
            buffer.discard(ids)


def flush_inside(storage: Storage) -> None:
    """Write ``storage``'s pending uses in the caller's open write transaction (the hook
    :func:`~memkeeper.storage.transitions.apply` calls before re-reading its entries).
    Uses of entries now in cold storage stay buffered for the next :func:`flush`."""
    if not _BUFFERS:
        return
    buffer = _BUFFERS.get(_key(storage))
    if buffer is None or not len(buffer):
        return
    taken = buffer.take()
    try:
        cold = _write(storage, taken)
    except BaseException:
        buffer.put_back(taken)
        raise
    if cold:
        buffer.put_back(cold)


def flush(storage: Storage) -> int:
    """Write ``storage``'s pending uses in one short transaction (and restore any whose
    entry moved to cold storage meanwhile); returns how many uses were taken. On a failure
    the uses go back into the buffer and the error is raised."""
    buffer = _BUFFERS.get(_key(storage))
    if buffer is None or not len(buffer):
        return 0
    taken = buffer.take()
    try:
        with storage.lock:
            users = _owners(storage, list(taken))
            with immediate_transaction(storage.hot, users=users):
                cold = _write(storage, taken)
    except BaseException:
        buffer.put_back(taken)
        raise
    for memory_id, uses in cold.items():
        _restore(storage, memory_id, uses)
    return sum(len(uses) for uses in taken.values())


def _owners(storage: Storage, ids: list[str]) -> set[str] | None:
    """The users whose write locks a flush takes: on PostgreSQL the owners of the buffered
    entries, hot or cold (read before the locks; an entry never changes owner), so that a
    flush waits only for writers of those users and no writer of another waits for it;
    None elsewhere (SQLite has one writer at a time)."""
    if getattr(storage.hot, "dialect", "sqlite") != "postgres":
        return None
    owners: set[str] = set()
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        marks = placeholders(len(part))
        for rows in storage.hot.conn.read_together(  # type: ignore[attr-defined]
            [
                (f"SELECT user_id FROM memories WHERE id IN ({marks})", part),
                (f"SELECT user_id FROM cold_memories WHERE id IN ({marks})", part),
            ]
        ):
            owners.update(row["user_id"] for row in rows)
    return owners


def _write(storage: Storage, taken: dict[str, list[Use]]) -> dict[str, list[Use]]:
    """Apply ``taken`` in the open transaction; returns the uses of entries not in the hot
    file (to restore if they are in cold storage), and on PostgreSQL those of users the
    transaction does not hold the write lock of (another thread or process may be writing
    that row now: their uses wait for the next flush, which locks their owners)."""
    ids = list(taken)
    rows = _hot_rows(storage, ids)
    scope = getattr(storage.hot, "scope", None)
    if scope is not None and not scope.everything:
        rows = {i: row for i, row in rows.items() if row["user_id"] in scope.users}
    in_place: list[tuple[Image, list[datetime]]] = []
    renewals: dict[str, list[tuple[Transition, datetime]]] = {}
    for memory_id in ids:
        row = rows.get(memory_id)
        uses = taken[memory_id]
        if row is None:
            continue
        if row["state"] == "active":
            in_place.append((row, [use.at for use in uses]))
        elif row["state"] == "pending_review":
            target = row
            for use in uses:
                target = used_image(target, use.at)
            last = uses[-1]
            target = hot_image(target, "active", last.at)
            transition = Transition(memory_id, row, target, "renew", _REASONS[last.by][0])
            renewals.setdefault(f"{last.actor}:{last.by}", []).append((transition, last.at))
        else:
            log.debug("a buffered use's entry was superseded meanwhile", memory_id=memory_id)
    record_uses(storage.hot, in_place)
    for actor, pairs in renewals.items():
        apply(storage, [t for t, _ in pairs], actor=actor, now=max(at for _, at in pairs))
    return {memory_id: taken[memory_id] for memory_id in ids if memory_id not in rows}


def _hot_rows(storage: Storage, ids: list[str]) -> dict[str, Image]:
    found: dict[str, Image] = {}
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        for row in storage.hot.query(
            f"SELECT * FROM memories WHERE id IN ({placeholders(len(part))})", part
        ):
            found[row["id"]] = image_of(row)
    return found


def _restore(storage: Storage, memory_id: str, uses: list[Use]) -> None:
    """Bring back an entry a job of another process moved to cold storage after its use."""
    cold = storage.cold(create=False)
    rows: list[Any] = []
    if cold is not None:
        with storage.lock:
            rows = list(cold.query("SELECT * FROM cold_memories WHERE id = ?", [memory_id]))
    if not rows or rows[0]["cold_reason"] == "superseded":
        return
    image = image_of(rows[0])
    last = uses[-1]
    target = hot_image(image, "active", last.at)
    for use in uses:
        target = used_image(target, use.at)
    reason = _REASONS[last.by][1]
    apply(
        storage,
        [Transition(memory_id, image, target, "restore", reason)],
        actor=f"{last.actor}:{last.by}",
        now=last.at,
    )
