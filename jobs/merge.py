"""merge: consolidation by meaning — duplicates merged into one entry (issue 12).

Within one user and namespace, never across them, and never touching a pinned entry or a
session summary (the summarize job's note ``summary:<session>``), the job finds entries
that say the same thing: identical values after normalization (width, case, punctuation,
whitespace) under different keys or in notes, then near-duplicates whose embeddings have a
cosine similarity of at least ``similarity_threshold`` (0.92), of the same kind or a
preference and a note. Two values of one key are a conflict, never a duplicate.

In each group the entry with the highest retention score survives (keyed entries before
notes); it takes the group's highest confidence and latest use, and its change-log row
(action ``merge``) names what was merged into it with the similarities and keeps the union
of the sources. The others become ``superseded`` ("duplicate of <id> (similarity 0.95)") and
go through the grey period and ``settle``. Overlapping notes (similarity from
``note_min_similarity`` to the threshold) may be merged into one new note by the LLM, within
``max_llm_calls_per_run`` (skipped without an API key).

A dry run lists each group, the survivor first; ``undo`` of a run restores every entry;
``explain`` of a survivor says what was merged into it. A run looks only at users changed
or embedded since the last successful run, and at everyone every ``full_scan_days`` (7).
The machinery lives in :mod:`memkeeper.consolidation`.
"""

from __future__ import annotations

from memkeeper.consolidation.job import merge_duplicates
from memkeeper.maintenance.jobkit import Job, JobContext


def run(ctx: JobContext) -> None:
    merge_duplicates(ctx)


JOB = Job("merge", "Duplicates (same meaning) merged into the highest-scoring entry", run)
