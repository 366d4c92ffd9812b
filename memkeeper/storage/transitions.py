"""The one mechanism that changes memory rows, and logs each change in the same transaction.

Everything that writes a memory — the store API, every maintenance job, review, restore and
undo — describes what it wants as :class:`Transition` values: "memory X, which I saw as image
A, should become image B (or be created, or removed), because ...". :func:`apply` then:

1. takes the write lock (SQLite's ``BEGIN IMMEDIATE``; PostgreSQL's per-user advisory locks);
2. re-reads each entry and skips any whose current image is not the one the caller saw — an
   entry used or written after it was selected is never touched (an agent's recall wins);
3. writes the new images to the right file (state ``cold`` lives in the cold file) and one
   change-log row per change, committing them together. ``dry_run`` stops after step 2.

A use is not a change: a recall of an active entry updates only its use columns, in place,
and counts the use in ``uses`` (:mod:`memkeeper.storage.uses`). That still changes the
entry's image, so step 2 sees it and a job selected before it leaves the entry alone. Uses a
store of this process holds buffered (:mod:`memkeeper.storage.use_buffer`) are written just
before step 2 of an apply that opens its own transaction (a job's), so step 2 sees them too.

Crash safety across SQLite's two files (on PostgreSQL cold storage is a table of the same
database, and a move is one transaction). A move between files is three commits, so that a
crash at any instant leaves the entry recoverable in exactly one place:

* cold file: write the entry's cold image (for hot→cold) and mark its id in
  ``moves_in_flight``;
* hot file: insert / delete the hot row and write the change-log row;
* cold file, under the hot write lock again: :func:`reconcile`, which deletes the cold copy
  (for cold→hot) and clears the mark.

Every cold-file write happens under the hot write lock and decides by what the hot file holds,
never by id alone: between our hot commit and our cleanup another writer may already have
moved the entry again.

:func:`reconcile` (run under the hot lock before every apply, after every move, and at the
start of every job run) settles marked ids: if the id is in the hot file, the hot file is the
truth — the move either never committed there (hot→cold) or committed (cold→hot) — and the
cold copy goes; so it does when the hot file's change log says the entry was removed (its
latest row has no after image: a removal from cold storage, such as a cold purge, committed);
otherwise the cold copy is the only one and stays. Either way the mark is cleared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memkeeper.clock import to_db
from memkeeper.storage.base import Storage
from memkeeper.storage.batches import chunks, delete_in, placeholders
from memkeeper.storage.changelog import change_row, insert_changes
from memkeeper.storage.columns import MEMORY_COLUMNS
from memkeeper.storage.transaction import immediate_transaction
from memkeeper.storage.transition_writes import clear_cold, one_round_trip, write_cold, write_hot

Image = dict[str, Any]


# Test seam: called with the name of each step of a move, so crash tests can kill the process
# at exactly that point. It observes; it never changes what happens.
def _no_step_hook(step: str) -> None:
    """The default step hook: do nothing."""


step_hook: Callable[[str], None] = _no_step_hook


@dataclass(frozen=True)
class Transition:
    """One intended change: ``memory_id`` seen as ``expected`` should become ``target``.

    ``expected`` None means "must not exist yet" (a creation); ``target`` None means "remove".
    """

    memory_id: str
    expected: Image | None
    target: Image | None
    action: str
    reason: str
    details: dict[str, Any] = field(default_factory=dict)
    source: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What became of one transition: applied (or, in a dry run, would be) or skipped."""

    transition: Transition
    applied: bool
    before: Image | None

    @property
    def after(self) -> Image | None:
        return self.transition.target


def _is_cold(image: Image | None) -> bool:
    return image is not None and image["state"] == "cold"


def _is_hot(image: Image | None) -> bool:
    return image is not None and image["state"] != "cold"


def _user(transition: Transition) -> str:
    """The user whose memory ``transition`` changes."""
    return (transition.target or transition.expected or {}).get("user_id", "")


def _last_used(image: Image) -> str:
    accessed = image.get("last_accessed_at")
    return accessed if accessed and accessed > image["updated_at"] else image["updated_at"]


def with_changes(image: Image, **changes: Any) -> Image:
    """A copy of ``image`` with fields changed, ``last_used_at`` kept consistent."""
    new = {**image, **changes}
    new["last_used_at"] = _last_used(new)
    return new


def hot_image(image: Image, state: str, now: datetime) -> Image:
    """``image`` (hot or cold) as a hot entry in ``state`` since ``now``."""
    base = {name: image[name] for name in MEMORY_COLUMNS}
    return with_changes(base, state=state, state_since=to_db(now))


