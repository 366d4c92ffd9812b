"""settle: the end of the grey period of superseded values (seed 003 §3.2, §3.4).

When a new value replaces an old one, the old one is kept as ``superseded`` for
``grey_days``. Re-asserting it in that time makes it current again (in the store). Once the
grey period is over, it moves to cold storage with reason ``superseded``.
"""

from __future__ import annotations

from typing import Any

from memkeeper.jobs._common import count, cutoff, days_since, transition_due

from memkeeper.config import SettleJob
from memkeeper.maintenance.jobkit import Job, JobContext
from memkeeper.storage.transitions import Transition, cold_image

_WHERE = "state = 'superseded' AND state_since < ?"


def run(ctx: JobContext) -> None:
    config: SettleJob = ctx.config  # type: ignore[assignment]
    params = [cutoff(ctx.now, config.grey_days)]
    ctx.set_total(lambda: count(ctx, _WHERE, params))

    def make(image: dict[str, Any]) -> Transition:
        age = days_since(image, "state_since", ctx.now)
        return Transition(
            image["id"],
            image,
            cold_image(image, "superseded", ctx.now),
            "retire",
            f"superseded {age} days ago ≥ grey period {config.grey_days} days",
        )

    transition_due(ctx, _WHERE, params, order="state_since", make=make)


JOB = Job("settle", "Superseded values past their grey period go to cold storage", run)
