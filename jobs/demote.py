"""demote: monthly demotion of low-confidence entries nobody uses (seed 003 §3.4).

An entry (active or pending review) with confidence below ``min_confidence`` and unused for
more than ``unused_days`` moves to cold storage with reason ``low_confidence``: out of the hot
path, still restorable. Pinned entries are never demoted.
"""

from __future__ import annotations

from typing import Any

from memkeeper.jobs._common import count, cutoff, days_since, transition_due

from memkeeper.config import DemoteJob
from memkeeper.maintenance.jobkit import Job, JobContext
from memkeeper.storage.transitions import Transition, cold_image

# ``updated_at < ?`` (the same cutoff) is implied by ``last_used_at < ?``, the later of the
# write and the last access; it lets an index of write time (PostgreSQL's, which holds no use
# column: storage/postgres/ddl.py, step 0005) bound the selection.
_WHERE = (
    "state = ? AND kind = ? AND updated_at < ? AND last_used_at < ? AND confidence < ?"
    " AND pinned = 0"
)


def run(ctx: JobContext) -> None:
    config: DemoteJob = ctx.config  # type: ignore[assignment]
    unused_cutoff = cutoff(ctx.now, config.unused_days)
    scopes = [
        [state, kind, unused_cutoff, unused_cutoff, config.min_confidence]
        for state in ("active", "pending_review")
        for kind in ("fact", "preference", "note")
    ]
    ctx.set_total(lambda: sum(count(ctx, _WHERE, params) for params in scopes))

    def make(image: dict[str, Any]) -> Transition:
        unused = days_since(image, "last_used_at", ctx.now)
        return Transition(
            image["id"],
            image,
            cold_image(image, "low_confidence", ctx.now),
            "retire",
            f"confidence {image['confidence']:g} < {config.min_confidence:g} and unused "
            f"{unused} days ≥ {config.unused_days} days",
        )

    for params in scopes:
        transition_due(ctx, _WHERE, params, order="last_used_at", make=make)
        if ctx.should_stop():
            return


JOB = Job("demote", "Monthly: low-confidence entries nobody used go to cold storage", run)
