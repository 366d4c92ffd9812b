"""The demo's summaries without a key: a local, deterministic, extractive stand-in for the LLM.

:class:`StandInClient` answers the summarizer's chat-completion calls the way
:class:`~memkeeper.llm.client.LlmClient` does (``complete(messages)`` returning an
:class:`~memkeeper.llm.answer.LlmAnswer`), but reads the prompt itself: it keeps the lines of
the previous summary and picks the transcript's most informative messages (numbers, days,
decisions, plans), in their order. No model, no network, the same answer every time. Every
summary it writes starts with :data:`STANDIN_LABEL`, so a note in the database says what
wrote it; the change log records :data:`STANDIN_MODEL` as the model.

Without a key the demo runs the real summarize job with this client injected
(``run_job(..., llm_client=StandInClient())``): the same due sessions, summarizer (plan, call,
quality gate), extraction, commit, budgets and ``job_runs`` record as with GLM.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memkeeper.llm.answer import LlmAnswer
from memkeeper.summarize.tokens import estimate_tokens

if TYPE_CHECKING:
    pass

STANDIN_LABEL = "[local stand-in summary]"
"""First line of every summary the stand-in writes: it is not an LLM's summary."""

STANDIN_MODEL = "local-stand-in (extractive, not an LLM)"
"""The model name recorded in the change log for the stand-in's summaries."""

SUMMARIZE = "summarize"
MAX_PICKED = 4
"""Messages the stand-in keeps from one transcript."""
MAX_LINES = 8
"""Lines a summary keeps at most (the newest, when a fold would make more)."""

_BLOCK = re.compile(r"<(previous_summary|partial_summary|transcript)>\n(.*?)\n</\1>", re.S)
_ENTRY = re.compile(r"^\[#(\d+) (\w+) (\d{4}-\d\d-\d\d)[^\]]*\] (.*)$")
_SIGNALS = re.compile(
    r"\d|monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|decid|agreed|"
    r"plan|will |must|deadline|due|test|remember|prefer|teacher|book|goal",
    re.I,
)


def _entries(transcript: str) -> list[tuple[str, str, str]]:
    """(role, date, text) of each transcript entry; continuation lines join their entry."""
    entries: list[list[str]] = []
    for line in transcript.split("\n"):
        found = _ENTRY.match(line)
        if found:
            entries.append([found.group(2), found.group(3), found.group(4)])
        elif entries and line.startswith("    "):
            entries[-1][2] += " " + line.strip()
    return [(role, day, text) for role, day, text in entries]


def _summary_lines(text: str) -> list[str]:
    """A previous or partial summary's lines, without the stand-in label."""
    lines = (line.strip() for line in text.split("\n"))
    return [line for line in lines if line and line != STANDIN_LABEL]


def extract(prompt: str) -> str:
    """The stand-in's summary of one summarizer prompt (the user message's text).

    Previous and partial summaries keep their lines; from each transcript the
    :data:`MAX_PICKED` messages with the most signals (a number, a day, a plan or decision;
    the user's own words first on ties) are kept, in order, as ``- date role: text`` lines.
    """
    lines: list[str] = []
    for tag, body in _BLOCK.findall(prompt):
        if tag != "transcript":
            lines.extend(_summary_lines(body))
            continue
        entries = _entries(body)
        ranked = sorted(
            range(len(entries)),
            key=lambda i: (-len(_SIGNALS.findall(entries[i][2])), entries[i][0] != "user", i),
        )
        for index in sorted(ranked[:MAX_PICKED]):
            role, day, text = entries[index]
            flat = " ".join(text.split())
            lines.append(f"- {day} {role}: {flat[:160]}")
    kept = lines[-MAX_LINES:] or ["- (no transcript found in the prompt)"]
    return "\n".join([STANDIN_LABEL, *kept])


class StandInClient:
    """Answers chat-completion calls with :func:`extract`, as JSON like the LLM is asked to.

    The summarize job takes it in place of its LLM client (``run_job(..., llm_client=...)``)
    and records :attr:`model` as the model in the change log."""

    model = STANDIN_MODEL

    def complete(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int | None = None
    ) -> LlmAnswer:
        """The stand-in's answer to one summarizer prompt (never fails, never waits)."""
        prompt = "\n".join(message["content"] for message in messages if message["role"] == "user")
        summary = extract(prompt)
        text = json.dumps({"summary": summary}, ensure_ascii=False)
        return LlmAnswer(
            text=text,
            finish_reason="stop",
            prompt_tokens=sum(estimate_tokens(message["content"]) for message in messages),
            completion_tokens=estimate_tokens(text),
            model=STANDIN_MODEL,
        )
