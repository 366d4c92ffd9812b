"""Explaining the change log in plain words: one memory's whole life, one change per line.

``explain`` folds runs of recalls into one line.
"""

from __future__ import annotations

from collections.abc import Sequence

from memkeeper.records import Change, Memory

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
    "keep": "kept after review",
    "undo": "undone",
    "forget": "erased",
    "summarize": "summarized",
    "import": "imported",
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
        change.action == "reconfirm"
        and before
        and after
        and before.get("confidence") != after.get("confidence")
    ):
        what += f" (confidence {before.get('confidence')} → {after.get('confidence')})"
    source = f", source {_quote(change.source, 40)}" if change.source else ""
    return f"{when}  {verb}: {what} — {who}{source}"


def _history_lines(changes: Sequence[Change]) -> list[str]:
    """Describe changes, folding each run of consecutive recalls into one line."""
    lines: list[str] = []
    index = 0
    while index < len(changes):
        change = changes[index]
        end = index
        while (
            change.action == "recall"
            and end + 1 < len(changes)
            and changes[end + 1].action == "recall"
        ):
            end += 1
        if end > index:
            last = changes[end]
            lines.append(
                f"{change.at:%Y-%m-%d %H:%M} UTC  recalled {end - index + 1} times, the last on "
                f"{last.at:%Y-%m-%d %H:%M} UTC — {change.actor}"
            )
        else:
            lines.append(describe_change(change))
        index = end + 1
    return lines


def explain(memory: Memory | None, changes: Sequence[Change], memory_id: str) -> str:
    """One memory's whole life in plain words: what it is now and every change, oldest first."""
    lines = []
    if memory is not None:
        label = memory.kind if memory.key is None else f"{memory.kind} {memory.key!r}"
        lines.append(
            f"Memory {memory.id} — {label} of user {memory.user_id!r}"
            + (f" in namespace {memory.namespace!r}" if memory.namespace else "")
        )
        state = memory.state + (f" ({memory.cold_reason})" if memory.cold_reason else "")
        pinned = ", pinned" if memory.pinned else ""
        lines.append(
            f"Now: {state}{pinned}; value {_quote(memory.value)}; confidence {memory.confidence}; "
            f"last used {memory.last_used_at:%Y-%m-%d %H:%M} UTC; used {memory.access_count} times"
        )
    elif changes and changes[-1].action == "forget":
        lines.append(f"Memory {memory_id} — erased; its content is gone by design")
    else:
        lines.append(f"Memory {memory_id} — not found")
    if changes:
        lines.append("History:")
        lines.extend(f"  {line}" for line in _history_lines(changes))
    else:
        lines.append("History: no changes recorded")
    return "\n".join(lines)
