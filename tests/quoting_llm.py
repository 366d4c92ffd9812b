"""An LLM stand-in that quotes what it is given, for the tests of what a forget reaches.

A fixed answer proves nothing about erasure: a summary must really carry the user's words
for a test to show they are gone. :func:`quoting` answers each request from its own prompt:

* a summary (update, segment or fold) is the previous or partial summaries it was given
  followed by every user line of the transcript, quoted;
* extraction (when the prompt asks for ``"memories"``) returns ``home_city = X`` for every
  user line that says "I live in X", citing that message;
* a note merge joins both notes.
"""

from __future__ import annotations

import json
import re

from fake_llm import Recorded, Reply, completion

_LINE = re.compile(r"^\[#(\d+) (\w+) [^\]]*\] ?(.*)$", re.M)
_BLOCK = re.compile(r"<(previous_summary|partial_summary)>\n?(.*?)\n?</\1>", re.S)
_NOTE = re.compile(r"<note [^>]*>\n(.*?)\n</note>", re.S)
_CITY = re.compile(r"I live in (\w+)")


def quoting(request: Recorded) -> Reply:
    """The answer of a model that only ever repeats what it read."""
    notes = _NOTE.findall(request.user)
    if len(notes) == 2:
        return completion(f"{notes[0]} Also: {notes[1]}")
    parts = [text.strip() for _tag, text in _BLOCK.findall(request.user)]
    memories = []
    for number, role, text in _LINE.findall(request.user):
        if role != "user":
            continue
        parts.append(text.strip())
        found = _CITY.search(text)
        if found:
            memories.append(
                {
                    "key": "home_city",
                    "value": found.group(1),
                    "kind": "fact",
                    "scope": "lasting",
                    "confidence": 0.9,
                    "message_ids": [int(number)],
                }
            )
    answer: dict[str, object] = {"summary": " / ".join(parts) or "nothing said"}
    if '"memories"' in request.system:
        answer["memories"] = memories
    return completion(content=json.dumps(answer, ensure_ascii=False))
