"""summarize: fold long conversation histories into one summary note per session (seed 000 §8).

A session (user, namespace, session id) with more than ``max_messages`` unsummarized messages
is due. All but its ``keep_recent`` newest messages are summarized by the LLM into one note,
MemGPT-style: the new summary folds in the session's previous one, which becomes
``superseded``, so a session always has exactly one current summary — a ``note`` whose key is
``summary:<session id>`` (the unique index of current keys guarantees it). Its source names
the session and the message-id range it covers; the change log records the model, the
tokens and the ids of the messages it covers.

Order of work, per session: read (short, under the store lock), plan against the run's
budget, call the LLM (no database lock held while waiting), check the answer with the
quality gate, then — in one transaction — re-check that nothing moved meanwhile, write the
note and its change-log rows, and mark the messages (``summarized_at``, ``summary_id``). A
session that fails anywhere before that commit is left exactly as it was and is due again
next run. Summarized messages leave ``history()`` but stay in the database until
``summarized_retention_days`` (0: forever) have passed.

Calls run on a pool of ``max_concurrency`` threads; sessions that do not fit the run's call
and token budgets (global and per user) wait for the next run. A dry run calls nothing and
reports which sessions are due and how many messages each would summarize. Without an API
key the job is skipped.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from memkeeper.clock import to_db
from memkeeper.config import LlmSection, SummarizeJob
from memkeeper.llm import (
    Budget,
    LlmAnswer,
    LlmAuthError,
    LlmBadAnswer,
    LlmClient,
    LlmError,
    LlmNotConfigured,
    LlmUnavailable,
    SummaryRejected,
    read_api_key,
)
from memkeeper.maintenance.jobkit import Job, JobContext, JobSkipped, PlannedChange
from memkeeper.storage.files import chunks, placeholders
from memkeeper.storage.sqlite import immediate_transaction
from memkeeper.storage.transitions import Image, Transition, supersede
from memkeeper.summarize.prompt import (
    Message,
    Overheads,
    SourceMessage,
    SummaryPlan,
    check_summary,
    estimate_tokens,
    fold_groups,
    fold_prompt,
    plan_summary,
    segment_prompt,
    update_prompt,
)

SUMMARY_CONFIDENCE = 0.8
"""Confidence of a summary note: derived by a model, from the user's own words. High enough
for the context prefill (``[context] min_confidence`` 0.7), below a stated fact."""

_RANGE = re.compile(r";messages=(\d+)-(\d+)$")


def summary_key(session_id: str) -> str:
    """The key of a session's summary note."""
    return f"summary:{session_id}"


def summary_source(session_id: str, first: int, last: int) -> str:
    """The source of a summary note: its session and the message-id range it covers."""
    return f"summary:session={session_id};messages={first}-{last}"


@dataclass(frozen=True)
class DueSession:
    """A session with more unsummarized messages than ``max_messages``."""

    user_id: str
    namespace: str
    session_id: str
    unsummarized: int


def due_sessions(ctx: JobContext, max_messages: int) -> list[DueSession]:
    """Due sessions, the one waiting longest first (through ``messages_unsummarized``)."""
    with ctx.store.storage.lock:
        rows = list(
            ctx.store.storage.hot.query(
                "SELECT user_id, namespace, session_id, count(*) AS n, min(id) AS first"
                " FROM messages WHERE summarized_at IS NULL"
                " GROUP BY user_id, namespace, session_id HAVING count(*) > ? ORDER BY first",
                [max_messages],
            )
        )
    return [DueSession(r["user_id"], r["namespace"], r["session_id"], r["n"]) for r in rows]


def current_summary(ctx: JobContext, session: DueSession) -> Image | None:
    """The session's current summary note (active or pending review), if any."""
    return ctx.store._current(
        session.user_id, session.namespace, "note", summary_key(session.session_id)
    )


@dataclass
class Usage:
    """What one session's calls used (HTTP attempts, answers, tokens)."""

    attempts: int = 0
    answers: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, answer: LlmAnswer) -> None:
        self.attempts += answer.attempts
        self.answers += 1
        self.prompt_tokens += answer.prompt_tokens
        self.completion_tokens += answer.completion_tokens
        self.model = self.model or answer.model


@dataclass
class SessionResult:
    """What became of one due session in this run (before the commit)."""

    session: DueSession
    status: Literal["done", "skipped", "rejected", "failed"]
    reason: str = ""
    usage: Usage = field(default_factory=Usage)
    summary: str = ""
    message_ids: tuple[int, ...] = ()
    previous: Image | None = None
    calls_planned: int = 0
    chunks: int = 0
    complete: bool = True
    error: LlmError | None = None


