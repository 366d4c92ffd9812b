"""What the pages show, read through the store's library API (and, for the aggregates only a
page needs, :mod:`memkeeper.storage.ui_reads`). Plain data: the pages render it, and each
page's ``?format=json`` answers it as it is, so the page and its JSON never disagree.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from memkeeper.clock import to_db
from memkeeper.records import KINDS, STATES, Change, JobRun, Memory
from memkeeper.storage import ui_reads
from memkeeper.storage.changelog import image_of

CHART_DAYS = 90

SERIES = (
    "created",
    "recalled",
    "re-confirmed",
    "expired to review",
    "retired",
    "demoted",
    "pruned",
    "merged",
    "summarized",
    "forgotten",
    "other",
)
"""The chart's series, in stacking order."""

_BY_ACTION = {
    "create": "created",
    "import": "created",
    "recall": "recalled",
    "reconfirm": "re-confirmed",
    "renew": "re-confirmed",
    "keep": "re-confirmed",
    "expire": "expired to review",
    "merge": "merged",
    "supersede": "merged",
    "summarize": "summarized",
    "forget": "forgotten",
    "purge": "retired",
}
_BY_RETIRING_JOB = {"job:demote": "demoted", "job:prune": "pruned"}


def series_of(action: str, actor: str) -> str:
    """Which series of the chart a change counts in (a retirement by the job that made it:
    demote's are demotions, prune's prunings, the rest retirements)."""
    if action == "retire":
        return _BY_RETIRING_JOB.get(actor, "retired")
    return _BY_ACTION.get(action, "other")


def status_figures(store: Any) -> dict[str, Any]:
    """What ``memkeeper status --json`` says, from the same library calls: counts, messages,
    episodes, files, warnings, each job's last and next run, the service."""
    from memkeeper.service.schedule_info import status_report

    return status_report(store)


def chart(store: Any, now: datetime, days: int = CHART_DAYS) -> dict[str, Any]:
    """Changes per UTC day by series over the last ``days`` days (recalls from the uses)."""
    first = (now - timedelta(days=days - 1)).date()
    day_list = [(first + timedelta(days=n)).isoformat() for n in range(days)]
    series: dict[str, dict[str, int]] = {name: defaultdict(int) for name in SERIES}
    since = datetime(first.year, first.month, first.day, tzinfo=now.tzinfo)
    with store.storage.lock:
        changes = ui_reads.changes_per_day(store.storage.hot, to_db(since))
        uses = ui_reads.uses_per_day(store.storage.hot, first.isoformat())
    for row in changes:
        if row["day"] <= day_list[-1]:
            series[series_of(row["action"], row["actor"])][row["day"]] += int(row["n"])
    for row in uses:
        if row["day"] <= day_list[-1]:
            series["recalled"][row["day"]] += int(row["n"])
    return {"days": day_list, "series": {k: dict(v) for k, v in series.items() if v}}


def operator_warnings(figures: dict[str, Any], search: dict[str, Any]) -> list[str]:
    """What needs an operator: the store's size warnings, failed last runs, sessions left
    for the next run (an LLM budget used up), search that cannot work by meaning."""
    found = list(figures["warnings"])
    for job in figures["jobs"]:
        last = job["last_run"]
        if last and last["status"] not in ("ok", "skipped", "running"):
            found.append(f"the last {job['job']} run {last['status']}: {last.get('error') or ''}")
        stats = ((last or {}).get("counts") or {}).get("stats") or {}
        if stats.get("sessions_skipped"):
            found.append(
                f"the last {job['job']} run left {stats['sessions_skipped']} session(s) for "
                "the next run: its LLM budget was used up, the endpoint was unavailable, or it "
                "was stopped"
            )
    if search.get("keyword_only") and search.get("entries"):
        found.append(f"search is keyword-only: {search['keyword_only']}")
    return found


