"""The commit of one session's summary: one transaction, or nothing at all.

Inside one write transaction it re-checks that nothing moved since the session was read (its
messages still unsummarized, its current summary the same one), writes the new note and
supersedes the previous summary through the shared transition mechanism (with their
change-log rows), with every span that carries a value the user erased replaced by
``[erased]`` (:mod:`memkeeper.storage.erased_values`: old messages or an old summary must not
bring it back), marks the messages (``summarized_at``, ``summary_id``) and remembers what
extraction kept (:mod:`~memkeeper.summarize.extract_commit`, the third sieve). A session that
moved meanwhile is left exactly as it was, due again next run. The change log records the
model, the tokens and the ids of the messages the summary covers.
"""

from __future__ import annotations

from typing import Any

from memkeeper.maintenance.jobkit import JobContext
from memkeeper.storage import erased_values, messages
from memkeeper.storage.transaction import write_transaction
from memkeeper.storage.transitions import Image, Transition, supersede
from memkeeper.store.entries import new_entry_image
from memkeeper.summarize.extract_commit import remember_extracted
from memkeeper.summarize.session import (
    SessionResult,
    covers_from,
    current_summary,
    summary_key,
    summary_source,
)

SUMMARY_CONFIDENCE = 0.8
"""Confidence of a summary note: derived by a model, from the user's own words. High enough
for the context prefill (``[context] min_confidence`` 0.7), below a stated fact."""


def commit(ctx: JobContext, result: SessionResult, model: str) -> bool:
    """Write the note, supersede the previous one and mark the messages, in one
    transaction; False (nothing written) when the session moved meanwhile. ``model`` is
    recorded when no answer named the model that wrote the summary."""
    session = result.session
    storage = ctx.store.storage
    ids = list(result.message_ids)
    with write_transaction(storage):
        still = messages.count_unsummarized(storage.hot, ids)
        current = current_summary(storage, session)
        seen = result.previous
        if still != len(ids) or (current is None) != (seen is None):
            return False
        if (
            current is not None
            and seen is not None
            and (current["id"] != seen["id"] or current["value"] != seen["value"])
        ):
            return False
        blocked = erased_values.matcher_for(storage.hot.conn, session.user_id, session.namespace)
        if blocked is not None:
            result.summary, _ = erased_values.redact(result.summary, blocked.spans(result.summary))
        transitions = summary_transitions(ctx, result, current, model)
        outcomes = ctx.apply(transitions)
        if not all(outcome.applied for outcome in outcomes):
            raise RuntimeError(f"summary of session {session.session_id!r} did not apply")
        new_id = transitions[-1].memory_id
        messages.mark_summarized(storage.hot, ids, new_id, ctx.now)
        if result.memories:
            result.written = remember_extracted(
                ctx, session.user_id, session.namespace, session.session_id, result.memories
            )
    return True


def summary_transitions(
    ctx: JobContext, result: SessionResult, current: Image | None, model: str
) -> list[Transition]:
    """The new summary note (and the supersession of ``current``, the previous one)."""
    session = result.session
    ids = result.message_ids
    first, last = ids[0], ids[-1]
    start = covers_from(current, first)
    image = new_entry_image(
        user_id=session.user_id,
        namespace=session.namespace,
        kind="note",
        key=summary_key(session.session_id),
        value=result.summary,
        source=summary_source(session.session_id, start, last),
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
        "model": usage.model or model,
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
        "covers_from_message_id": start,
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
