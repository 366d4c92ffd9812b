"""Retention: summarized messages leave ``history()`` at once but stay in the database until
``summarized_retention_days`` (0: forever) have passed; then they are deleted, in batches."""

from __future__ import annotations

from datetime import timedelta

from memkeeper.clock import to_db
from memkeeper.config import SummarizeJob
from memkeeper.maintenance.jobkit import JobContext
from memkeeper.storage.sqlite import immediate_transaction


def delete_old_messages(ctx: JobContext) -> None:
    """Retention: delete messages summarized more than ``summarized_retention_days`` ago."""
    config: SummarizeJob = ctx.config  # type: ignore[assignment]
    days = config.summarized_retention_days
    if days <= 0:
        return
    cutoff = to_db(ctx.now - timedelta(days=days))
    storage = ctx.store.storage
    where = "summarized_at IS NOT NULL AND summarized_at < ?"
    if ctx.dry_run:
        with storage.lock:
            row = storage.hot.execute(f"SELECT count(*) FROM messages WHERE {where}", [cutoff])
            ctx.stats["messages_to_delete"] = row.fetchone()[0]
        return
    deleted = 0
    size = ctx.batch_size
    while True:
        with storage.lock, immediate_transaction(storage.hot):
            cursor = storage.hot.conn.execute(
                f"DELETE FROM messages WHERE id IN (SELECT id FROM messages WHERE {where}"
                " ORDER BY summarized_at LIMIT ?)",
                [cutoff, size],
            )
        deleted += cursor.rowcount
        if cursor.rowcount < size or ctx.should_stop():
            break
    ctx.stats["messages_deleted"] = deleted
