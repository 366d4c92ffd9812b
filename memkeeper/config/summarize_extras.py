"""The summarize job's two extras: ``[jobs.summarize.extract]`` and ``[jobs.summarize.parking]``.

Part of the schema in :mod:`memkeeper.config` (kept apart to keep modules small). Extraction
asks the summarizing call for the durable facts and preferences the user stated, and writes
those that pass the three sieves (:mod:`memkeeper.summarize.extract`); parking stops spending
budget on a session the provider refuses every time (:mod:`memkeeper.summarize.parking`).
"""

from __future__ import annotations

from pydantic import Field

from memkeeper.config.base import Section
from memkeeper.validation import MAX_DAYS


class ExtractSection(Section):
    enabled: bool = Field(
        True,
        description="Also extract durable facts and preferences the user stated, in the same "
        "call as the summary, and remember those that pass the three sieves.",
    )
    min_confidence: float = Field(
        0.7,
        ge=0,
        le=1,
        description="Candidates the model is less sure of than this (0-1) are dropped and counted.",
    )
    max_candidates: int = Field(
        30,
        gt=0,
        le=1000,
        description="An answer listing more candidates than this is rejected as a whole.",
    )
    max_value_bytes: int = Field(
        1024,
        gt=0,
        le=16_777_216,
        description="An extracted value longer than this (UTF-8 bytes, and never more than "
        "[limits] max_value_bytes) rejects the answer.",
    )


class ParkingSection(Section):
    after_failures: int = Field(
        3,
        gt=0,
        le=100,
        description="Consecutive refusals (a content-filter 400, an answer the gate rejects) "
        "after which a session is parked: skipped by summarize, extraction and merge.",
    )
    retry_after_days: int = Field(
        7,
        gt=0,
        le=MAX_DAYS,
        description="Days after which a parked session is tried once more (memkeeper summarize "
        "retry SESSION releases it at once).",
    )
