"""The demo's summaries without a key: a local, deterministic, extractive stand-in for the LLM.

:class:`StandInClient` answers the summarizer's chat-completion calls the way
:class:`~memkeeper.llm.client.LlmClient` does (``complete(messages)`` returning an
:class:`~memkeeper.llm.answer.LlmAnswer`), but reads the prompt itself: it keeps the lines of
the previous summary and picks the transcript's most informative messages (numbers, days,
decisions, plans), in their order. No model, no network, the same answer every time. Every
summary it writes starts with :data:`STANDIN_LABEL`, so a note in the database says what
wrote it; the change log records :data:`STANDIN_MODEL` as the model.

The summarize job builds its own client from the API key, so without a key the demo runs the
job's steps here — the same due sessions, summarizer (plan, call, quality gate) and commit,
recorded in ``job_runs`` as a ``summarize`` run like the runner records one (see
:func:`run_local_summarize`).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, cast

from memkeeper.llm.answer import LlmAnswer
from memkeeper.maintenance.jobkit import JobContext
from memkeeper.maintenance.locks import jobs_lock
from memkeeper.maintenance.runner import JobResult, record_run_end, record_run_start
from memkeeper.store import MemoryStore
from memkeeper.summarize.commit import commit
from memkeeper.summarize.retention import delete_old_messages
from memkeeper.summarize.session import due_sessions
from memkeeper.summarize.summarizer import Summarizer
from memkeeper.summarize.tokens import estimate_tokens

if TYPE_CHECKING:
    from memkeeper.llm.client import LlmClient

STANDIN_LABEL = "[local stand-in summary]"
"""First line of every summary the stand-in writes: it is not an LLM's summary."""

STANDIN_MODEL = "local-stand-in (extractive, not an LLM)"
"""The model name recorded in the change log for the stand-in's summaries."""

SUMMARIZE = "summarize"
MAX_PICKED = 4
"""Messages the stand-in keeps from one transcript."""
MAX_LINES = 8
"""Lines a summary keeps at most (the newest, when a fold would make more)."""

_BLOCK = re.compile(r"<(previous_summary|partial_summary|transcript)>\n(.*?)\n</\1>", re.S)
_ENTRY = re.compile(r"^\[#(\d+) (\w+) (\d{4}-\d\d-\d\d)[^\]]*\] (.*)$")
_SIGNALS = re.compile(
    r"\d|monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|decid|agreed|"
    r"plan|will |must|deadline|due|test|remember|prefer|teacher|book|goal",
    re.I,
)


def _entries(transcript: str) -> list[tuple[str, str, str]]:
    """(role, date, text) of each transcript entry; continuation lines join their entry."""
    entries: list[list[str]] = []
    for line in transcript.split("\n"):
        found = _ENTRY.match(line)
        if found:
            entries.append([found.group(2), found.group(3), found.group(4)])
        elif entries and line.startswith("    "):
            entries[-1][2] += " " + line.strip()
    return [(role, day, text) for role, day, text in entries]


def _summary_lines(text: str) -> list[str]:
    """A previous or partial summary's lines, without the stand-in label."""
    lines = (line.strip() for line in text.split("\n"))
    return [line for line in lines if line and line != STANDIN_LABEL]


def extract(prompt: str) -> str:
    """The stand-in's summary of one summarizer prompt (the user message's text).

    Previous and partial summaries keep their lines; from each transcript the
    :data:`MAX_PICKED` messages with the most signals (a number, a day, a plan or decision;
    the user's own words first on ties) are kept, in order, as ``- date role: text`` lines.
    """
    lines: list[str] = []
    for tag, body in _BLOCK.findall(prompt):
        if tag != "transcript":
            lines.extend(_summary_lines(body))
            continue
        entries = _entries(body)
        ranked = sorted(
            range(len(entries)),
            key=lambda i: (-len(_SIGNALS.findall(entries[i][2])), entries[i][0] != "user", i),
        )
        for index in sorted(ranked[:MAX_PICKED]):
            role, day, text = entries[index]
            flat = " ".join(text.split())
            lines.append(f"- {day} {role}: {flat[:160]}")
    kept = lines[-MAX_LINES:] or ["- (no transcript found in the prompt)"]
    return "\n".join([STANDIN_LABEL, *kept])


class StandInClient:
    """Answers chat-completion calls with :func:`extract`, as JSON like the LLM is asked to."""

    def complete(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int | None = None
    ) -> LlmAnswer:
        """The stand-in's answer to one summarizer prompt (never fails, never waits)."""
        prompt = "\n".join(message["content"] for message in messages if message["role"] == "user")
        summary = extract(prompt)
        text = json.dumps({"summary": summary}, ensure_ascii=False)
        return LlmAnswer(
            text=text,
            finish_reason="stop",
            prompt_tokens=sum(estimate_tokens(message["content"]) for message in messages),
            completion_tokens=estimate_tokens(text),
            model=STANDIN_MODEL,
        )


def _summarize_locally(ctx: JobContext) -> None:
    """The summarize job's work with the stand-in: due sessions, summarize, commit, retention."""
    config = ctx.store.config.jobs.summarize
    due = due_sessions(ctx.store.storage, config.max_messages)
    ctx.set_total(len(due))
    stats = ctx.stats
    stats.update(
        summarizer=STANDIN_MODEL,
        sessions_due=len(due),
        sessions_summarized=0,
        sessions_not_done=0,
        messages_summarized=0,
    )
    client = cast("LlmClient", StandInClient())
    with ThreadPoolExecutor(1, thread_name_prefix="demo-summarize") as calls:
        summarizer = Summarizer(ctx, client, calls)
        for session in due:
            result = summarizer.summarize(session)
            if result.status == "done" and commit(ctx, result, STANDIN_MODEL):
                stats["sessions_summarized"] += 1
                stats["messages_summarized"] += len(result.message_ids)
            else:
                stats["sessions_not_done"] += 1
            ctx.advance(1)
    delete_old_messages(ctx)


def run_local_summarize(
    store: MemoryStore, *, now: datetime, scheduled_for: datetime | None, run_id: str
) -> JobResult:
    """One scheduled ``summarize`` run with the stand-in, recorded as the runner records one.

    Holds the job lock, records the run's start and end in ``job_runs`` (trigger
    ``schedule``), and writes through the summarize job's own commit, so the notes, the change
    log, explain and undo are the job's. A failure is recorded, never raised.
    """
    lock = jobs_lock(store.path)
    lock.acquire(store.config.service.lock_wait_seconds)
    try:
        record_run_start(store, run_id, SUMMARIZE, "schedule", now, scheduled_for)
        ctx = JobContext(
            store=store,
            job=SUMMARIZE,
            config=store.config.jobs.summarize,
            now=now,
            run_id=run_id,
            dry_run=False,
            stop_event=threading.Event(),
        )
        status, error = "ok", None
        try:
            _summarize_locally(ctx)
        except Exception as exc:  # recorded like the runner records a job's failure
            status, error = "failed", f"{type(exc).__name__}: {exc}"
        result = JobResult(
            job=SUMMARIZE,
            run_id=run_id,
            trigger="schedule",
            status=status,
            dry_run=False,
            started_at=now,
            finished_at=now,
            counts=dict(ctx.counts),
            skipped_entries=ctx.skipped,
            stats=dict(ctx.stats),
            error=error,
            changes=list(ctx.planned),
        )
        record_run_end(store, result)
    finally:
        lock.release()
    return result
