"""Explaining the change log in plain words: one memory's whole life, one change per line.

Uses are not changes: recalls of an active entry are counted per day in the ``uses`` table
(:mod:`memkeeper.storage.uses`), and databases written before that logged each as a
``recall`` row. ``explain`` tells each run of uses between two changes as one line
("recalled 14 times between 2026-03-01 and 2026-04-02, the last at ..."), placed by the
``access_count`` of the changes' images, so a day's uses on both sides of a change are split
exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from memkeeper.clock import from_db
from memkeeper.records import Change, Memory
from memkeeper.storage.uses import UseDay

# Human verbs for each action, used by explain and the run summaries.
ACTION_VERBS = {
    "create": "created",
    "recall": "recalled",
    "reconfirm": "re-confirmed",
    "supersede": "superseded",
    "renew": "renewed",
    "expire": "expired",
    "retire": "retired to cold storage",
    "restore": "restored from cold storage",
    "purge": "purged from cold storage",
    "keep": "kept after review",
    "undo": "undone",
    "forget": "erased",
    "redact": "redacted",
    "revive": "current again",
    "summarize": "summarized",
    "session_failed": "not summarized",
    "park": "parked",
    "unpark": "released",
    "import": "imported",
    "merge": "merged",
}


def _quote(text: str | None, width: int = 60) -> str:
    if text is None:
        return "—"
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= width else flat[: width - 1] + "…")


def describe_change(change: Change) -> str:
    """One line telling what a change did, for explain and log listings."""
    verb = ACTION_VERBS.get(change.action, change.action)
    when = f"{change.at:%Y-%m-%d %H:%M} UTC"
    who = change.actor
    if change.run_id:
        who += f", run {change.run_id}"
    what = change.reason
    after = change.after or {}
    before = change.before or {}
    if change.action == "retire" and after.get("cold_reason"):
        verb = f"{verb} ({after['cold_reason']})"
    if change.action == "create" and after:
        what = (
            f"{what}; value {_quote(after.get('value'))}, confidence {after.get('confidence')}"
        ).lstrip("; ")
    elif (
        change.action in ("reconfirm", "merge")
        and before
        and after
        and before.get("confidence") != after.get("confidence")
    ):
        what += f" (confidence {before.get('confidence')} → {after.get('confidence')})"
    redacted = (change.details or {}).get("redacted_at")
    if redacted and change.action != "redact":
        what += f" (redacted by a forget on {redacted[:10]}: an erased value is shown as [erased])"
    source = f", source {_quote(change.source, 40)}" if change.source else ""
    return f"{when}  {verb}: {what} — {who}{source}"


class _Uses:
    """The entry's counted uses, handed out in time order to the gaps between changes."""

    def __init__(self, days: Sequence[UseDay]) -> None:
        self.days = [[day.count, day] for day in sorted(days, key=lambda d: d.first_at)]

    def take(self, count: int | None) -> _Run | None:
        """The next ``count`` uses (None: all that are left) as a run; None if there are none.

        The run's first time is None when it starts inside a day's row (its time is not kept).
        """
        run = None
        while self.days and (count is None or run is None or run.count < count):
            left, day = self.days[0]
            step = left if count is None else min(left, count - (run.count if run else 0))
            if run is None:
                first = day.first_at if left == day.count else None
                run = _Run(0, day.first_at.date(), first, day.last_at)
            run.count += step
            run.last = day.last_at
            if step == left:
                self.days.pop(0)
            else:
                self.days[0][0] = left - step
        return run


@dataclass
class _Run:
    """Uses between two changes: how many, on which first day (and time, when known), the last."""

    count: int
    first_day: date
    first: datetime | None
    last: datetime

    def line(self) -> str:
        if self.count == 1:
            return f"{self.last:%Y-%m-%d %H:%M} UTC  recalled once"
        start = self.first or self.last
        what = f"{start:%Y-%m-%d %H:%M} UTC  recalled {self.count} times"
        if self.first_day == self.last.date():
            return f"{what} that day, the last at {self.last:%H:%M} UTC"
        return (
            f"{what} between {self.first_day:%Y-%m-%d} and {self.last:%Y-%m-%d},"
            f" the last at {self.last:%Y-%m-%d %H:%M} UTC"
        )

    def then(self, other: _Run) -> _Run:
        """These uses and those of ``other``, which came after them, as one run."""
        self.count += other.count
        self.last = max(self.last, other.last)
        return self


