"""Retention: summarized messages leave ``history()`` at once but stay in the database until
``summarized_retention_days`` (0: forever) have passed; then they are deleted, in batches."""

from __future__ import annotations

from datetime import timedelta

from memkeeper.config import SummarizeJob
from memkeeper.maintenance.jobkit import JobContext
from memkeeper.storage import messages


def delete_old_messages(ctx: JobContext) -> None:
    """Retention: delete messages summarized more than ``summarized_retention_days`` ago."""
    config: SummarizeJob = ctx.config  # type: ignore[assignment]
    days = config.summarized_retention_days
    if days <= 0:
        return
    cutoff = ctx.now - timedelta(days=days)
    storage = ctx.store.storage
    if ctx.dry_run:
        with storage.lock:
            ctx.stats["messages_to_delete"] = messages.count_summarized_before(storage.hot, cutoff)
        return
    deleted = 0
    size = ctx.batch_size
    while True:
        batch = messages.delete_summarized_batch(storage, cutoff, size)
        deleted += batch
        if batch < size or ctx.should_stop():
            break
    ctx.stats["messages_deleted"] = deleted