def cold_image(image: Image, reason: str, now: datetime) -> Image:
    """``image`` retired to cold storage for ``reason`` at ``now``."""
    base = {name: image[name] for name in MEMORY_COLUMNS}
    stamp = to_db(now)
    return with_changes(base, state="cold", state_since=stamp, cold_reason=reason, retired_at=stamp)


def used_image(image: Image, now: datetime) -> Image:
    """``image`` marked as used (recalled) at ``now``.

    ``last_accessed_at`` never moves back: a process whose clock lags another's (or a
    ``--now`` in the past) counts its use without making the entry look unused for longer.
    So the last use is the latest use time, which the ``uses`` table can tell on its own.
    """
    stamp = to_db(now)
    accessed = image["last_accessed_at"]
    return with_changes(
        image,
        last_accessed_at=accessed if accessed and accessed > stamp else stamp,
        access_count=int(image["access_count"]) + 1,
    )


def supersede(current: Image, by_id: str, now: datetime, reason: str, **details: Any) -> Transition:
    """``current`` becomes ``superseded`` by entry ``by_id``: kept through its grey period."""
    return Transition(
        current["id"],
        current,
        hot_image(current, "superseded", now),
        "supersede",
        reason,
        details={"superseded_by": by_id, **details},
    )


_CURRENT_STATES = ("active", "pending_review")


def _current_key(image: Image | None) -> tuple[str, str, str, str] | None:
    """The (user, namespace, kind, key) slot an image holds as the current value, if any."""
    if image is None or image["state"] not in _CURRENT_STATES or image["key"] is None:
        return None
    return (image["user_id"], image["namespace"], image["kind"], image["key"])


_HOLDERS = (
    "SELECT id FROM memories WHERE user_id = ? AND namespace = ? AND kind = ?"
    " AND key = ? AND state IN ('active', 'pending_review')"
)


def _claimed_slots(transitions: Sequence[Transition]) -> list[tuple[str, str, str, str]]:
    """The key slots transitions would make current that their entries did not hold as the
    caller saw them: whose holders :func:`_without_key_conflicts` must know. (A transition
    applies only when its entry is still as seen, so these are all it can ask about.)"""
    claimed = {
        slot
        for t in transitions
        if (slot := _current_key(t.target)) is not None and slot != _current_key(t.expected)
    }
    return sorted(claimed)


def _without_key_conflicts(
    storage: Storage,
    ready: list[tuple[Transition, Image | None]],
    holders: dict[tuple[str, str, str, str], list[str]],
) -> list[tuple[Transition, Image | None]]:
    """Drop transitions that would make a second current value for one key.

    Another writer may have made a newer value current since the caller looked (an agent's
    ``remember`` while a ``recall`` brings the old value back from cold storage). The newer
    write wins: the transition is skipped like any whose entry changed, and the caller looks
    again. A slot vacated by another transition of the same batch is free. ``holders``: the
    ids holding each slot of :func:`_claimed_slots`, read with the entries' re-read.
    """
    vacated = {
        t.memory_id
        for t, cur in ready
        if _current_key(cur) is not None and _current_key(cur) != _current_key(t.target)
    }
    claimed: set[tuple[str, str, str, str]] = set()
    kept = []
    for transition, current in ready:
        slot = _current_key(transition.target)
        if slot is None or slot == _current_key(current):
            kept.append((transition, current))
            continue
        found = holders.get(slot)
        if found is None:  # not read with the re-read (never, while current == expected)
            found = [row[0] for row in storage.hot.execute(_HOLDERS, list(slot))]
        taken = any(h != transition.memory_id and h not in vacated for h in found)
        if taken or slot in claimed:
            continue
        claimed.add(slot)
        kept.append((transition, current))
    return kept


def reconcile(storage: Storage) -> int:
    """Settle moves a crash interrupted (see the module docstring). Returns entries fixed.

    Must run under the hot write lock; :func:`apply` and the job runner call it.
    """
    cold = storage.cold(create=False)
    if cold is None or storage.one_database:
        return 0
    marked = [row["id"] for row in cold.query("SELECT id FROM moves_in_flight")]
    if not marked:
        return 0
    in_hot = set(storage.hot_images(marked))
    stale = [*in_hot, *_removed(storage, [i for i in marked if i not in in_hot])]
    clear_cold(storage, stale, marked)
    return len(stale)


def _removed(storage: Storage, ids: Sequence[str]) -> list[str]:
    """Those of ``ids`` whose latest change-log row removed the entry (no after image)."""
    found: list[str] = []
    for part in chunks(list(ids)):
        found += [
            row[0]
            for row in storage.hot.execute(
                "SELECT memory_id FROM changes WHERE after IS NULL AND id IN (SELECT max(id)"
                f" FROM changes WHERE memory_id IN ({placeholders(len(part))})"
                " GROUP BY memory_id)",
                list(part),
            )
        ]
    return found


