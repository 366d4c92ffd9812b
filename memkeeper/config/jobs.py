"""The maintenance jobs' configuration: ``[jobs.*]`` and the order ``run-once`` runs them.

Part of the schema in :mod:`memkeeper.config` (kept apart to keep modules small). Each job
has its own section class; ``JobsSection`` gathers them under ``[jobs]``.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from memkeeper.config.base import JobSection, Section
from memkeeper.config.index import IndexJob
from memkeeper.config.merge import MergeJob
from memkeeper.config.retention import RetainJob
from memkeeper.config.summarize_extras import ExtractSection, ParkingSection
from memkeeper.validation import MAX_DAYS

_Section = Section
_Job = JobSection


class TtlDays(_Section):
    fact: int = Field(180, gt=0, le=MAX_DAYS, description="TTL of facts, in days.")
    preference: int = Field(30, gt=0, le=MAX_DAYS, description="TTL of preferences, in days.")
    note: int = Field(90, gt=0, le=MAX_DAYS, description="TTL of notes, in days.")


class ExpireJob(_Job):
    schedule: str = Field("0 3 * * *", description=_Job.model_fields["schedule"].description)
    ttl_days: TtlDays = Field(
        default_factory=TtlDays,
        description="How long an entry may go unused (since created, re-confirmed or recalled) "
        "before it becomes pending review.",
    )
    review_grace_days: int = Field(
        14,
        gt=0,
        le=MAX_DAYS,
        description="Days a pending-review entry may stay unused before it is retired to cold "
        "storage.",
    )


class DemoteJob(_Job):
    schedule: str = Field("0 4 1 * *", description=_Job.model_fields["schedule"].description)
    min_confidence: float = Field(
        0.5, ge=0, le=1, description="Entries below this confidence (0-1) may be demoted."
    )
    unused_days: int = Field(
        30, gt=0, le=MAX_DAYS, description="...if nobody used them for this many days."
    )


class PruneJob(_Job):
    schedule: str = Field("30 3 * * *", description=_Job.model_fields["schedule"].description)
    max_facts: int = Field(
        50, gt=0, le=10_000_000, description="Most active facts one user may have in one namespace."
    )


class SettleJob(_Job):
    schedule: str = Field("15 3 * * *", description=_Job.model_fields["schedule"].description)
    grey_days: int = Field(
        14,
        gt=0,
        le=MAX_DAYS,
        description="Days a superseded value is kept in the hot file before it goes to cold "
        "storage (its grey period).",
    )


class SummarizeJob(_Job):
    schedule: str = Field("0 * * * *", description=_Job.model_fields["schedule"].description)
    max_messages: int = Field(
        20,
        gt=0,
        le=100_000,
        description="A session with more unsummarized messages than this is due.",
    )
    keep_recent: int = Field(
        10, ge=0, le=100_000, description="Most recent messages left unsummarized in a due session."
    )
    summarized_retention_days: int = Field(
        0,
        ge=0,
        le=MAX_DAYS,
        description="How long summarized messages are kept (counted from when they were "
        "summarized) before deletion, in days; 0 keeps them forever.",
    )
    input_budget_tokens: int = Field(
        6000,
        ge=1000,
        le=10_000_000,
        description="Largest prompt sent in one call, in estimated tokens (a CJK character "
        "counts 1, other text 4 characters per token); longer histories are summarized in "
        "chunks and the chunk summaries folded.",
    )
    min_summary_chars: int = Field(
        20, ge=1, le=100_000, description="Answers shorter than this many characters are rejected."
    )
    max_calls_per_run: int = Field(
        200, gt=0, le=1_000_000, description="Most LLM calls in one run."
    )
    max_tokens_per_run: int = Field(
        2_000_000,
        gt=0,
        le=1_000_000_000,
        description="Most LLM tokens (prompt + answer) in one run.",
    )
    max_calls_per_user: int = Field(
        50, gt=0, le=1_000_000, description="Most LLM calls per user in one run."
    )
    max_tokens_per_user: int = Field(
        400_000, gt=0, le=1_000_000_000, description="Most LLM tokens per user in one run."
    )
    max_concurrency: int = Field(4, gt=0, le=64, description="LLM calls in flight at once.")
    extract: ExtractSection = Field(
        default_factory=ExtractSection,
        description="Extraction of durable facts and preferences from the summarized messages.",
    )
    parking: ParkingSection = Field(
        default_factory=ParkingSection, description="Sessions the model will not summarize."
    )

    @model_validator(mode="after")
    def _keeps_fewer_than_due(self) -> SummarizeJob:
        if self.keep_recent >= self.max_messages:
            raise ValueError(
                f"keep_recent ({self.keep_recent}) must be smaller than max_messages "
                f"({self.max_messages}), or a due session would have nothing to summarize"
            )
        return self


JOB_ORDER: tuple[str, ...] = (
    "settle",
    "expire",
    "demote",
    "prune",
    "index",
    "merge",
    "retain",
    "summarize",
)
"""The maintenance jobs, in the documented order ``run-once`` runs them: settle the grey
period, expiry and demotion, the per-user cap (counting what the others left), indexing
(embeddings for search), merging duplicates (by meaning: after indexing, so it compares
current vectors), retention (change log and cold storage bounded, free pages
returned), then summarization (the slowest). Each has its section below; the job registry
(:mod:`memkeeper.jobs`) must match (a test checks it)."""


class JobsSection(_Section):
    expire: ExpireJob = Field(default_factory=ExpireJob, description="TTL expiry and review.")
    demote: DemoteJob = Field(
        default_factory=DemoteJob, description="Monthly demotion of low-confidence entries."
    )
    prune: PruneJob = Field(default_factory=PruneJob, description="The per-user cap on facts.")
    retain: RetainJob = Field(
        default_factory=RetainJob,
        description="Retention: old change-log images thinned, optional cold purge, free "
        "pages returned to the file system.",
    )
    settle: SettleJob = Field(
        default_factory=SettleJob, description="Ending the grey period of superseded values."
    )
    index: IndexJob = Field(
        default_factory=IndexJob, description="Embedding new and changed entries for search."
    )
    merge: MergeJob = Field(
        default_factory=MergeJob, description="Merging duplicates (consolidation by meaning)."
    )
    summarize: SummarizeJob = Field(
        default_factory=SummarizeJob,
        description="LLM summarization of long conversation histories into notes.",
    )
