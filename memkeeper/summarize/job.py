"""The summarize job's run: due sessions through the pools, each result counted and committed.

Sessions are summarized on a pool of ``max_concurrency`` session threads whose LLM calls share
a pool of as many call threads; each result is committed (one transaction per session) and
counted as it arrives. An auth error stops the run (the sessions in flight finish); sessions
that failed are left for the next run and reported as one :class:`LlmError`. Parked sessions
are not tried; a refusal that is the session's own counts toward parking it
(:mod:`~memkeeper.summarize.parking`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from memkeeper.config import LlmSection, SummarizeJob
from memkeeper.llm.client import LlmClient
from memkeeper.llm.endpoint import read_api_key
from memkeeper.llm.errors import LlmAuthError, LlmError, LlmNotConfigured, LlmUnavailable
from memkeeper.maintenance.jobkit import JobContext, JobSkipped
from memkeeper.summarize.commit import commit
from memkeeper.summarize.parking import note_refusal, without_parked
from memkeeper.summarize.session import DueSession, SessionResult
from memkeeper.summarize.summarizer import Summarizer


def require_api_key(llm: LlmSection) -> None:
    """JobSkipped unless the API key is set (the key is registered as a secret on the way)."""
    try:
        read_api_key(llm)
    except LlmNotConfigured as exc:
        raise JobSkipped(str(exc)) from None


def _new_stats(due: int) -> dict[str, Any]:
    return {
        "sessions_due": due,
        "sessions_summarized": 0,
        "sessions_skipped": 0,
        "sessions_rejected": 0,
        "sessions_failed": 0,
        "messages_summarized": 0,
        "llm_calls": 0,
        "llm_retries": 0,
        "llm_tokens": 0,
        "llm_prompt_tokens": 0,
        "llm_completion_tokens": 0,
    }


def _record(ctx: JobContext, result: SessionResult, model: str) -> None:
    """Count a session's usage, commit it if it succeeded, and log what happened."""
    stats, usage, session = ctx.stats, result.usage, result.session
    stats["llm_calls"] += usage.attempts
    stats["llm_retries"] += usage.retries
    stats["llm_tokens"] += usage.tokens
    stats["llm_prompt_tokens"] += usage.prompt_tokens
    stats["llm_completion_tokens"] += usage.completion_tokens
    where = {
        "user_id": session.user_id,
        "namespace": session.namespace,
        "session_id": session.session_id,
    }
    if result.status == "done":
        if commit(ctx, result, model):
            stats["sessions_summarized"] += 1
            stats["messages_summarized"] += len(result.message_ids)
            _count_extraction(stats, result)
            ctx.log.info(
                "session summarized",
                **where,
                messages=len(result.message_ids),
                calls=usage.attempts,
                tokens=usage.tokens,
                complete=result.complete,
            )
        else:
            stats["sessions_conflicted"] = stats.get("sessions_conflicted", 0) + 1
            ctx.log.info("session changed meanwhile; left for the next run", **where)
    elif result.status == "skipped":
        stats["sessions_skipped"] += 1
        ctx.log.debug("session skipped", **where, reason=result.reason)
    else:
        stats[f"sessions_{result.status}"] += 1
        # An endpoint that is down fails every session in flight with the same cause, which
        # the job's one failure line already names: per session, that is detail for -v.
        level = "info" if isinstance(result.error, LlmUnavailable) else "warning"
        getattr(ctx.log, level)(f"session {result.status}", **where, reason=result.reason)
        note_refusal(ctx, result)


def _count_extraction(stats: dict[str, Any], result: SessionResult) -> None:
    """Add what extraction's sieves did with a committed session's candidates."""
    for reason, count in result.dropped.items():
        stats[f"extract_dropped_{reason}"] = stats.get(f"extract_dropped_{reason}", 0) + count
    for what, count in result.written.items():
        name = f"extract_{what}" if what.startswith("skipped_") else what
        stats[name] = stats.get(name, 0) + count


def _summarize_all(ctx: JobContext, due: list[DueSession], client: LlmClient, model: str) -> None:
    config: SummarizeJob = ctx.config  # type: ignore[assignment]
    width = config.max_concurrency
    fatal: Exception | None = None
    failures: list[SessionResult] = []
    with (
        ThreadPoolExecutor(width, thread_name_prefix="summarize-call") as calls,
        ThreadPoolExecutor(width, thread_name_prefix="summarize-session") as sessions,
    ):
        summarizer = Summarizer(ctx, client, calls)
        futures = [sessions.submit(summarizer.summarize, session) for session in due]
        try:
            for future in as_completed(futures):
                try:
                    result = future.result()
                except Exception as exc:  # auth error or a bug: finish what is in flight
                    summarizer.abort.set()
                    fatal = fatal if isinstance(fatal, LlmAuthError) else exc
                    ctx.advance(1)
                    continue
                _record(ctx, result, model)
                if result.status == "failed":
                    failures.append(result)
                ctx.advance(1)
        except BaseException:
            summarizer.abort.set()  # no new calls while the pools wind down
            raise
    if ctx.stats["sessions_skipped"]:
        ctx.log.info(
            "sessions wait for the next run",
            sessions=ctx.stats["sessions_skipped"],
            reason="budget, an unavailable endpoint, or a stop",
        )
    if fatal is not None:
        raise fatal
    if failures:
        first = failures[0]
        raise LlmError(
            f"{len(failures)} session(s) not summarized and left for the next run; first: "
            f"{first.reason}"
        )


def summarize_due(ctx: JobContext, due: list[DueSession]) -> LlmError | None:
    """Summarize and commit the due sessions; the LlmError that ended the run, if any, is
    returned for the caller to raise once the work that needs no LLM is done."""
    config: SummarizeJob = ctx.config  # type: ignore[assignment]
    llm: LlmSection = ctx.store.config.llm
    ctx.stats.update(_new_stats(len(due)))
    due = without_parked(ctx, due)
    if not due:
        return None
    if ctx.llm_client is not None:  # injected (memkeeper demo's stand-in): its own model name
        return _summarize_with(ctx, due, ctx.llm_client, getattr(ctx.llm_client, "model", ""))
    with LlmClient.from_config(llm, max_connections=config.max_concurrency) as client:
        ctx.log.info(
            "summarizing sessions",
            sessions=len(due),
            model=llm.model,
            endpoint=client.endpoint,
            max_concurrency=config.max_concurrency,
        )
        return _summarize_with(ctx, due, client, llm.model)


def _summarize_with(
    ctx: JobContext, due: list[DueSession], client: LlmClient, model: str
) -> LlmError | None:
    try:
        _summarize_all(ctx, due, client, model or ctx.store.config.llm.model)
    except LlmError as exc:
        return exc
    return None
