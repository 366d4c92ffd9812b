"""The conversation as data: messages rendered as transcript entries, packed into chunks.

Each message becomes one ``[#id role time] content`` entry inside ``<transcript>`` tags. Tags
inside a message are defused, and continuation lines are indented so a message cannot fake
another message's header. A message too long for one call is split into parts; consecutive
entries are packed into chunks that each fit one segment call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memkeeper.summarize.tokens import estimate_tokens, split_to_tokens

_TAGS = re.compile(r"<(\s*/?\s*(?:transcript|previous_summary|partial_summary)\b)", re.I)

MESSAGE_HEADER_TOKENS = 16
"""Estimated tokens of one ``[#id role time]`` header and its line break."""


@dataclass(frozen=True)
class SourceMessage:
    """One message to summarize, as read from the database."""

    id: int
    role: str
    content: str
    created_at: str


@dataclass(frozen=True)
class Segment:
    """One rendered transcript entry: a whole message, or one part of a very long one."""

    message_id: int
    text: str
    tokens: int
    last_part: bool


@dataclass(frozen=True)
class Chunk:
    """Consecutive segments that fit one segment call."""

    segments: tuple[Segment, ...]

    @property
    def text(self) -> str:
        return "\n".join(segment.text for segment in self.segments)

    @property
    def tokens(self) -> int:
        return sum(segment.tokens for segment in self.segments)

    @property
    def completed_ids(self) -> list[int]:
        """Messages whose last part is in this chunk (a message is covered once all is)."""
        return [s.message_id for s in self.segments if s.last_part]


def defuse(text: str) -> str:
    """Message text made safe inside the transcript: no closing tags, no fake headers."""
    text = _TAGS.sub(lambda m: "\u2039" + m.group(1), text)
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\n    ")


def _header(message: SourceMessage, part: str = "") -> str:
    when = message.created_at[:16].replace("T", " ")
    return f"[#{message.id} {message.role} {when}{part}]"


def segments_of(messages: Sequence[SourceMessage], max_tokens: int) -> list[Segment]:
    """Render messages as transcript segments; a message over ``max_tokens`` is split."""
    segments = []
    room = max(max_tokens - MESSAGE_HEADER_TOKENS, 1)
    for message in messages:
        body = defuse(message.content)
        pieces = split_to_tokens(body, room)
        for number, piece in enumerate(pieces, 1):
            part = f" part {number}/{len(pieces)}" if len(pieces) > 1 else ""
            text = f"{_header(message, part)} {piece}"
            segments.append(
                Segment(
                    message_id=message.id,
                    text=text,
                    tokens=estimate_tokens(text) + 1,
                    last_part=number == len(pieces),
                )
            )
    return segments


def pack(segments: Sequence[Segment], max_tokens: int) -> list[Chunk]:
    """Group consecutive segments into chunks of at most ``max_tokens`` (one segment each at
    least, so nothing is lost)."""
    chunks: list[Chunk] = []
    current: list[Segment] = []
    size = 0
    for segment in segments:
        if current and size + segment.tokens > max_tokens:
            chunks.append(Chunk(tuple(current)))
            current, size = [], 0
        current.append(segment)
        size += segment.tokens
    if current:
        chunks.append(Chunk(tuple(current)))
    return chunks
