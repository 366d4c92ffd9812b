"""Finding duplicates among one user's entries in one namespace: pure work on images.

Two current, unpinned entries are *linked* when

* their values are identical after :func:`~memkeeper.consolidation.normalize.normalize`
  (any kinds), and either their keys are the same after normalization or the value is at
  least ``min_exact_chars`` long — 'yes' under ``vegetarian`` and under ``has_car`` says two
  things; the link's similarity is reported as 1.00, "identical after normalization";
* or their embeddings (current vectors of the configured model and dimensions) have a
  cosine similarity of at least ``similarity_threshold``, and they are of the same kind, or
  a preference and a note.

Two keyed entries whose keys are the same after normalization and whose values differ are
never linked, nor put in one group: that is a conflict, which ``remember`` settles.

Groups are stars, not chains: entries are taken in survivor order — keyed entries before
notes (a key is what recall by name needs), then by retention score, highest first — and
each entry not yet in a group gathers the ungrouped entries linked to *it*. So every merged
entry is a duplicate of its survivor directly, with the similarity the reason states, and
the survivor is the highest-scoring entry of its group (A≈B and B≈C never merges A and C
through B).

Notes that overlap without being duplicates (similarity from ``note_min_similarity`` up to
the threshold), neither of them in a group, are paired for the LLM, the most similar first,
each note in one pair at most.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memkeeper.config import ScoringSection
from memkeeper.config.merge import MergeJob
from memkeeper.consolidation.normalize import normalize, normalize_key
from memkeeper.records import Memory
from memkeeper.scoring import retention_score

if TYPE_CHECKING:
    import numpy

Image = dict[str, Any]
NORMALIZED = "identical after normalization"
BLOCK_ROWS = 512
"""Rows of the similarity matrix computed at once (bounds memory for a large namespace)."""


@dataclass(frozen=True)
class Candidate:
    """One entry as the grouping sees it: its image, normalized key and value."""

    image: Image
    key: str | None
    value: str

    @property
    def id(self) -> str:
        return str(self.image["id"])

    @property
    def kind(self) -> str:
        return str(self.image["kind"])


@dataclass(frozen=True)
class Link:
    """Why two entries are duplicates: their similarity, and how it was found."""

    similarity: float
    how: str  # NORMALIZED or "embedding"

    def describe(self) -> str:
        text = f"similarity {self.similarity:.2f}"
        return f"{text}, {self.how}" if self.how == NORMALIZED else text


@dataclass
class Group:
    """A survivor and the duplicates merged into it, each with its link to the survivor."""

    survivor: Candidate
    duplicates: list[tuple[Candidate, Link]] = field(default_factory=list)


@dataclass(frozen=True)
class NotePair:
    """Two overlapping notes the LLM may merge into one."""

    first: Candidate
    second: Candidate
    similarity: float


def candidates(images: Sequence[Image]) -> list[Candidate]:
    """The entries with their normalized keys and values."""
    return [Candidate(i, normalize_key(i["key"]), normalize(i["value"])) for i in images]


def _negated(stamp: str) -> tuple[int, ...]:
    """A sort key putting later stored times first."""
    return tuple(-ord(c) for c in stamp)


def survivor_order(
    entries: Sequence[Candidate], positions: Sequence[int], now: datetime, scoring: ScoringSection
) -> list[int]:
    """Positions in survivor order: keyed before notes, then the highest retention score,
    then the latest confirmation, then the id (only linked entries need a score)."""

    def rank(position: int) -> tuple[Any, ...]:
        entry = entries[position]
        score = retention_score(Memory.from_image(entry.image), now, scoring).score
        return (entry.key is None, -score, _negated(entry.image["updated_at"]), entry.id)

    return sorted(positions, key=rank)


def conflicting(a: Candidate, b: Candidate) -> bool:
    """Two values of one key (after normalization): a conflict, never a duplicate."""
    return a.key is not None and a.key == b.key and a.value != b.value


def _kinds_compare(a: str, b: str) -> bool:
    return a == b or {a, b} == {"preference", "note"}


def _exact(a: Candidate, b: Candidate, min_chars: int) -> bool:
    if not a.value or a.value != b.value:
        return False
    same_key = a.key is not None and a.key == b.key
    return same_key or len(a.value) >= min_chars


def similarities(matrix: numpy.ndarray, floor: float) -> dict[tuple[int, int], float]:
    """Pairs (i < j) of rows whose cosine similarity is at least ``floor``."""
    import numpy as np

    pairs: dict[tuple[int, int], float] = {}
    count = matrix.shape[0]
    if count < 2:
        return pairs
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = matrix / np.where(norms == 0, 1, norms)
    for start in range(0, count, BLOCK_ROWS):
        block = unit[start : start + BLOCK_ROWS] @ unit.T
        rows, cols = np.nonzero(block >= floor)
        for row, col in zip(rows.tolist(), cols.tolist(), strict=True):
            i = start + row
            if i < col:
                pairs[(i, col)] = min(1.0, float(block[row, col]))
    return pairs


def links(
    entries: Sequence[Candidate],
    vector_ids: Sequence[str],
    matrix: numpy.ndarray | None,
    config: MergeJob,
) -> tuple[dict[int, dict[int, Link]], list[tuple[int, int, float]]]:
    """The duplicate links between entries (by position), and the overlapping note pairs."""
    linked: dict[int, dict[int, Link]] = {i: {} for i in range(len(entries))}
    overlapping: list[tuple[int, int, float]] = []

    def link(i: int, j: int, found: Link) -> None:
        linked[i][j] = linked[j][i] = found

    by_value: dict[str, list[int]] = {}
    for i, entry in enumerate(entries):
        by_value.setdefault(entry.value, []).append(i)
    for members in by_value.values():
        for x, i in enumerate(members):
            for j in members[x + 1 :]:
                if _exact(entries[i], entries[j], config.min_exact_chars):
                    link(i, j, Link(1.0, NORMALIZED))
    if matrix is None or not vector_ids:
        return linked, overlapping
    position = {entry.id: i for i, entry in enumerate(entries)}
    rows = [position.get(memory_id) for memory_id in vector_ids]
    floor = min(config.similarity_threshold, config.note_min_similarity)
    for (a, b), similarity in similarities(matrix, floor).items():
        i, j = rows[a], rows[b]
        if i is None or j is None or j in linked[i]:
            continue
        first, second = entries[i], entries[j]
        if conflicting(first, second) or not _kinds_compare(first.kind, second.kind):
            continue
        if similarity >= config.similarity_threshold:
            link(i, j, Link(similarity, "embedding"))
        elif first.kind == second.kind == "note":
            overlapping.append((i, j, similarity))
    return linked, overlapping


def find_groups(
    entries: Sequence[Candidate],
    vectors: tuple[Sequence[str], numpy.ndarray | None],
    config: MergeJob,
    now: datetime,
    scoring: ScoringSection,
) -> tuple[list[Group], list[NotePair]]:
    """The duplicate groups (star-shaped, see the module docstring) and the note pairs.

    ``vectors``: the ids of the entries with a current vector and their matrix.
    """
    linked, overlapping = links(entries, vectors[0], vectors[1], config)
    seeds = survivor_order(entries, [i for i, found in linked.items() if found], now, scoring)
    grouped: set[int] = set()  # a survivor already looked at, or a duplicate taken
    merged: set[int] = set()  # in a group of duplicates, or in a note pair
    position = {entry.id: i for i, entry in enumerate(entries)}
    groups: list[Group] = []
    for seed in seeds:
        if seed in grouped:
            continue
        grouped.add(seed)
        group = Group(entries[seed])
        ranked = sorted(linked[seed].items(), key=lambda item: (-item[1].similarity, item[0]))
        for other, found in ranked:
            if other in grouped:
                continue
            candidate = entries[other]
            if any(conflicting(candidate, member) for member, _ in group.duplicates):
                continue
            group.duplicates.append((candidate, found))
            grouped.add(other)
        if group.duplicates:
            groups.append(group)
            merged.add(seed)
            merged.update(position[member.id] for member, _ in group.duplicates)
    pairs: list[NotePair] = []
    for i, j, similarity in sorted(overlapping, key=lambda p: (-p[2], p[0], p[1])):
        if i in merged or j in merged:
            continue
        merged.update((i, j))
        pairs.append(NotePair(entries[i], entries[j], similarity))
    return groups, pairs