class _Aborted(Exception):
    """A queued call that must not start: the run is being aborted."""


class Summarizer:
    """One run's shared state: client, budget, pools, and the per-session work."""

    def __init__(self, ctx: JobContext, client: LlmClient, calls: ThreadPoolExecutor) -> None:
        self.ctx = ctx
        self.config: SummarizeJob = ctx.config  # type: ignore[assignment]
        self.llm: LlmSection = ctx.store.config.llm
        self.client = client
        self.calls = calls
        self.abort = threading.Event()
        self.unavailable = threading.Event()
        self.budget = Budget(
            max_calls=self.config.max_calls_per_run,
            max_tokens=self.config.max_tokens_per_run,
            max_calls_per_user=self.config.max_calls_per_user,
            max_tokens_per_user=self.config.max_tokens_per_user,
        )

    # -- reading and planning -------------------------------------------------------------

    def _load(self, session: DueSession) -> tuple[list[SourceMessage], Image | None]:
        storage = self.ctx.store.storage
        with storage.lock:
            rows = list(
                storage.hot.query(
                    "SELECT id, role, content, created_at FROM messages WHERE user_id = ?"
                    " AND namespace = ? AND session_id = ? AND summarized_at IS NULL"
                    " ORDER BY id",
                    [session.user_id, session.namespace, session.session_id],
                )
            )
            previous = current_summary(self.ctx, session)
        messages = [SourceMessage(r["id"], r["role"], r["content"], r["created_at"]) for r in rows]
        return messages, previous

    def _plan(
        self, session: DueSession, messages: Sequence[SourceMessage], previous: str | None
    ) -> SummaryPlan | None:
        for _ in range(3):  # another session may reserve between looking and reserving
            calls_left, tokens_left = self.budget.remaining(session.user_id)
            plan = plan_summary(
                messages,
                previous,
                input_budget=self.config.input_budget_tokens,
                max_output=self.llm.max_output_tokens,
                calls_left=calls_left,
                tokens_left=tokens_left,
            )
            if plan is None:
                return None
            if self.budget.reserve(session.user_id, plan.calls, plan.tokens):
                return plan
        return None

    # -- calling --------------------------------------------------------------------------

    def _complete(self, messages: list[Message]) -> LlmAnswer:
        if self.abort.is_set():
            raise _Aborted
        return self.client.complete(messages)

    def _run_calls(self, prompts: Sequence[list[Message]], usage: Usage) -> list[str]:
        """Run prompts on the call pool; the summaries in order, or the first error."""
        futures: list[Future[LlmAnswer]] = [self.calls.submit(self._complete, p) for p in prompts]
        results: list[str] = []
        error: BaseException | None = None
        for future in futures:
            if error is not None:
                future.cancel()
            try:
                answer = future.result()
            except LlmError as exc:
                usage.attempts += exc.attempts
                if error is None or isinstance(exc, LlmAuthError):
                    error = exc  # the first error, unless a later one is an auth error
                continue
            except _Aborted as exc:
                error = error or exc
                continue
            except Exception as exc:  # a cancelled future, or a bug: stop this session
                error = error or exc
                continue
            usage.add(answer)
            if error is None:
                try:
                    results.append(
                        check_summary(
                            answer,
                            min_chars=self.config.min_summary_chars,
                            max_bytes=self.ctx.store.config.limits.max_value_bytes,
                        )
                    )
                except SummaryRejected as exc:
                    error = exc
        if error is not None:
            raise error
        return results

    def _execute(self, plan: SummaryPlan, previous: str | None, usage: Usage) -> str:
        out = self.llm.max_output_tokens
        if plan.mode == "single":
            prompt = update_prompt(previous, plan.chunks[0].text, plan.language, out)
            return self._run_calls([prompt], usage)[0]
        total = len(plan.chunks)
        prompts = [
            segment_prompt(chunk.text, number, total, plan.language, out)
            for number, chunk in enumerate(plan.chunks, 1)
        ]
        pieces = self._run_calls(prompts, usage)
        has_previous = previous is not None
        if previous is not None:
            pieces.insert(0, previous)
        overhead = Overheads.measure(plan.language, out).fold
        room = max(self.config.input_budget_tokens - overhead, 2 * out)
        while len(pieces) > 1:
            groups = fold_groups([estimate_tokens(p) + 8 for p in pieces], room)
            folds = [g for g in groups if len(g) > 1]
            prompts = [
                fold_prompt(
                    [pieces[i] for i in group], has_previous and group[0] == 0, plan.language, out
                )
                for group in folds
            ]
            folded = iter(self._run_calls(prompts, usage))
            pieces = [next(folded) if len(g) > 1 else pieces[g[0]] for g in groups]
            has_previous = has_previous and groups[0] == [0]
        return pieces[0]

    # -- one session ----------------------------------------------------------------------

    def summarize(self, session: DueSession) -> SessionResult:
        """Read, plan, call and check one session; never writes (the commit is separate)."""
        if self.ctx.should_stop() or self.abort.is_set():
            return SessionResult(session, "skipped", "the run is stopping")
        if self.unavailable.is_set():
            return SessionResult(session, "skipped", "the LLM endpoint is unavailable")
        calls_left, tokens_left = self.budget.remaining(session.user_id)
        if calls_left < 1 or tokens_left <= self.llm.max_output_tokens:
            return SessionResult(session, "skipped", "over this run's budget")
        messages, previous = self._load(session)
        if len(messages) <= self.config.max_messages:
            return SessionResult(session, "skipped", "no longer due")
        keep = self.config.keep_recent
        batch = messages[: len(messages) - keep] if keep else messages
        previous_text = previous["value"] if previous else None
        plan = self._plan(session, batch, previous_text)
        if plan is None:
            return SessionResult(session, "skipped", "over this run's budget")
        usage = Usage()
        result = SessionResult(
            session,
            "done",
            usage=usage,
            message_ids=plan.message_ids,
            previous=previous,
            calls_planned=plan.calls,
            chunks=len(plan.chunks),
            complete=plan.complete,
        )
        try:
            result.summary = self._execute(plan, previous_text, usage)
        except LlmAuthError:
            self.abort.set()
            raise
        except (SummaryRejected, LlmBadAnswer) as exc:
            result.status, result.reason, result.error = "rejected", str(exc), exc
        except LlmError as exc:
            if isinstance(exc, LlmUnavailable):
                self.unavailable.set()
            result.status, result.reason, result.error = "failed", str(exc), exc
        except _Aborted:
            result.status, result.reason = "skipped", "the run is stopping"
        finally:
            self.budget.settle(
                session.user_id, plan.calls, plan.tokens, usage.attempts, usage.tokens
            )
        return result

    # -- the commit -----------------------------------------------------------------------

    def commit(self, result: SessionResult) -> bool:
        """Write the note, supersede the previous one and mark the messages, in one
        transaction; False (nothing written) when the session moved meanwhile."""
        ctx, session = self.ctx, result.session
        storage = ctx.store.storage
        ids = list(result.message_ids)
        stamp = to_db(ctx.now)
        with storage.lock, immediate_transaction(storage.hot):
            still = 0
            for part in chunks(ids):
                still += storage.hot.execute(
                    f"SELECT count(*) FROM messages WHERE id IN ({placeholders(len(part))})"
                    " AND summarized_at IS NULL",
                    list(part),
                ).fetchone()[0]
            current = current_summary(ctx, session)
            seen = result.previous
            if still != len(ids) or (current is None) != (seen is None):
                return False
            if (
                current is not None
                and seen is not None
                and (current["id"] != seen["id"] or current["value"] != seen["value"])
            ):
                return False
            transitions = self._transitions(result, current)
            outcomes = ctx.apply(transitions)
            if not all(outcome.applied for outcome in outcomes):
                raise RuntimeError(f"summary of session {session.session_id!r} did not apply")
            new_id = transitions[-1].memory_id
            for part in chunks(ids):
                storage.hot.conn.execute(
                    "UPDATE messages SET summarized_at = ?, summary_id = ?"
                    f" WHERE id IN ({placeholders(len(part))}) AND summarized_at IS NULL",
                    [stamp, new_id, *part],
                )
        return True

    def _transitions(self, result: SessionResult, current: Image | None) -> list[Transition]:
        ctx, session = self.ctx, result.session
        ids = result.message_ids
        first, last = ids[0], ids[-1]
        covers_from = first
        if current is not None:
            found = _RANGE.search(current["source"] or "")
            covers_from = int(found.group(1)) if found else first
        source = summary_source(session.session_id, covers_from, last)
        image = ctx.store._new_image(
            user_id=session.user_id,
            namespace=session.namespace,
            kind="note",
            key=summary_key(session.session_id),
            value=result.summary,
            source=source,
            confidence=SUMMARY_CONFIDENCE,
            pinned=False,
            ttl_days=None,
            now=ctx.now,
        )
        usage = result.usage
        reason = f"summarized {len(ids)} messages (ids {first}-{last}) of session"
        reason += f" {session.session_id!r}"
        if current is not None:
            reason += f", folding in the previous summary {current['id']}"
        details: dict[str, Any] = {
            "session_id": session.session_id,
            "model": usage.model or self.llm.model,
            "tokens": {
                "prompt": usage.prompt_tokens,
                "completion": usage.completion_tokens,
                "total": usage.tokens,
            },
            "calls": usage.attempts,
            "chunks": result.chunks,
            "message_count": len(ids),
            "first_message_id": first,
            "last_message_id": last,
            "covers_from_message_id": covers_from,
            "message_ids": list(ids),
            "previous_summary_id": current["id"] if current else None,
        }
        transitions = []
        if current is not None:
            transitions.append(
                supersede(
                    current,
                    image["id"],
                    ctx.now,
                    f"folded into the new summary {image['id']} of session {session.session_id!r}",
                    session_id=session.session_id,
                )
            )
        transitions.append(Transition(image["id"], None, image, "summarize", reason, details))
        return transitions


