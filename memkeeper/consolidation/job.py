"""The ``merge`` job's run: candidate pairs, groups per pair, groups applied in batches.

Order of work: the watermark of this run and the last successful one
(:mod:`~memkeeper.consolidation.candidates`); the (user, namespace) pairs to look at (one
set-based query); then per pair one short read of its current unpinned entries and their
current vectors, the groups (:mod:`~memkeeper.consolidation.grouping`, numpy for the
similarities), and their transitions (:mod:`~memkeeper.consolidation.merging`), applied in
batches of whole groups. Overlapping notes are collected on the way and, once every pair is
done, sent to the LLM within the run's call budget (:mod:`~memkeeper.consolidation.notes`).

The run's statistics: ``pairs`` (user/namespace pairs looked at), ``full_scan``,
``groups`` (groups merged, or in a dry run that would be), ``duplicates`` (entries
superseded), ``groups_left`` (a member changed meanwhile: left for the next run),
``note_pairs`` and the LLM counts, and the watermark the next run starts from (with the time
of the last full scan).
"""

from __future__ import annotations

from dataclasses import replace

from memkeeper.clock import to_db
from memkeeper.config.merge import MergeJob
from memkeeper.consolidation.candidates import (
    candidate_pairs,
    current_watermark,
    needs_full_scan,
    previous_watermark,
    read_pair,
    scope_of,
)
from memkeeper.consolidation.grouping import NotePair, candidates, find_groups
from memkeeper.consolidation.merging import apply_whole, group_transitions
from memkeeper.consolidation.notes import merge_notes
from memkeeper.maintenance.jobkit import JobContext
from memkeeper.retrieval.indexing import search_settings
from memkeeper.storage.transitions import Transition


def merge_duplicates(ctx: JobContext) -> None:
    """Find and merge the duplicates of every candidate pair; then the LLM's note merges."""
    config: MergeJob = ctx.config  # type: ignore[assignment]
    storage = ctx.store.storage
    search = search_settings(ctx.store.config)
    scope = scope_of(config, search)
    with storage.lock:
        watermark = current_watermark(storage, scope)
        previous = previous_watermark(storage)
    full = needs_full_scan(previous, scope, ctx.now, config.full_scan_days)
    pairs = candidate_pairs(storage, previous, full_scan=full)
    if full:
        watermark = replace(watermark, full_scan_at=to_db(ctx.now))
    elif previous is not None:
        watermark = replace(watermark, full_scan_at=previous.full_scan_at)
    ctx.set_total(len(pairs))
    stats = ctx.stats
    stats.update(pairs=len(pairs), full_scan=full, groups=0, duplicates=0, groups_left=0)
    scoring = ctx.store.config.scoring
    note_pairs: list[NotePair] = []
    waiting = 0
    batch: list[list[Transition]] = []
    size = 0

    def flush() -> None:
        nonlocal batch, size
        done, superseded, left = apply_whole(ctx, batch)
        stats["groups"] += done
        stats["duplicates"] += superseded
        stats["groups_left"] += left
        batch, size = [], 0

    for pair in pairs:
        images, vector_ids, matrix = read_pair(storage, pair, search, with_vectors=True)
        if len(images) >= 2:
            groups, overlapping = find_groups(
                candidates(images), (vector_ids, matrix), config, ctx.now, scoring
            )
            for group in groups:
                transitions = group_transitions(group, ctx.now)
                batch.append(transitions)
                size += len(transitions)
            room = config.max_llm_calls_per_run - len(note_pairs)
            note_pairs.extend(overlapping[: max(room, 0)])
            waiting += max(len(overlapping) - max(room, 0), 0)
        if size >= ctx.batch_size:
            flush()
        ctx.advance(1)
        if ctx.should_stop():
            break
    flush()
    if not ctx.should_stop():
        merge_notes(ctx, note_pairs, waiting)
    stats.update(watermark.to_stats())
