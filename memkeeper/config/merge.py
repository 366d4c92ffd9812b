"""The configuration of the ``merge`` job: ``[jobs.merge]``.

Part of the schema in :mod:`memkeeper.config` (kept apart to keep modules small). The job
itself is described in ``jobs/merge.py``; its machinery is :mod:`memkeeper.consolidation`.
Which embeddings it compares is set in ``[search]`` (``embedding_model``,
``embedding_dimensions``): vectors of another model or dimension are never compared.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from memkeeper.config.base import SCHEDULE_DOC, JobSection


class MergeJob(JobSection):
    schedule: str = Field("45 2 * * *", description=SCHEDULE_DOC)
    similarity_threshold: float = Field(
        0.92,
        gt=0,
        le=1,
        description="Two entries whose embeddings have at least this cosine similarity are "
        "duplicates (same kind, or a preference and a note); the one with the highest "
        "retention score survives.",
    )
    min_exact_chars: int = Field(
        6,
        ge=1,
        le=100_000,
        description="Identical values (after normalization) under different keys, or in a "
        "note, are duplicates only when at least this many characters long: 'yes' under "
        "two keys says two things.",
    )
    llm_merge: bool = Field(
        True,
        description="Ask the LLM to merge notes that overlap without being duplicates into "
        "one new note (needs the API key; skipped with one log line without it).",
    )
    note_min_similarity: float = Field(
        0.8,
        gt=0,
        le=1,
        description="Two notes whose similarity is at least this (and below "
        "similarity_threshold) overlap: the LLM may merge them.",
    )
    max_llm_calls_per_run: int = Field(
        20, ge=0, le=1_000_000, description="Most LLM calls (note merges) in one run."
    )
    full_scan_days: int = Field(
        7,
        ge=0,
        le=36_500,
        description="A run compares every user's entries when the last such full scan is at "
        "least this many days old (0: every run). Other runs look only at the users and "
        "namespaces changed or newly embedded since the last successful run; the first run, "
        "and a run after the threshold or the embedding model changed, scan everything.",
    )

    @model_validator(mode="after")
    def _lower_bound_below_threshold(self) -> MergeJob:
        if self.note_min_similarity > self.similarity_threshold:
            raise ValueError(
                f"note_min_similarity ({self.note_min_similarity}) must not exceed "
                f"similarity_threshold ({self.similarity_threshold})"
            )
        return self
