"""Undo: revert every change of one run, newest first, as a new logged run.

Each change-log row holds the entry's whole image before and after. Undoing a change means
moving the entry from its ``after`` image back to its ``before`` image through the shared
transition mechanism — so it is guarded and logged like any other change:

* the entry is exactly as the run left it → it goes back to the before image;
* it is already back at the before image → nothing to do ("already undone"), so undoing
  twice is harmless;
* anything else (recalled, re-confirmed, changed by a later run) → left alone and reported
  as a conflict; so is restoring a current value whose key has since got another one.

Erasures cannot be undone: ``forget`` deletes an entry's change-log rows with its content, so
a forgotten entry is simply absent from the run it was part of. When undo removes a summary
note, the messages it summarized are unmarked and return to ``history()``.

Undo is offered while a run's rows hold their whole images: the ``retain`` job keeps them at
least ``[jobs.retain] undo_days`` (by default ``full_images_days``, 365 days), then thins
them; a run with a thinned row is refused with :class:`~memkeeper.errors.InvalidInput`
saying it is older than the undo window.

Each conflict names its entry (id, user, namespace, kind, key) in ``conflict_entries``.
Undoing a ``prune`` run brings facts back over the cap that pruned them: unless the cap is
raised or the facts pinned, the next prune retires the lowest-scoring again. The report's
``notes`` say so, per user and namespace still over the cap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memkeeper.errors import InvalidInput, NotFound
from memkeeper.maintenance.jobkit import JobContext
from memkeeper.maintenance.locks import jobs_lock
from memkeeper.maintenance.runner import JobResult, new_run_id, record_run_end, record_run_start
from memkeeper.records import Change
from memkeeper.storage import due, job_runs, messages
from memkeeper.storage.retention import run_is_thinned
from memkeeper.storage.transaction import write_transaction
from memkeeper.storage.transitions import Transition, apply, reconcile_now
from memkeeper.store import MemoryStore
from memkeeper.store.entries import current_entry

UNDO_JOB = "undo"


@dataclass
class UndoReport:
    """What an undo did: the new run, reverted changes, and what it left alone and why."""

    run_id: str
    undone_run: str
    dry_run: bool
    undone_job: str | None = None
    reverted: list[int] = field(default_factory=list)
    already_undone: list[int] = field(default_factory=list)
    conflicts: dict[int, str] = field(default_factory=dict)
    conflict_entries: dict[int, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "undone_run": self.undone_run,
            "undone_job": self.undone_job,
            "dry_run": self.dry_run,
            "reverted": self.reverted,
            "already_undone": self.already_undone,
            "conflicts": {str(k): v for k, v in self.conflicts.items()},
            "conflict_entries": {str(k): v for k, v in self.conflict_entries.items()},
            "notes": self.notes,
        }

    def conflict(self, change: Change, why: str) -> None:
        """Record that ``change`` was left alone, and which entry it is about."""
        image = change.after or change.before or {}
        self.conflicts[change.id] = why
        self.conflict_entries[change.id] = {
            "memory_id": change.memory_id,
            "user_id": change.user_id,
            "namespace": change.namespace,
            "kind": image.get("kind"),
            "key": image.get("key"),
        }


def entry_label(entry: dict[str, Any]) -> str:
    """``3f9a… (user 'alice', fact 'city')``: which entry a conflict is about."""
    what = entry["kind"] if entry.get("key") is None else f"{entry['kind']} {entry['key']!r}"
    where = f", namespace {entry['namespace']!r}" if entry.get("namespace") else ""
    return f"{entry['memory_id']} (user {entry['user_id']!r}{where}, {what})"


def _job_of(changes: list[Change]) -> str | None:
    """The job that made these changes, from their actor (``job:prune``), if one did."""
    actors = {change.actor for change in changes if change.actor.startswith("job:")}
    return actors.pop().removeprefix("job:") if len(actors) == 1 else None


def _prune_notes(store: MemoryStore, reverted: list[Change], dry_run: bool) -> list[str]:
    """For an undone prune: who is (or would be) over the cap again, and what to do."""
    cap = store.config.jobs.prune.max_facts
    groups: dict[tuple[str, str], int] = {}
    for change in reverted:
        if change.action == "retire" and change.user_id is not None:
            group = (change.user_id, change.namespace or "")
            groups[group] = groups.get(group, 0) + 1
    notes = []
    for (user_id, namespace), restored in sorted(groups.items()):
        active = due.count_active_facts(store.storage.hot, user_id, namespace)
        if dry_run:
            active += restored
        if active <= cap:
            continue
        where = f" in namespace {namespace!r}" if namespace else ""
        notes.append(
            f"user {user_id!r}{where} has {active} active facts, over the cap of {cap}: the "
            f"next prune run will retire {active - cap} of them again. To keep them, pin the "
            "ones that matter (memkeeper remember USER KEY VALUE --pin) or raise "
            "[jobs.prune] max_facts."
        )
    return notes


def _key_conflict(store: MemoryStore, change: Change) -> str | None:
    """Why restoring ``change.before`` would clash with another current value, if it would."""
    before = change.before
    if not before or before["key"] is None or before["state"] not in ("active", "pending_review"):
        return None
    holder = current_entry(
        store.storage, before["user_id"], before["namespace"], before["kind"], before["key"]
    )
    if holder is not None and holder["id"] != change.memory_id:
        return f"key {before['key']!r} now has another current value ({holder['id']})"
    return None


def _unmark_summarized(store: MemoryStore, note_id: str) -> None:
    messages.unmark_summarized(store.storage.hot, note_id)


def _revert(store: MemoryStore, change: Change, ctx: JobContext) -> bool:
    transition = Transition(
        change.memory_id,  # type: ignore[arg-type]
        change.after,
        change.before,
        "undo",
        f"undo of change #{change.id} ({change.action}) of run {change.run_id}",
        details={"undoes_change": change.id, "undoes_run": change.run_id},
    )
    removes_hot_entry = (
        change.before is None and change.after is not None and change.after["state"] != "cold"
    )
    if ctx.dry_run or not removes_hot_entry:
        outcome = apply(
            store.storage,
            [transition],
            actor=ctx.actor,
            now=ctx.now,
            run_id=ctx.run_id,
            dry_run=ctx.dry_run,
        )[0]
        return outcome.applied
    with write_transaction(store.storage):
        outcome = apply(
            store.storage, [transition], actor=ctx.actor, now=ctx.now, run_id=ctx.run_id
        )[0]
        if outcome.applied:
            _unmark_summarized(store, change.memory_id)  # type: ignore[arg-type]
    return outcome.applied


def _refuse_when_too_old(store: MemoryStore, run_id: str, started: datetime | None) -> None:
    """Undo is offered while a run's rows hold their images: ``[jobs.retain] undo_days``."""
    if not run_is_thinned(store.storage.hot, run_id):
        return
    window = store.config.jobs.retain.undo_window_days
    when = f" (started {started:%Y-%m-%d %H:%M} UTC)" if started else ""
    raise InvalidInput(
        f"run {run_id}{when} can no longer be undone: it is older than the undo window of "
        f"{window} days ([jobs.retain] undo_days) and retention has thinned its change-log "
        "images to what explain needs"
    )