# -- the run -----------------------------------------------------------------------------------


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


def _record(ctx: JobContext, summarizer: Summarizer, result: SessionResult) -> None:
    """Count a session's usage, commit it if it succeeded, and log what happened."""
    stats, usage, session = ctx.stats, result.usage, result.session
    stats["llm_calls"] += usage.attempts
    stats["llm_retries"] += usage.attempts - usage.answers
    stats["llm_tokens"] += usage.tokens
    stats["llm_prompt_tokens"] += usage.prompt_tokens
    stats["llm_completion_tokens"] += usage.completion_tokens
    where = {
        "user_id": session.user_id,
        "namespace": session.namespace,
        "session_id": session.session_id,
    }
    if result.status == "done":
        if summarizer.commit(result):
            stats["sessions_summarized"] += 1
            stats["messages_summarized"] += len(result.message_ids)
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


def _summarize_all(ctx: JobContext, due: list[DueSession], client: LlmClient) -> None:
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
                _record(ctx, summarizer, result)
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


def _preview(ctx: JobContext, due: list[DueSession]) -> None:
    """Dry run: which sessions are due and how many messages each would summarize."""
    config: SummarizeJob = ctx.config  # type: ignore[assignment]
    storage = ctx.store.storage
    total = 0
    for session in due:
        count = session.unsummarized - config.keep_recent
        with storage.lock:
            ids = [
                row["id"]
                for row in storage.hot.query(
                    "SELECT id FROM messages WHERE user_id = ? AND namespace = ?"
                    " AND session_id = ? AND summarized_at IS NULL ORDER BY id LIMIT ?",
                    [session.user_id, session.namespace, session.session_id, count],
                )
            ]
            previous = current_summary(ctx, session)
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
    ctx.stats["sessions_due"] = len(due)
    ctx.stats["messages_to_summarize"] = total


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


def run(ctx: JobContext) -> None:
    config: SummarizeJob = ctx.config  # type: ignore[assignment]
    llm: LlmSection = ctx.store.config.llm
    try:
        read_api_key(llm)
    except LlmNotConfigured as exc:
        raise JobSkipped(str(exc)) from None
    due = due_sessions(ctx, config.max_messages)
    ctx.set_total(len(due))
    if ctx.dry_run:
        _preview(ctx, due)
        delete_old_messages(ctx)
        return
    ctx.stats.update(_new_stats(len(due)))
    error: LlmError | None = None
    if due:
        with LlmClient.from_config(llm, max_connections=config.max_concurrency) as client:
            ctx.log.info(
                "summarizing sessions",
                sessions=len(due),
                model=llm.model,
                endpoint=client.endpoint,
                max_concurrency=config.max_concurrency,
            )
            try:
                _summarize_all(ctx, due, client)
            except LlmError as exc:  # retention does not need the LLM: still do it
                error = exc
    if not ctx.should_stop():
        delete_old_messages(ctx)
    if error is not None:
        raise error


JOB = Job(
    "summarize",
    "LLM summaries of long conversation histories into one note per session (MemGPT-style)",
    run,
)