def reconcile_now(storage: Storage) -> int:
    """Run :func:`reconcile` under its own hot write lock.

    One database (PostgreSQL) has no move across files to settle: no lock is taken (it
    would be the global one, which every agent's write waits for)."""
    if storage.one_database:
        return 0
    with storage.lock, immediate_transaction(storage.hot):
        return reconcile(storage)


def apply(
    storage: Storage,
    transitions: Sequence[Transition],
    *,
    actor: str,
    now: datetime,
    run_id: str | None = None,
    dry_run: bool = False,
) -> list[Outcome]:
    """Apply transitions whose entries are still as expected; log each in the same commit."""
    if not transitions:
        return []
    ids = [t.memory_id for t in transitions]
    if len(set(ids)) != len(ids):
        raise ValueError("one batch of transitions may name each memory only once")
    from memkeeper.storage.use_buffer_probe import flush_inside  # use_buffer builds on us

    stamp = to_db(now)
    with storage.lock:
        if dry_run:
            current = storage.current_images(ids)
            return [
                Outcome(t, current.get(t.memory_id) == t.expected, current.get(t.memory_id))
                for t in transitions
            ]
        touches_cold = any(_is_cold(t.target) or _is_cold(t.expected) for t in transitions)
        if touches_cold and storage.hot.conn.in_transaction:
            raise RuntimeError("moves to or from cold storage need their own transaction")
        hot_committed = False
        marks: list[str] = []
        # A caller that read its entries in its own transaction (remember) planned on the
        # rows as they are; a job selected them before: it sees this process's buffered
        # uses now, so an entry used since is left alone (the agent wins).
        outermost = not storage.hot.conn.in_transaction
        # PostgreSQL locks these users only; a job skips those an agent is writing (agent wins)
        users = {i["user_id"] for t in transitions for i in (t.expected, t.target) if i}
        try:
            with immediate_transaction(storage.hot, users=users, try_users=run_id is not None):
                busy = getattr(storage.hot, "busy_users", frozenset())
                if touches_cold:
                    reconcile(storage)
                if outermost:
                    flush_inside(storage)
                # The entries re-read and the holders of the keys they would take, together
                # (one round trip on PostgreSQL).
                slots = _claimed_slots(transitions)
                current, held = storage.current_images_and(
                    ids, [(_HOLDERS, slot) for slot in slots]
                )
                holders = {
                    slot: [r["id"] for r in rows] for slot, rows in zip(slots, held, strict=True)
                }
                pairs = [(t, current.get(t.memory_id)) for t in transitions]
                ready = _without_key_conflicts(
                    storage,
                    [(t, c) for t, c in pairs if c == t.expected and _user(t) not in busy],
                    holders,
                )
                into_cold = [t.target for t, cur in ready if _is_cold(t.target)]
                marks = (
                    []
                    if storage.one_database  # one transaction: no crash window across files
                    else [t.memory_id for t, cur in ready if _is_cold(cur) != _is_cold(t.target)]
                )
                with one_round_trip(storage.hot):  # the writes below read nothing back
                    if into_cold or marks:
                        write_cold(storage, into_cold, marks, stamp)  # type: ignore[arg-type]
                        step_hook("cold-written")
                    if storage.one_database:  # the cold rows that leave go in the same commit
                        leaving = [
                            t.memory_id for t, c in ready if _is_cold(c) and not _is_cold(t.target)
                        ]
                        delete_in(storage.hot.conn, "cold_memories", "id", leaving)
                    write_hot(storage, ready)
                    insert_changes(
                        storage.hot,
                        (
                            change_row(
                                at=stamp,
                                actor=actor,
                                run_id=run_id,
                                action=t.action,
                                reason=t.reason,
                                before=cur,
                                after=t.target,
                                source=t.source,
                                details=t.details,
                            )
                            for t, cur in ready
                        ),
                    )
                step_hook("hot-written")
            hot_committed = True
            step_hook("hot-committed")
            if marks:
                # The cold cleanup runs under the hot write lock again and decides by what the
                # hot file holds now: another writer may have moved the entry on since our
                # commit (a restore retired again at once), and deleting by id would lose it.
                reconcile_now(storage)
                step_hook("cold-cleared")
        except BaseException:
            if marks and not hot_committed:
                # The hot side rolled back: the cold copies written for it are stale.
                reconcile_now(storage)
            raise
        applied = {t.memory_id for t, _ in ready}
        return [Outcome(t, t.memory_id in applied, cur) for t, cur in pairs]