def _undo_each(
    store: MemoryStore, changes: list[Change], ctx: JobContext, report: UndoReport
) -> list[Change]:
    """Judge each change, newest first, and revert it unless a dry run: the ones reverted.

    Each judgement reads only the change's own entry, so any slice of a run is judged as the
    whole run would judge it (:func:`preview_changes`)."""
    reverted: list[Change] = []
    for change in changes:
        if change.memory_id is None:
            continue
        current = store.storage.current_images([change.memory_id]).get(change.memory_id)
        if current == change.before:
            report.already_undone.append(change.id)
            continue
        if current != change.after:
            report.conflict(change, "changed since that run")
            continue
        clash = _key_conflict(store, change)
        if clash:
            report.conflict(change, clash)
            continue
        if _revert(store, change, ctx):
            report.reverted.append(change.id)
            reverted.append(change)
        else:
            report.conflict(change, "changed while undoing")
    return reverted


def preview_changes(
    store: MemoryStore, run_id: str, changes: list[Change], *, now: datetime | None = None
) -> UndoReport:
    """What undo of run ``run_id`` would do with ``changes``, a slice of its changes (a page
    of a large run): the judgement ``undo_run(dry_run=True)`` makes of each, without reading
    the rest of the run, so a preview's cost follows the slice, not the run. Nothing is
    written and no lock is taken. The run-wide notes (a prune's users over the cap again)
    need the whole run: :func:`undo_run` gives them."""
    report, ctx = _begin(store, run_id, changes, now=now, dry_run=True)
    _undo_each(store, sorted(changes, key=lambda c: c.id, reverse=True), ctx, report)
    return report


def _begin(
    store: MemoryStore,
    run_id: str,
    changes: list[Change],
    *,
    now: datetime | None,
    dry_run: bool,
) -> tuple[UndoReport, JobContext]:
    """The undo's report and job context, once the run is known and inside the undo window
    (``changes``: the run's, or the slice of them a preview judges, oldest last)."""
    known = job_runs.job_and_start(store.storage.hot, run_id)
    if not changes and not known:
        raise NotFound(f"no run {run_id!r} in the job runs or the change log")
    started = known[1] if known else min(change.at for change in changes)
    _refuse_when_too_old(store, run_id, started)
    moment = now or store.now()
    report = UndoReport(new_run_id(UNDO_JOB, moment), run_id, dry_run)
    report.undone_job = known[0] if known else _job_of(changes)
    ctx = JobContext(
        store=store,
        job=UNDO_JOB,
        config=store.config.jobs,
        now=moment,
        run_id=report.run_id,
        dry_run=dry_run,
    )
    return report, ctx


def undo_run(
    store: MemoryStore,
    run_id: str,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    lock_wait_seconds: float | None = None,
) -> UndoReport:
    """Revert run ``run_id``'s changes, newest first, as a new run (job ``undo``)."""
    changes = store.changes(run_id=run_id, newest_first=True)
    report, ctx = _begin(store, run_id, changes, now=now, dry_run=dry_run)
    moment = ctx.now
    lock = jobs_lock(store.storage)
    if not dry_run:
        wait = store.config.service.lock_wait_seconds
        lock.acquire(wait if lock_wait_seconds is None else lock_wait_seconds)
    try:
        if not dry_run:
            record_run_start(store, report.run_id, UNDO_JOB, "manual", moment, None)
            reconcile_now(store.storage)
        reverted = _undo_each(store, changes, ctx, report)
        if report.undone_job == "prune":
            report.notes.extend(_prune_notes(store, reverted, dry_run))
        if not dry_run:
            record_run_end(
                store,
                JobResult(
                    job=UNDO_JOB,
                    run_id=report.run_id,
                    trigger="manual",
                    status="ok",
                    dry_run=False,
                    started_at=moment,
                    finished_at=moment,
                    counts={"undo": len(report.reverted)},
                    skipped_entries=len(report.conflicts),
                    stats={
                        "undone_run": run_id,
                        "already_undone": len(report.already_undone),
                        "conflicts": len(report.conflicts),
                    },
                    error=None,
                ),
            )
    finally:
        lock.release()
    return report
