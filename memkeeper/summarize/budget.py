"""A run's budget of LLM calls and tokens, and how a session's plan is fitted into it.

The caps come from ``[jobs.summarize]`` (``max_calls_per_run``, ``max_tokens_per_run`` and
their per-user twins); :class:`~memkeeper.llm.usage.Budget` keeps the books. A session first
reserves its plan's upper bound, then settles with what its calls actually used; a session
that does not fit waits for the next run.
"""

from __future__ import annotations

from collections.abc import Sequence

from memkeeper.config import SummarizeJob
from memkeeper.llm.usage import Budget
from memkeeper.summarize.plan import SummaryPlan, plan_summary
from memkeeper.summarize.transcript import SourceMessage

RESERVE_TRIES = 3
"""Plans tried per session: another session may reserve between looking and reserving."""


def run_budget(config: SummarizeJob) -> Budget:
    """The budget of one run of the summarize job."""
    return Budget(
        max_calls=config.max_calls_per_run,
        max_tokens=config.max_tokens_per_run,
        max_calls_per_user=config.max_calls_per_user,
        max_tokens_per_user=config.max_tokens_per_user,
    )


def room_for_a_call(budget: Budget, user_id: str, max_output: int) -> bool:
    """Whether ``user_id`` could still afford one call (before reading the session at all)."""
    calls_left, tokens_left = budget.remaining(user_id)
    return calls_left >= 1 and tokens_left > max_output


def reserve_plan(
    budget: Budget,
    user_id: str,
    messages: Sequence[SourceMessage],
    previous: str | None,
    *,
    input_budget: int,
    max_output: int,
    extract: bool = False,
) -> SummaryPlan | None:
    """The plan for these messages that fits what is left, reserved; None if none fits."""
    for _ in range(RESERVE_TRIES):
        calls_left, tokens_left = budget.remaining(user_id)
        plan = plan_summary(
            messages,
            previous,
            input_budget=input_budget,
            max_output=max_output,
            calls_left=calls_left,
            tokens_left=tokens_left,
            extract=extract,
        )
        if plan is None:
            return None
        if budget.reserve(user_id, plan.calls, plan.tokens):
            return plan
    return None
