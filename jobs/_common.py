"""Helpers the job modules share: cutoffs, day counts, retire-in-batches loops."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from memkeeper.clock import days_between, from_db, to_db
from memkeeper.maintenance.jobkit import JobContext
from memkeeper.storage import due
from memkeeper.storage.transitions import Transition


def cutoff(now: datetime, days: float) -> str:
    """The stored-time text of ``now - days``: rows with a time before it are due."""
    return to_db(now - timedelta(days=days))


def days_since(image: dict[str, Any], column: str, now: datetime) -> int:
    """Whole days from an image's time column to ``now``."""
    moment = from_db(image[column])
    assert moment is not None
    return int(days_between(moment, now))


def count(ctx: JobContext, where: str, params: Sequence[Any]) -> int:
    """How many hot rows match (through the same index the selection uses)."""
    return due.count(ctx.store.storage.hot, where, params)


def transition_due(
    ctx: JobContext,
    where: str,
    params: Sequence[Any],
    *,
    order: str,
    make: Callable[[dict[str, Any]], Transition],
) -> None:
    """Walk the hot rows matching ``where`` in batches and apply ``make(row)`` to each.

    Stops between batches when a stop was requested.
    """
    for batch in due.select_batches(
        ctx.store.storage.hot, "memories", where, params, order=order, size=ctx.batch_size
    ):
        transitions = []
        for image in batch:
            try:
                transitions.append(make(image))
            except (OverflowError, TypeError, ValueError, KeyError) as exc:
                # One entry this job cannot process must not fail the run for everyone.
                ctx.skip_unprocessable(
                    f"{type(exc).__name__}: {exc}", memory_id=image.get("id", "?")
                )
        ctx.apply(transitions)
        ctx.advance(len(batch))
        if ctx.should_stop():
            return
