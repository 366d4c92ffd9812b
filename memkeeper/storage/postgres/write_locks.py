"""Who writes what at once on PostgreSQL: memkeeper's write locks, per user where it can.

SQLite has one writer at a time (``BEGIN IMMEDIATE``); every re-check of the transition
mechanism relies on nothing changing between its read and its commit. On PostgreSQL the same
guarantee is given per *user*, so agents of one user never wait for a job working on
another's memories:

- a write scoped to users (an agent's ``remember``, a recall's use, a job's batch) takes the
  **shared** form of the global write lock, then an exclusive lock per user, in sorted order;
- a write of the whole memory (an erasure, a restore, the change-log thinning: every
  ``write_transaction`` that names no user) takes the global lock **exclusively**, so it
  waits for the user-scoped writers in progress and they wait for it;
- a job does not wait for an agent: it *tries* each user's lock and leaves the users it
  could not lock for its next run (``SKIP LOCKED``'s rule, the agent wins), reported back as
  :attr:`Scope.busy`. The tries are one statement sent with the ``BEGIN``
  (:func:`trying_locks`): a job's batch pays one round trip for its locks, not one per user.

Every lock is a transaction-scoped advisory lock: released by the commit or rollback, never
left behind by a crashed process, and invisible to readers (MVCC: readers never wait).
Deadlock-free by construction: the global lock is always taken first, blocking user locks
are taken in one sorted pass, and tries never wait.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

LOCK_CLASS = 0x4D4B4844  # "MKHD", as the migration lock (schema.LOCK_CLASS)
LOCK_WRITE = 2


def user_key(user_id: str) -> int:
    """The advisory lock key of a user: 64 bits of its SHA-256, signed (a collision only
    makes two users share a lock)."""
    digest = hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@dataclass
class Scope:
    """What the current write transaction holds: everything, or these users."""

    everything: bool = False
    users: set[str] = field(default_factory=set)
    busy: frozenset[str] = frozenset()
    """Users a job tried and could not lock (an agent is writing them): left alone."""

    def covers(self, users: Collection[str] | None) -> bool:
        return self.everything or (users is not None and set(users) <= self.users)


def blocking_locks(users: Collection[str] | None) -> tuple[str, Scope]:
    """The one statement that takes a write's locks, waiting for each (users in sorted
    order), and the scope it gives: sent with the ``BEGIN`` in one round trip. Its text
    holds nothing but integers (the keys), never a user id."""
    if users is None:
        return f"SELECT pg_advisory_xact_lock({LOCK_CLASS}, {LOCK_WRITE})", Scope(everything=True)
    keys = sorted({user_key(user) for user in users})
    calls = [f"pg_advisory_xact_lock_shared({LOCK_CLASS}, {LOCK_WRITE})"]
    calls += [f"pg_advisory_xact_lock({key})" for key in keys]
    return "SELECT " + ", ".join(calls), Scope(users=set(users))


JOB_PENDING_LIST_KB = 1024
"""``gin_pending_list_limit`` of a job's batch in kB (the server's default is 4 MB), see below."""


def trying_locks(users: Collection[str]) -> tuple[str, list[str]]:
    """The one statement that opens a job's batch: the global lock shared, a *try* of each
    user's lock, and the users in the order of its result's last columns; sent with the
    ``BEGIN`` in one round trip. Its text holds nothing but integers (the keys).

    It also lowers ``gin_pending_list_limit`` for the batch's transaction. The trigram
    indexes take new entries (every insert and every update of an indexed column, so every
    change a job makes) into a pending list first, and the statement that finds the list
    past the limit moves all of it into the index: at the default 4 MB, a few hundred
    milliseconds in one statement, paid by whoever writes next, a job or an agent's
    ``remember``. A job writing through a small limit moves the list in small steps
    itself, so an agent's write finds it short."""
    ordered = sorted(set(users), key=user_key)  # the order blocking_locks takes them in
    calls = [
        f"set_config('gin_pending_list_limit', '{JOB_PENDING_LIST_KB}', true)",
        f"pg_advisory_xact_lock_shared({LOCK_CLASS}, {LOCK_WRITE})",
    ]
    calls += [f"pg_try_advisory_xact_lock({user_key(user)})" for user in ordered]
    return "SELECT " + ", ".join(calls), ordered


def tried(ordered: list[str], row: Sequence[Any]) -> Scope:
    """The scope :func:`trying_locks`' statement gave: its ``row`` read against ``ordered``
    (the columns before the tries always hold)."""
    tries = row[len(row) - len(ordered) :]
    held = {user for user, got in zip(ordered, tries, strict=True) if got}
    return Scope(users=held, busy=frozenset(ordered) - held)


def lock_users(conn: Any, users: Collection[str], *, wait: bool, shared: bool = True) -> Scope:
    """The global lock shared, then each user's: waiting for each (sorted), or only trying."""
    if shared:
        conn.execute("SELECT pg_advisory_xact_lock_shared(?, ?)", (LOCK_CLASS, LOCK_WRITE))
    ordered = sorted(set(users), key=user_key)  # the order blocking_locks takes them in
    if wait:
        for user in ordered:
            conn.execute("SELECT pg_advisory_xact_lock(?)", (user_key(user),))
        return Scope(users=set(ordered))
    held, busy = set(), set()
    for user in ordered:
        row = conn.execute("SELECT pg_try_advisory_xact_lock(?)", (user_key(user),)).fetchone()
        (held if row[0] else busy).add(user)
    return Scope(users=held, busy=frozenset(busy))