def overview(store: Any) -> dict[str, Any]:
    """``status``'s figures (its ``search`` says by meaning or keyword-only, and why), the
    chart, and the warnings for an operator."""
    figures = status_figures(store)
    figures["chart"] = chart(store, store.now())
    figures["operator_warnings"] = operator_warnings(figures, figures.get("search") or {})
    return figures


def runs(store: Any, *, job: str | None, status: str | None, page: int, per_page: int) -> Any:
    """One page of job runs, newest first, and how many there are."""
    filters = [(c, v) for c, v in (("job", job), ("status", status)) if v]
    with store.storage.lock:
        rows = ui_reads.runs_page(
            store.storage.hot, filters, limit=per_page, offset=(page - 1) * per_page
        )
        total = ui_reads.runs_total(store.storage.hot, filters)
    return [JobRun.from_row(row) for row in rows], total


def run(store: Any, run_id: str) -> JobRun | None:
    with store.storage.lock:
        row = ui_reads.run_row(store.storage.hot, run_id)
    return JobRun.from_row(row) if row else None


def run_duration(run: JobRun) -> float | None:
    if run.finished_at is None:
        return None
    return (run.finished_at - run.started_at).total_seconds()


def memories(
    store: Any,
    user_id: str,
    *,
    namespace: str | None,
    kind: str | None,
    state: str | None,
    page: int,
    per_page: int,
) -> tuple[list[Memory], int]:
    """One page of a user's memories, hot newest first then cold, and how many match."""
    owner = [
        (c, v) for c, v in (("user_id", user_id), ("namespace", namespace), ("kind", kind)) if v
    ]
    if namespace == "":
        owner.append(("namespace", ""))
    offset, found = (page - 1) * per_page, []
    storage = store.storage
    with storage.lock:
        hot_filters = [*owner, *([("state", state)] if state else [])]
        hot_total = (
            0 if state == "cold" else ui_reads.memories_total(storage.hot, "memories", hot_filters)
        )
        cold = storage.cold(create=False)
        cold_total = (
            ui_reads.memories_total(cold, "cold_memories", owner)
            if cold is not None and state in (None, "cold")
            else 0
        )
        if offset < hot_total:
            found += ui_reads.memories_page(
                storage.hot, "memories", hot_filters, limit=per_page, offset=offset
            )
        left = per_page - len(found)
        if left and cold_total and offset + len(found) >= hot_total:
            found += ui_reads.memories_page(
                cold, "cold_memories", owner, limit=left, offset=max(0, offset - hot_total)
            )
    return [Memory.from_image(image_of(row)) for row in found], hot_total + cold_total


def namespaces(store: Any, user_id: str) -> list[str]:
    storage = store.storage
    with storage.lock:
        names = set(ui_reads.namespaces_of(storage.hot, "memories", user_id))
        cold = storage.cold(create=False)
        if cold is not None:
            names |= set(ui_reads.namespaces_of(cold, "cold_memories", user_id))
    return sorted(names)


def users(store: Any, *, page: int, per_page: int) -> list[dict[str, Any]]:
    """A page of the users with memories (by id): counts by state, and the most active facts
    in one namespace against ``[jobs.prune] max_facts``."""
    storage = store.storage
    with storage.lock:
        ids = ui_reads.users_page(storage.hot, limit=per_page, offset=(page - 1) * per_page)
        hot = ui_reads.counts_of_users(storage.hot, ids)
        facts = ui_reads.active_facts_of_users(storage.hot, ids)
        cold = storage.cold(create=False)
        cold_rows = ui_reads.cold_counts_of_users(cold, ids) if cold is not None else []
    found = {
        user_id: {
            "user_id": user_id,
            "states": dict.fromkeys(STATES, 0),
            "kinds": dict.fromkeys(KINDS, 0),
            "most_facts": 0,
            "most_facts_namespace": None,
        }
        for user_id in ids
    }
    for row in hot:
        entry = found[row["user_id"]]
        entry["states"][row["state"]] = entry["states"].get(row["state"], 0) + int(row["n"])
        entry["kinds"][row["kind"]] = entry["kinds"].get(row["kind"], 0) + int(row["n"])
    for row in cold_rows:
        found[row["user_id"]]["states"]["cold"] += int(row["n"])
    for row in facts:
        entry = found[row["user_id"]]
        if int(row["n"]) > entry["most_facts"]:
            entry["most_facts"], entry["most_facts_namespace"] = int(row["n"]), row["namespace"]
    cap = store.config.jobs.prune.max_facts
    for entry in found.values():
        entry["total"] = sum(entry["states"].values())
        entry["cap"] = cap
    return [found[user_id] for user_id in ids]


