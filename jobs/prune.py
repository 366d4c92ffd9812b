"""prune: the per-user cap on facts (seed 000 §6.3).

Where one (user, namespace) has more than ``max_facts`` active facts, the lowest-scoring ones
go to cold storage with reason ``over_cap`` until the cap holds. The retention score is
documented in :mod:`memkeeper.scoring`; pinned facts are exempt (they count towards the cap
but are never pruned). Each pruned entry's change-log row records its score and components.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memkeeper.config import PruneJob
from memkeeper.maintenance.jobkit import Job, JobContext
from memkeeper.records import Memory
from memkeeper.scoring import rank_key, retention_score
from memkeeper.storage import due
from memkeeper.storage.batches import batched
from memkeeper.storage.transitions import Transition, cold_image

_FACTS_PER_READ = 5_000
"""Active facts read and judged together: the groups over the cap are read (a statement per
200 owners, :func:`~memkeeper.storage.due.active_facts_of`) and their retirements applied in
shared batches up to about this many, so a pass over many small groups costs a few
statements and transactions, not two per group."""


def run(ctx: JobContext) -> None:
    config: PruneJob = ctx.config  # type: ignore[assignment]
    hot = ctx.store.storage.hot
    groups = due.over_cap_groups(hot, config.max_facts)
    ctx.set_total(sum(group["n"] - config.max_facts for group in groups))
    for part in _parts(groups):
        facts = due.active_facts_of(hot, [(group["user_id"], group["namespace"]) for group in part])
        transitions = [
            transition
            for owner_facts in facts.values()
            for transition in _over_cap(owner_facts, ctx, config)
        ]
        for batch in batched(transitions, ctx.batch_size):
            ctx.apply(batch)
            ctx.advance(len(batch))
        if ctx.should_stop():
            return


def _parts(groups: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """``groups`` in runs of about :data:`_FACTS_PER_READ` facts (a group is never split)."""
    part: list[dict[str, Any]] = []
    facts = 0
    for group in groups:
        part.append(group)
        facts += group["n"]
        if facts >= _FACTS_PER_READ:
            yield part
            part, facts = [], 0
    if part:
        yield part


def _over_cap(images: list[dict[str, Any]], ctx: JobContext, config: PruneJob) -> list[Transition]:
    """The retirements that bring one (user, namespace)'s active facts down to the cap."""
    total = len(images)
    weights = ctx.store.config.scoring
    candidates = []
    for image in images:
        if image["pinned"]:
            continue
        memory = Memory.from_image(image)
        score = retention_score(memory, ctx.now, weights)
        candidates.append((rank_key(memory, score), image, score))
    candidates.sort(key=lambda item: item[0])
    doomed = candidates[: total - config.max_facts] if total > config.max_facts else []
    return [
        Transition(
            image["id"],
            image,
            cold_image(image, "over_cap", ctx.now),
            "retire",
            f"{total} active facts > cap {config.max_facts}; score {score.score:.3f} was "
            f"#{rank} lowest",
            details={
                "score": score.to_dict(),
                "rank": rank,
                "active_facts": total,
                "max_facts": config.max_facts,
            },
        )
        for rank, (_, image, score) in enumerate(doomed, start=1)
    ]


JOB = Job("prune", "Per-user cap on active facts: the lowest-scoring go to cold storage", run)
