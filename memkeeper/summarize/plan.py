"""How one session will be summarized, and what it may cost at most.

:func:`plan_summary` picks one call when everything fits, else chunks whose summaries are
folded (MemGPT-style recursion); when the run's remaining budget is short it takes the oldest
prefix of chunks that fits (the rest waits for the next run). Pure arithmetic over estimates:
no database, no network.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memkeeper.summarize.prompt import fold_prompt, prompt_tokens, segment_prompt, update_prompt
from memkeeper.summarize.tokens import detect_language, estimate_tokens
from memkeeper.summarize.transcript import Chunk, SourceMessage, pack, segments_of

MIN_CHUNK_TOKENS = 256
"""Transcript tokens per segment call at least, however small the input budget."""


def fold_groups(sizes: Sequence[int], budget: int) -> list[list[int]]:
    """Indexes of pieces grouped for one fold level: consecutive, each group within
    ``budget`` tokens where possible, and never a group of one while two pieces could share
    a call (so every level makes progress)."""
    groups: list[list[int]] = []
    current: list[int] = []
    size = 0
    for index, tokens in enumerate(sizes):
        if len(current) >= 2 and size + tokens > budget:
            groups.append(current)
            current, size = [], 0
        current.append(index)
        size += tokens
    if current:
        groups.append(current)
    return groups


def fold_cost(sizes: Sequence[int], budget: int, overhead: int, max_output: int) -> tuple[int, int]:
    """Upper bounds of (calls, tokens) to fold pieces of these sizes into one summary."""
    calls = tokens = 0
    sizes = list(sizes)
    while len(sizes) > 1:
        next_sizes = []
        for group in fold_groups(sizes, budget):
            if len(group) == 1:
                next_sizes.append(sizes[group[0]])
                continue
            calls += 1
            tokens += overhead + sum(sizes[i] for i in group) + max_output
            next_sizes.append(max_output)
        sizes = next_sizes
    return calls, tokens


@dataclass(frozen=True)
class SummaryPlan:
    """How one session will be summarized, and what it may cost at most."""

    mode: Literal["single", "chunked"]
    chunks: tuple[Chunk, ...]
    message_ids: tuple[int, ...]
    calls: int
    tokens: int
    language: str | None
    complete: bool
    """False when only the oldest part fits this run's budget (the rest waits)."""


@dataclass(frozen=True)
class Overheads:
    """Estimated prompt tokens of each prompt shape without its data."""

    single: int
    segment: int
    fold: int

    @classmethod
    def measure(
        cls, language: str | None, max_output_tokens: int, *, extract: bool = False
    ) -> Overheads:
        """The overheads of each shape; ``extract`` counts the extraction ask in them."""
        out = max_output_tokens
        return cls(
            single=prompt_tokens(update_prompt("", "", language, out, extract=extract)),
            segment=prompt_tokens(segment_prompt("", 999, 999, language, out, extract=extract)),
            fold=prompt_tokens(fold_prompt([""], True, language, out)),
        )


def plan_summary(
    messages: Sequence[SourceMessage],
    previous: str | None,
    *,
    input_budget: int,
    max_output: int,
    calls_left: int,
    tokens_left: int,
    extract: bool = False,
) -> SummaryPlan | None:
    """The plan for summarizing ``messages`` (oldest first) into ``previous``; None if even
    the smallest useful piece does not fit the remaining budget. ``extract``: the calls
    that see the transcript also ask for memories (their prompts are that much longer)."""
    if not messages:
        return None
    language = detect_language([m.content for m in messages])
    overheads = Overheads.measure(language, max_output, extract=extract)
    previous_tokens = estimate_tokens(previous) + 8 if previous is not None else 0
    chunk_room = max(input_budget - overheads.segment, MIN_CHUNK_TOKENS)
    segments = segments_of(messages, chunk_room)
    everything = sum(segment.tokens for segment in segments)

    single_tokens = overheads.single + previous_tokens + everything
    if single_tokens <= input_budget:
        cost = single_tokens + max_output
        if calls_left < 1 or cost > tokens_left:
            return None
        return SummaryPlan(
            mode="single",
            chunks=(Chunk(tuple(segments)),),
            message_ids=tuple(m.id for m in messages),
            calls=1,
            tokens=cost,
            language=language,
            complete=True,
        )

    chunks = pack(segments, chunk_room)
    fold_room = max(input_budget - overheads.fold, 2 * max_output)
    best: SummaryPlan | None = None
    calls = tokens = 0
    covered: list[int] = []
    for count, chunk in enumerate(chunks, 1):
        calls += 1
        tokens += overheads.segment + chunk.tokens + max_output
        covered.extend(chunk.completed_ids)
        if not covered:
            continue
        sizes = ([previous_tokens] if previous is not None else []) + [max_output] * count
        fold_calls, fold_tokens = fold_cost(sizes, fold_room, overheads.fold, max_output)
        if calls + fold_calls > calls_left or tokens + fold_tokens > tokens_left:
            break
        best = SummaryPlan(
            mode="chunked",
            chunks=tuple(chunks[:count]),
            message_ids=tuple(covered),
            calls=calls + fold_calls,
            tokens=tokens + fold_tokens,
            language=language,
            complete=count == len(chunks),
        )
    if best is None:
        return None
    # A trailing chunk that ends inside a long message summarizes part of it; trim it off so
    # that message is summarized whole next time.
    chunks_used = list(best.chunks)
    while chunks_used and not chunks_used[-1].completed_ids:
        chunks_used.pop()
    return SummaryPlan(
        mode=best.mode,
        chunks=tuple(chunks_used),
        message_ids=best.message_ids,
        calls=best.calls,
        tokens=best.tokens,
        language=best.language,
        complete=best.complete,
    )