def _join(run: _Run | None, other: _Run | None) -> _Run | None:
    if run is None or other is None:
        return run or other
    return run.then(other)


def _uses_before(previous: dict[str, Any] | None, change: Change, pool: _Uses) -> _Run | None:
    """The counted uses between the previous change and ``change``, from their images."""
    before = change.before
    if previous is None or before is None or "access_count" not in before:
        return None
    gap = int(before["access_count"]) - int(previous.get("access_count", before["access_count"]))
    accessed = from_db(before.get("last_accessed_at"))
    if gap <= 0 or accessed is None:
        return None
    run = pool.take(gap) or _Run(gap, accessed.date(), None, accessed)
    run.count, run.last = gap, accessed
    return run


def _said(change: Change, quotes: Mapping[int, str]) -> list[str]:
    """The user's sentences an extracted value came from (source ``session:<id>``), each
    message still held quoted under its change."""
    if not (change.source or "").startswith("session:") or change.action == "supersede":
        return []
    ids = change.details.get("message_ids") or []
    return [f"  said in message #{i}: {quotes[i]}" for i in ids if i in quotes]


def _history_lines(
    changes: Sequence[Change], uses: Sequence[UseDay], quotes: Mapping[int, str] | None = None
) -> list[str]:
    """Describe changes in order, with one line for each run of uses between two of them.

    A logged image's ``access_count`` includes every use before it, so the counted uses
    between two changes are the rise from one change's after image to the next's before
    image, the last of them at the before image's ``last_accessed_at``; what is left after
    the last change are the uses since. ``recall`` rows (databases from before the ``uses``
    table) are uses too.
    """
    pool = _Uses(uses)
    lines: list[str] = []
    run: _Run | None = None
    previous: dict[str, Any] | None = None
    for change in changes:
        run = _join(run, _uses_before(previous, change, pool))
        if change.action == "recall":
            run = _join(run, _Run(1, change.at.date(), change.at, change.at))
        else:
            if run is not None:
                lines.append(run.line())
                run = None
            lines.append(describe_change(change))
            lines.extend(_said(change, quotes or {}))
        previous = change.after
    run = _join(run, pool.take(None))
    if run is not None:
        lines.append(run.line())
    return lines


def explain(
    memory: Memory | None,
    changes: Sequence[Change],
    memory_id: str,
    uses: Sequence[UseDay] = (),
    quotes: Mapping[int, str] | None = None,
) -> str:
    """One memory's whole life in plain words: what it is now and every change, oldest first.

    ``uses`` are the entry's counted recalls (:func:`memkeeper.storage.uses.uses_of`);
    ``quotes`` the messages (by id, one line each) that extracted values came from.
    """
    lines = []
    if memory is not None:
        label = memory.kind if memory.key is None else f"{memory.kind} {memory.key!r}"
        lines.append(
            f"Memory {memory.id} — {label} of user {memory.user_id!r}"
            + (f" in namespace {memory.namespace!r}" if memory.namespace else "")
        )
        state = memory.state + (f" ({memory.cold_reason})" if memory.cold_reason else "")
        pinned = ", pinned" if memory.pinned else ""
        if memory.access_count:
            times = "once" if memory.access_count == 1 else f"{memory.access_count} times"
            use = f"last used {memory.last_used_at:%Y-%m-%d %H:%M} UTC; used {times}"
        else:  # its TTL counts from when it was stated or confirmed last
            use = f"never recalled; last confirmed {memory.last_used_at:%Y-%m-%d %H:%M} UTC"
        lines.append(
            f"Now: {state}{pinned}; value {_quote(memory.value)}; confidence {memory.confidence}; "
            + use
        )
    elif changes and changes[-1].action == "forget":
        lines.append(f"Memory {memory_id} — erased; its content is gone by design")
    else:
        lines.append(f"Memory {memory_id} — not found")
    if changes or uses:
        lines.append("History:")
        lines.extend(f"  {line}" for line in _history_lines(changes, uses, quotes))
    else:
        lines.append("History: no changes recorded")
    return "\n".join(lines)