def pending(
    store: Any, user_id: str | None, *, page: int, per_page: int
) -> tuple[list[Memory], int]:
    """A page of the entries pending review (one user's, if given), the longest waiting
    first, and how many there are."""
    filters = [("state", "pending_review"), *([("user_id", user_id)] if user_id else [])]
    with store.storage.lock:
        total = ui_reads.memories_total(store.storage.hot, "memories", filters)
        rows = ui_reads.pending_page(
            store.storage.hot, user_id, limit=per_page, offset=(page - 1) * per_page
        )
    return [Memory.from_image(image_of(row)) for row in rows], total


def run_changes(store: Any, run_id: str, *, page: int, per_page: int) -> tuple[list[Change], int]:
    """A page of one run's changes, oldest first, and how many it has."""
    with store.storage.lock:
        total = ui_reads.run_changes_total(store.storage.hot, run_id)
        rows = ui_reads.run_changes_page(
            store.storage.hot, run_id, limit=per_page, offset=(page - 1) * per_page
        )
    return [Change.from_row(row) for row in rows], total


def erasures(store: Any, *, user_id: str | None, limit: int) -> list[dict[str, Any]]:
    """Past erasures, newest first: when, by whom, what scope, how much; never a value (the
    change log's ``forget`` rows hold ids and counts only)."""
    rows = store.changes(action="forget", user_id=user_id, limit=limit, newest_first=True)
    return [
        {
            "id": change.id,
            "at": change.at.isoformat(),
            "actor": change.actor,
            "user_id": change.user_id,
            "namespace": change.namespace,
            "reason": change.reason,
            "erased": change.details.get("erased", {}),
            "memory_ids": change.details.get("memory_ids", []),
        }
        for change in rows
    ]


def forget_preview(
    store: Any, *, user_id: str, namespace: str | None, key: str | None
) -> dict[str, Any]:
    """What a forget would reach, as ``forget`` (a key), ``forget-namespace`` or
    ``forget-user`` would erase it: the entries by kind with their ids (hot and cold), and
    for a namespace or a whole user their messages and episodes. Reads only."""
    if key is not None:
        found = [m for m in store.list_memories(user_id, namespace=namespace or "") if m.key == key]
    else:
        found = store.list_memories(user_id, namespace=namespace)
    by_kind: dict[str, list[str]] = {}
    for memory in found:
        by_kind.setdefault(memory.kind, []).append(memory.id)
    preview: dict[str, Any] = {
        "user_id": user_id,
        "namespace": namespace,
        "key": key,
        "memories": len(found),
        "by_kind": {kind: sorted(ids) for kind, ids in sorted(by_kind.items())},
    }
    if key is None:
        with store.storage.lock:
            for table in ("messages", "episodes"):
                preview[table] = ui_reads.owner_rows(store.storage.hot, table, user_id, namespace)
    elif found:  # what the forget reaches beyond the key: the store's own dry run
        reach = store.forget(user_id, key, namespace=namespace or "", dry_run=True)
        preview["derived"] = [e for e in reach["erase"] if "why" in e]
        preview["redact"] = reach["redact"]
        preview["rebuild"] = reach["rebuild"]
    return preview
