"""The retention score: how valuable an entry is to keep, from 0 (worthless) upwards.

Used by the ``prune`` job (lowest scores leave first) and by ``context()`` (highest first).
Following seed 003 §3.3 (confidence weighs most, recent use earns a bonus) and half-life
scoring systems like it, the score is a weighted sum of four components, each from 0 to 1:

* ``confidence`` — the entry's confidence;
* ``confirmed`` — freshness of the last write or re-confirmation:
  ``0.5 ** (days since updated_at / confirmed_half_life_days)``;
* ``recency`` — freshness of the last recall: ``0.5 ** (days since last_accessed_at /
  recency_half_life_days)``, 0 if never recalled;
* ``frequency`` — how often it was recalled:
  ``min(1, log(1 + access_count) / log(1 + frequency_saturation))``.

``score = w_confidence·confidence + w_confirmed·confirmed + w_recency·recency +
w_frequency·frequency`` with the weights of ``[scoring]`` in config.toml. Ties go against the
entry confirmed longest ago. Every pruned entry's change-log row records its score and these
components, so the decision can be checked by hand.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from datetime import datetime

from memkeeper.clock import days_between
from memkeeper.config import ScoringSection
from memkeeper.records import Memory


@dataclass(frozen=True)
class Score:
    """A retention score and its components (each 0-1 before weighting)."""

    score: float
    confidence: float
    confirmed: float
    recency: float
    frequency: float

    def to_dict(self) -> dict[str, float]:
        return {name: round(value, 6) for name, value in asdict(self).items()}


def _half_life(days: float, half_life: float) -> float:
    return 0.5 ** (days / half_life)


def retention_score(memory: Memory, now: datetime, weights: ScoringSection) -> Score:
    """Score one entry at ``now``."""
    confirmed = _half_life(days_between(memory.updated_at, now), weights.confirmed_half_life_days)
    if memory.last_accessed_at is None:
        recency = 0.0
    else:
        recency = _half_life(
            days_between(memory.last_accessed_at, now), weights.recency_half_life_days
        )
    frequency = min(1.0, math.log1p(memory.access_count) / math.log1p(weights.frequency_saturation))
    total = (
        weights.weight_confidence * memory.confidence
        + weights.weight_confirmed * confirmed
        + weights.weight_recency * recency
        + weights.weight_frequency * frequency
    )
    return Score(total, memory.confidence, confirmed, recency, frequency)


def rank_key(memory: Memory, score: Score) -> tuple[float, datetime, str]:
    """Sort key, lowest value first: by score, then the oldest confirmation, then id."""
    return (score.score, memory.updated_at, memory.id)
