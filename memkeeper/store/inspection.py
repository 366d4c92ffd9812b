"""Inspecting the store: the change log, one memory's life story, job runs and a status.

Read-only views for operators (``memkeeper log``, ``explain``, ``runs``, ``status``). The
change log is queried through :mod:`memkeeper.audit.log` and, with the entry's counted uses
(:mod:`memkeeper.storage.uses`), told as a story by :mod:`memkeeper.audit.explain`; nothing
here changes a row.
"""

from __future__ import annotations

from typing import Any

from memkeeper.audit.explain import explain as render_explanation
from memkeeper.audit.log import query_changes
from memkeeper.errors import NotFound
from memkeeper.records import Change, JobRun
from memkeeper.storage import conversation_rows, memory_reads
from memkeeper.storage import job_runs as stored_runs
from memkeeper.storage.forgetting import index_purge_pending_since
from memkeeper.storage.uses import uses_of
from memkeeper.store.core import StoreCore
from memkeeper.store.listing import get
from memkeeper.store.sizes import size_warnings, storage_status
from memkeeper.store.vector_source import search_state


def changes(
    core: StoreCore,
    *,
    memory_id: str | None,
    run_id: str | None,
    user_id: str | None,
    namespace: str | None,
    action: str | None,
    limit: int | None,
    newest_first: bool,
) -> list[Change]:
    """Change-log rows matching every given filter (None = any)."""
    filters = {
        "memory_id": memory_id,
        "run_id": run_id,
        "user_id": user_id,
        "namespace": namespace,
        "action": action,
    }
    core.lookup(*filters.items())
    with core.storage.lock:
        return query_changes(
            core.storage.hot,
            filters,
            limit=core.limit(limit) if limit is not None else None,
            newest_first=newest_first,
        )


def explain(core: StoreCore, memory_id: str) -> str:
    """One memory's whole life in plain words; for an erased one, its tombstone."""
    memory = get(core, memory_id)
    found = changes(
        core,
        memory_id=memory_id,
        run_id=None,
        user_id=None,
        namespace=None,
        action=None,
        limit=None,
        newest_first=False,
    )
    if memory is None and not found:
        with core.storage.lock:
            tombstones = [
                change
                for change in query_changes(core.storage.hot, {"action": "forget"})
                if memory_id in change.details.get("memory_ids", [])
            ]
        if not tombstones:
            raise NotFound(f"no memory with id {memory_id!r}, and none was ever erased")
        found = tombstones
    with core.storage.lock:
        uses = uses_of(core.storage.hot, memory_id)
        quotes = source_messages(core, found)
    return render_explanation(memory, found, memory_id, uses, quotes)


def source_messages(core: StoreCore, found: list[Change]) -> dict[int, str]:
    """The messages extracted values came from (``session:<id>`` sources), still held, as
    one line each: ``user, 2026-03-01 09:00: '...'``."""
    ids = sorted(
        {
            int(i)
            for change in found
            if (change.source or "").startswith("session:")
            for i in change.details.get("message_ids") or []
        }
    )
    quotes = {}
    with core.storage.lock:
        rows = conversation_rows.by_ids(core.storage.hot, ids)
    for row in rows:
        text = " ".join(row["content"].split())
        text = text if len(text) <= 160 else text[:159] + "…"
        when = row["created_at"][:16].replace("T", " ")
        quotes[row["id"]] = f"{row['role']}, {when} UTC: {text!r}"
    return quotes


def job_runs(core: StoreCore, *, job: str | None, limit: int) -> list[JobRun]:
    """Recent job runs, newest first."""
    with core.storage.lock:
        rows = stored_runs.recent(core.storage.hot, job, core.limit(limit))
    return [JobRun.from_row(row) for row in rows]


def status(core: StoreCore) -> dict[str, Any]:
    """Counts per state and kind, the files (sizes, pages, each table's rows and bytes),
    warnings about size (``[status]``), and the last run of each job; on PostgreSQL also
    ``database`` (server and schema versions, the masked URL; ``files`` is its tables);
    ``search``: by meaning or keyword-only, and why
    (:func:`memkeeper.store.vector_source.search_state`)."""
    storage = core.storage
    with storage.lock:
        counts = memory_reads.counts_by_state_and_kind(storage.hot, storage.cold(create=False))
        messages, unsummarized, episodes = conversation_rows.counts(storage.hot)
        last_runs = {
            row["job"]: JobRun.from_row(row) for row in stored_runs.last_of_each_job(storage.hot)
        }
        database, files = storage_status(storage)
        purge_since = index_purge_pending_since(storage)
        live = sum(sum(counts.get(state, {}).values()) for state in ("active", "pending_review"))
        search = search_state(core.config, storage.hot, live)
    warnings = size_warnings(files, core.config.status)
    if purge_since is not None:
        warnings.append(
            f"the keyword index still holds trigrams of texts erased since {purge_since}: "
            "the nightly settle run rewrites it (now: memkeeper run-once --job settle)"
        )
    result = {
        "counts": counts,
        "messages": {"total": messages, "unsummarized": unsummarized},
        "episodes": episodes,
        "files": files,
        "warnings": warnings,
        "last_runs": last_runs,
        "search": search,
    }
    if database is not None:  # PostgreSQL: the server, the schema and its version
        result["database"] = database
    return result
