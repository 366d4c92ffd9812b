"""The dry run: which sessions are due and how many messages each would summarize.

It reads only: no LLM call, no write. Each due session is reported as the changes a real run
would make (a new summary note, and the supersession of the previous one).
"""

from __future__ import annotations

from memkeeper.config import SummarizeJob
from memkeeper.maintenance.jobkit import JobContext, PlannedChange
from memkeeper.summarize.parking import without_parked
from memkeeper.summarize.session import DueSession, oldest_unsummarized_ids, summary_key


def preview(ctx: JobContext, due: list[DueSession]) -> None:
    """Dry run: which sessions are due and how many messages each would summarize."""
    config: SummarizeJob = ctx.config  # type: ignore[assignment]
    storage = ctx.store.storage
    total = 0
    everything = len(due)
    due = without_parked(ctx, due)
    for session in due:
        count = session.unsummarized - config.keep_recent
        ids, previous = oldest_unsummarized_ids(storage, session, count)
        total += len(ids)
        reason = (
            f"{len(ids)} of {session.unsummarized} unsummarized messages (ids {ids[0]}-"
            f"{ids[-1]}) of session {session.session_id!r} into a new summary"
        )
        planned = [("(new)", "summarize", reason)]
        if previous is not None:
            planned.insert(0, (previous["id"], "supersede", "folded into the new summary"))
        for memory_id, action, why in planned:
            ctx.counts[action] += 1
            if len(ctx.planned) < ctx.keep_planned:
                ctx.planned.append(
                    PlannedChange(
                        memory_id=memory_id,
                        user_id=session.user_id,
                        namespace=session.namespace,
                        kind="note",
                        key=summary_key(session.session_id),
                        action=action,
                        reason=why,
                        label=action,
                    )
                )
        ctx.advance(1)
    ctx.stats["sessions_due"] = everything
    ctx.stats["messages_to_summarize"] = total
