"""The change log: one row per change to a memory, written in the change's own transaction.

Each row says when, who (the actor: ``api:remember``, ``job:expire``, ``cli:restore``...), in
which run (for jobs), what (the action), to which memory, why (a human reason), from which
source, and the entry's whole image before and after. Those images are what make ``explain``
and ``undo`` work for every job without job-specific code.

A recall is logged too (action ``recall``): it changes the entry's ``last_accessed_at`` and
``access_count``, which decide what expires. So each entry's rows form an unbroken chain —
every row's before image is the previous row's after image — and replaying the log gives the
exact current state. ``explain`` folds runs of recalls into one line.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from sqlite_utils import Database

from memkeeper.records import Change, Memory
from memkeeper.schema import COLD_COLUMNS, MEMORY_COLUMNS

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

_CHANGE_COLUMNS = (
    "at",
    "actor",
    "run_id",
    "action",
    "memory_id",
    "user_id",
    "namespace",
    "reason",
    "source",
    "before",
    "after",
    "details",
)


def image_of(row: sqlite3.Row | dict[str, Any]) -> dict[str, Any]:
    """The canonical image of a stored memory row (hot or cold) as a plain dict."""
    data = dict(row)
    columns = COLD_COLUMNS if data.get("state") == "cold" else MEMORY_COLUMNS
    return {name: data[name] for name in columns}


def _dump(image: dict[str, Any] | None) -> str | None:
    if image is None:
        return None
    return json.dumps(image, ensure_ascii=False, sort_keys=True)


def change_row(
    *,
    at: str,
    actor: str,
    action: str,
    reason: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    run_id: str | None = None,
    source: str | None = None,
    details: dict[str, Any] | None = None,
    memory_id: str | None = None,
    user_id: str | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    """Build one change-log row; memory id, owner and source default to the images'."""
    image = after or before or {}
    return {
        "at": at,
        "actor": actor,
        "run_id": run_id,
        "action": action,
        "memory_id": memory_id or image.get("id"),
        "user_id": user_id if user_id is not None else image.get("user_id"),
        "namespace": namespace if namespace is not None else image.get("namespace"),
        "reason": reason,
        "source": source if source is not None else image.get("source"),
        "before": _dump(before),
        "after": _dump(after),
        "details": json.dumps(details, ensure_ascii=False, sort_keys=True) if details else None,
    }


def insert_changes(db: Database, rows: Iterable[dict[str, Any]]) -> int:
    """Append change rows (the caller holds the transaction). Returns how many."""
    rows = list(rows)
    if rows:
        placeholders = ", ".join(f":{c}" for c in _CHANGE_COLUMNS)
        db.conn.executemany(
            f"INSERT INTO changes ({', '.join(_CHANGE_COLUMNS)}) VALUES ({placeholders})", rows
        )
    return len(rows)


def query_changes(
    db: Database,
    *,
    memory_id: str | None = None,
    run_id: str | None = None,
    user_id: str | None = None,
    namespace: str | None = None,
    action: str | None = None,
    limit: int | None = None,
    newest_first: bool = False,
) -> list[Change]:
    """Change-log rows matching every given filter, oldest first unless asked otherwise."""
    where, params = [], []
    for column, value in (
        ("memory_id", memory_id),
        ("run_id", run_id),
        ("user_id", user_id),
        ("namespace", namespace),
        ("action", action),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    sql = "SELECT * FROM changes"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY id " + ("DESC" if newest_first else "ASC")
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [Change.from_row(row) for row in db.query(sql, params)]


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
