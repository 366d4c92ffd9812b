"""One session's summary, from its messages to a checked text: read, plan, call, check.

Nothing here writes to the database (the commit is :mod:`memkeeper.summarize.commit`) and no
database lock is held while waiting for the LLM. Calls run on the run's call pool; one long
history becomes segment calls whose summaries are folded level by level (MemGPT-style). The
first error of a session stops it; an auth error stops the whole run, an endpoint that is
down makes the sessions not yet started wait for the next run.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from memkeeper.config import LlmSection, SummarizeJob
from memkeeper.llm.answer import LlmAnswer
from memkeeper.llm.client import LlmClient
from memkeeper.llm.errors import (
    LlmAuthError,
    LlmBadAnswer,
    LlmError,
    LlmUnavailable,
    SummaryRejected,
)
from memkeeper.llm.usage import Usage
from memkeeper.maintenance.jobkit import JobContext
from memkeeper.summarize.budget import reserve_plan, room_for_a_call, run_budget
from memkeeper.summarize.extract import sift
from memkeeper.summarize.extract_gate import Candidate, GateLimits, check_memories
from memkeeper.summarize.gate import check_answer
from memkeeper.summarize.plan import Overheads, SummaryPlan, fold_groups
from memkeeper.summarize.prompt import Message, fold_prompt, segment_prompt, update_prompt
from memkeeper.summarize.session import DueSession, SessionResult, unsummarized
from memkeeper.summarize.tokens import estimate_tokens
from memkeeper.summarize.transcript import Chunk


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
        self.budget = run_budget(self.config)
        self.extract = self.config.extract.enabled
        limits = ctx.store.config.limits
        self.gate_limits = GateLimits(
            max_candidates=self.config.extract.max_candidates,
            max_value_bytes=min(self.config.extract.max_value_bytes, limits.max_value_bytes),
            max_key_chars=limits.max_key_chars,
        )

    # -- calling --------------------------------------------------------------------------

    def _complete(self, messages: list[Message]) -> LlmAnswer:
        if self.abort.is_set():
            raise _Aborted
        return self.client.complete(messages)

    def _check(
        self, answer: LlmAnswer, session: DueSession, shown: set[int] | None, found: list[Candidate]
    ) -> str:
        """The summary of an answer that passes the gate; with ``shown`` (the ids of the
        messages the call saw), its memories pass the extraction gate into ``found``."""
        summary, data = check_answer(
            answer,
            min_chars=self.config.min_summary_chars,
            max_bytes=self.ctx.store.config.limits.max_value_bytes,
        )
        if shown is not None:
            found += check_memories(
                data,
                shown=shown,
                user_id=session.user_id,
                namespace=session.namespace,
                limits=self.gate_limits,
            )
        return summary

    def _run_calls(
        self,
        prompts: Sequence[list[Message]],
        usage: Usage,
        session: DueSession,
        shown: Sequence[set[int]] | None = None,
        found: list[Candidate] | None = None,
    ) -> list[str]:
        """Run prompts on the call pool; the summaries in order, or the first error.

        ``shown``: per prompt, the message ids it holds, when it also asks for memories
        (collected into ``found``)."""
        futures: list[Future[LlmAnswer]] = [self.calls.submit(self._complete, p) for p in prompts]
        results: list[str] = []
        error: BaseException | None = None
        for future in futures:
            if error is not None:
                future.cancel()
            try:
                answer = future.result()
            except LlmError as exc:
                usage.add_failure(exc)
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
                seen = shown[len(results)] if shown is not None else None
                into = found if found is not None else []
                try:
                    results.append(self._check(answer, session, seen, into))
                except SummaryRejected as exc:
                    error = exc
        if error is not None:
            raise error
        return results

    def _execute(
        self,
        plan: SummaryPlan,
        previous: str | None,
        usage: Usage,
        session: DueSession,
        found: list[Candidate],
    ) -> str:
        out, extract = self.llm.max_output_tokens, self.extract
        shown = [_ids(chunk) for chunk in plan.chunks] if extract else None
        if plan.mode == "single":
            text = plan.chunks[0].text
            prompt = update_prompt(previous, text, plan.language, out, extract=extract)
            return self._run_calls([prompt], usage, session, shown, found)[0]
        total = len(plan.chunks)
        prompts = [
            segment_prompt(chunk.text, number, total, plan.language, out, extract=extract)
            for number, chunk in enumerate(plan.chunks, 1)
        ]
        pieces = self._run_calls(prompts, usage, session, shown, found)
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
            folded = iter(self._run_calls(prompts, usage, session))
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
        if not room_for_a_call(self.budget, session.user_id, self.llm.max_output_tokens):
            return SessionResult(session, "skipped", "over this run's budget")
        messages, previous = unsummarized(self.ctx.store.storage, session)
        if len(messages) <= self.config.max_messages:
            return SessionResult(session, "skipped", "no longer due")
        keep = self.config.keep_recent
        batch = messages[: len(messages) - keep] if keep else messages
        previous_text = previous["value"] if previous else None
        plan = reserve_plan(
            self.budget,
            session.user_id,
            batch,
            previous_text,
            input_budget=self.config.input_budget_tokens,
            max_output=self.llm.max_output_tokens,
            extract=self.extract,
        )
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
        found: list[Candidate] = []
        try:
            result.summary = self._execute(plan, previous_text, usage, session, found)
            if self.extract:
                covered = {m.id: m for m in batch if m.id in set(plan.message_ids)}
                result.memories, result.dropped = sift(
                    found, covered, min_confidence=self.config.extract.min_confidence
                )
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


def _ids(chunk: Chunk) -> set[int]:
    """The ids of the messages a call with this chunk is shown."""
    return {segment.message_id for segment in chunk.segments}
