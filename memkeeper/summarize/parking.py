"""Sessions the model will not summarize: which refusals count, and parking them.

A refusal counts when it is about *this session*, so that trying again next run would most
likely fail the same way: an answer the quality gate or the extraction gate rejects
(:class:`~memkeeper.llm.errors.SummaryRejected`, a ``sensitive`` finish reason included), or
a request the provider refuses with its content filter (HTTP 400 whose message says so).
Failures of the endpoint (timeouts, 5xx, rate limits, a bad key, a wrong model name) are not
the session's fault: they leave it due, uncounted. After ``[jobs.summarize.parking]
after_failures`` counted refusals in a row the session is parked
(:mod:`memkeeper.store.parking` keeps the state in the change log); a success ends the
streak.

Other jobs that read conversations (merge, for one) skip what :func:`is_parked` says.
"""

from __future__ import annotations

from datetime import datetime

from memkeeper.config import SummarizeJob
from memkeeper.llm.errors import LlmError, LlmRequestRejected, SummaryRejected
from memkeeper.maintenance.jobkit import JobContext
from memkeeper.storage.base import Storage
from memkeeper.store.parking import ParkedSession, SessionRef, parked_sessions, record_failure
from memkeeper.store.parking import is_parked as _stored_is_parked
from memkeeper.summarize.session import DueSession, SessionResult

CONTENT_FILTER_MARKERS = (
    "敏感",
    "不安全",
    "违规",
    "sensitive",
    "unsafe",
    "content filter",
    "content_filter",
    "content management policy",
    "1301",
)
"""Words of a provider's 400 that blame the content (Zhipu's code 1301 says "系统检测到输入或
生成内容可能包含不安全或敏感内容"; OpenAI-compatible endpoints say ``content_filter``)."""


def refusal_problem(error: LlmError | None) -> str | None:
    """What kind of session-specific refusal ``error`` is (counted toward parking), or None."""
    if error is None:
        return None
    filtered = any(marker in str(error).lower() for marker in CONTENT_FILTER_MARKERS)
    if isinstance(error, SummaryRejected):
        # A "sensitive" finish reason is the provider's filter on the answer.
        return getattr(error, "problem", None) or ("content_filter" if filtered else "answer")
    if isinstance(error, LlmRequestRejected) and filtered:
        return "content_filter"
    return None


def is_parked(
    storage: Storage,
    user_id: str,
    namespace: str,
    session_id: str,
    *,
    now: datetime,
    config: SummarizeJob,
) -> bool:
    """Whether a session is parked at ``now`` (skipped by summarize, extraction and merge)."""
    return _stored_is_parked(
        storage,
        SessionRef(user_id, namespace, session_id),
        now=now,
        retry_after_days=config.parking.retry_after_days,
    )


def parked(storage: Storage, *, now: datetime, config: SummarizeJob) -> list[ParkedSession]:
    """Every parked session, those whose retry is due at ``now`` included (for listings)."""
    return parked_sessions(storage, now=now, retry_after_days=config.parking.retry_after_days)


def without_parked(ctx: JobContext, due: list[DueSession]) -> list[DueSession]:
    """The due sessions the job may try this run; the parked ones are counted and logged."""
    config: SummarizeJob = ctx.config  # type: ignore[assignment]
    skipped = {
        item.ref
        for item in parked_sessions(
            ctx.store.storage,
            now=ctx.now,
            retry_after_days=config.parking.retry_after_days,
            include_due=False,
        )
    }
    kept = [s for s in due if SessionRef(s.user_id, s.namespace, s.session_id) not in skipped]
    if len(kept) != len(due):
        ctx.stats["sessions_parked"] = len(due) - len(kept)
        ctx.log.info(
            "parked sessions skipped",
            sessions=len(due) - len(kept),
            hint="memkeeper review sessions; memkeeper summarize retry SESSION",
        )
    return kept


def note_refusal(ctx: JobContext, result: SessionResult) -> None:
    """Count a session's refusal toward parking (nothing for failures that are not its own)."""
    problem = refusal_problem(result.error)
    if problem is None or ctx.dry_run:
        return
    ctx.stats[f"rejected_{problem}"] = ctx.stats.get(f"rejected_{problem}", 0) + 1
    config: SummarizeJob = ctx.config  # type: ignore[assignment]
    session = result.session
    failures = record_failure(
        ctx.store.storage,
        SessionRef(session.user_id, session.namespace, session.session_id),
        reason=result.reason,
        problem=problem,
        after_failures=config.parking.after_failures,
        actor=ctx.actor,
        run_id=ctx.run_id,
        now=ctx.now,
    )
    if failures >= config.parking.after_failures:
        ctx.stats["sessions_newly_parked"] = ctx.stats.get("sessions_newly_parked", 0) + 1
        ctx.log.warning(
            "session parked",
            user_id=session.user_id,
            namespace=session.namespace,
            session_id=session.session_id,
            failures=failures,
            reason=result.reason,
        )
