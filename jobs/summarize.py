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

The machinery lives in :mod:`memkeeper.summarize`: ``session`` (what is due), ``summarizer``
(read, plan, call, check), ``budget``, ``commit``, ``job`` (the pools and the counting),
``preview`` (the dry run) and ``retention``; the prompts, chunking and quality gate are pure
text work beside them.
"""

from __future__ import annotations

from memkeeper.config import SummarizeJob
from memkeeper.maintenance.jobkit import Job, JobContext
from memkeeper.summarize.job import require_api_key, summarize_due
from memkeeper.summarize.preview import preview
from memkeeper.summarize.retention import delete_old_messages
from memkeeper.summarize.session import due_sessions


def run(ctx: JobContext) -> None:
    config: SummarizeJob = ctx.config  # type: ignore[assignment]
    if ctx.llm_client is None:  # an injected client needs no key (memkeeper demo)
        require_api_key(ctx.store.config.llm)
    due = due_sessions(ctx.store.storage, config.max_messages)
    ctx.set_total(len(due))
    if ctx.dry_run:
        preview(ctx, due)
        delete_old_messages(ctx)
        return
    error = summarize_due(ctx, due)
    if not ctx.should_stop():  # retention does not need the LLM: it runs after a failure too
        delete_old_messages(ctx)
    if error is not None:
        raise error


JOB = Job(
    "summarize",
    "LLM summaries of long conversation histories into one note per session (MemGPT-style)",
    run,
)
