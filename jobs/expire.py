"""expire: TTL expiry with a review period (seed 000 §6.3, seed 003 §3.4).

An active entry unused for longer than its kind's TTL — counted from the latest of created,
re-confirmed and recalled — becomes ``pending_review`` (not deleted). A pending-review entry
still unused ``review_grace_days`` later is retired to cold storage (reason ``expired``).
Recalling or re-confirming it in between makes it active again (that happens in the store).
Pinned entries never expire; an entry's own ``ttl_days`` overrides its kind's TTL.
"""

from __future__ import annotations

from typing import Any

from memkeeper.jobs._common import count, cutoff, days_since, transition_due

from memkeeper.config import ExpireJob
from memkeeper.maintenance.jobkit import Job, JobContext
from memkeeper.storage import due
from memkeeper.storage.transitions import Transition, cold_image, hot_image

# ``updated_at < ?`` (the same cutoff) is implied by ``last_used_at < ?``, the later of the
# write and the last access; it lets an index of write time (PostgreSQL's, which holds no use
# column: storage/postgres/ddl.py, step 0005) bound the selection.
_ACTIVE_BY_KIND = (
    "state = 'active' AND kind = ? AND updated_at < ? AND last_used_at < ? AND pinned = 0"
    " AND ttl_days IS NULL"
)
_ACTIVE_OVERRIDE = (
    "state = 'active' AND ttl_days = ? AND updated_at < ? AND last_used_at < ? AND pinned = 0"
)
_REVIEW_OVER = "state = 'pending_review' AND state_since < ? AND pinned = 0"


def run(ctx: JobContext) -> None:
    config: ExpireJob = ctx.config  # type: ignore[assignment]
    now = ctx.now
    grace_cutoff = cutoff(now, config.review_grace_days)
    plans: list[tuple[str, list[Any], Any]] = [
        (_REVIEW_OVER, [grace_cutoff], lambda image: _retire(image, ctx, config))
    ]
    for kind in ("fact", "preference", "note"):
        ttl = getattr(config.ttl_days, kind)
        due_before = cutoff(now, ttl)
        plans.append(
            (_ACTIVE_BY_KIND, [kind, due_before, due_before], _expirer(ctx, ttl, f"({kind})"))
        )
    # Every TTL some entry overrides (the state is checked by the selection itself: asking
    # for it here made SQLite read every active row instead of the small TTL index).
    for ttl in due.ttl_overrides(ctx.store.storage.hot):
        try:
            due_before = cutoff(now, ttl)
        except (OverflowError, TypeError, ValueError):
            # Written before TTLs were bounded, or by hand: no date is that far back, so
            # nothing with this TTL is due. Skip it, say so, and go on with everyone else.
            ctx.skip_unprocessable(f"ttl_days {str(ttl)[:24]!s} is out of range", ttl_days=ttl)
            continue
        plans.append(
            (_ACTIVE_OVERRIDE, [ttl, due_before, due_before], _expirer(ctx, ttl, "(its own TTL)"))
        )
    ctx.set_total(lambda: sum(count(ctx, where, params) for where, params, _ in plans))
    for where, params, make in plans:
        order = "state_since" if where is _REVIEW_OVER else "last_used_at"
        transition_due(ctx, where, params, order=order, make=make)
        if ctx.should_stop():
            return


def _expirer(ctx: JobContext, ttl: int, which: str):
    def make(image: dict[str, Any]) -> Transition:
        unused = days_since(image, "last_used_at", ctx.now)
        return Transition(
            image["id"],
            image,
            hot_image(image, "pending_review", ctx.now),
            "expire",
            f"unused {unused} days ≥ TTL {ttl} days {which}; pending review",
        )

    return make


def _retire(image: dict[str, Any], ctx: JobContext, config: ExpireJob) -> Transition:
    pending = days_since(image, "state_since", ctx.now)
    return Transition(
        image["id"],
        image,
        cold_image(image, "expired", ctx.now),
        "retire",
        f"still unused {pending} days after review began ≥ grace {config.review_grace_days} days",
    )


JOB = Job("expire", "TTL expiry: unused entries go to review, then to cold storage", run)
