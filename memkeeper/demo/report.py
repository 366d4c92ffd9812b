"""The demo's text output: month by month, the jobs over the year, the stories, the undo.

Everything fits 80 columns: long lines (``explain`` lines name run ids and sources) wrap with
a hanging indent. All stored text was written by the demo's own agents.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

from memkeeper.audit.explain import ACTION_VERBS
from memkeeper.demo.run import DemoResult, Month

WIDTH = 80

AGENT_WORDS = (
    ("written", "written"),
    ("recalled", "recalled"),
    ("messages", "message/messages"),
    ("episodes", "episode/episodes"),
    ("forgotten", "forgotten"),
)
AGENT_CHANGE_WORDS = {
    "supersede": "value/values replaced",
    "reconfirm": "re-confirmed",
    "renew": "renewed by a recall",
    "restore": "restored by a recall",
}


def counted(count: int, words: str) -> str:
    """``2 values replaced`` / ``1 value replaced``: ``words`` is ``one/many`` or invariable."""
    one, _, many = words.partition("/")
    if not many:
        return f"{count} {one}"
    head, _, tail = many.partition(" ")
    single = one if count == 1 else head
    return f"{count} {single}" + (f" {tail}" if tail else "")


def label_words(job: str, label: str) -> str:
    """A run report's change label in words: ``retire (expired)`` -> ``to cold (expired)``;
    labels of jobs this module does not know read as the change log's verbs."""
    if label.startswith("retire "):
        return "to cold " + label.removeprefix("retire ")
    if job == "summarize" and label == "supersede":
        return "earlier summaries folded in"
    words = {"expire": "to review", "summarize": "summaries"}
    return words.get(label) or ACTION_VERBS.get(label, label)


def _wrap(text: str, indent: str, hang: str) -> list[str]:
    return textwrap.wrap(
        text, WIDTH, initial_indent=indent, subsequent_indent=hang, break_on_hyphens=False
    ) or [indent.rstrip()]


def _joined(parts: Iterable[str]) -> str:
    return ", ".join(part for part in parts if part)


def month_lines(month: Month, jobs: Iterable[str]) -> list[str]:
    """One month: the agents' line, then one line per job that changed something."""
    agents = _joined(
        counted(month.agents[key], word) for key, word in AGENT_WORDS if month.agents[key]
    )
    changed = _joined(
        counted(month.changes_by_agents[action], word)
        for action, word in AGENT_CHANGE_WORDS.items()
        if month.changes_by_agents[action]
    )
    lines = _wrap(f"agents: {agents or 'nothing'}", f"{month.label}  ", " " * 11)
    if changed:
        lines += _wrap(f"({changed})", " " * 11, " " * 12)
    for name in jobs:
        counts = month.jobs.get(name)
        if counts:
            words = _joined(
                f"{n} {label_words(name, label)}" for label, n in sorted(counts.items())
            )
            lines += _wrap(words, f"  {name:<10} ", " " * 13)
    if month.operator:
        words = _joined(f"{n} {what}" for what, n in sorted(month.operator.items()))
        lines += _wrap(f"{words} by the operator", f"  {'review':<10} ", " " * 13)
    return lines


def render(result: DemoResult) -> str:
    """The whole text report."""
    lines = [
        f"memkeeper demo: {len(result.months)} months of three agents' memory, maintained "
        "on schedule",
    ]
    lines += _wrap(
        f"Simulated from {result.start:%Y-%m-%d} to {result.end:%Y-%m-%d} "
        f"({result.timezone}), seed {result.seed}, in a "
        + ("database kept in " + result.database if result.database else "temporary database")
        + ".",
        "",
        "",
    )
    lines += _wrap(f"Summaries: {result.summaries}.", "", "  ")
    lines.append("")
    lines.append("Month by month (changes by job, from each run's report):")
    for month in result.months:
        lines += month_lines(month, result.jobs)
    lines.append("")
    lines.append("The jobs over the period (the service's schedule, in its timezone):")
    lines.append(f"  {'job':<10} {'schedule':<14} {'runs':>6} {'changes':>8}  notes")
    for name, job in result.jobs.items():
        notes = _joined(
            f"{n} {status}" for status, n in sorted(job.statuses.items()) if status != "ok"
        )
        if job.last_error:
            notes = _joined([notes, job.last_error])
        row = f"  {name:<10} {job.schedule:<14} {job.runs:>6} {job.changes:>8}  {notes}"
        lines += _wrap(row, "", " " * 44)
    for name, why in result.off.items():
        lines += _wrap(f"  {name:<10} {'-':<14} {'-':>6} {'-':>8}  {why}", "", " " * 44)
    lines.append("  Jobs firing more than daily ran at their first fire after a write; the other")
    lines.append("  fires would have found nothing new.")
    if result.undo is not None:
        undo = result.undo
        lines.append("")
        lines.append(
            f"Undo: the {undo['undone_job']} run {undo['undone_run']} "
            f"({counted(undo['undone_changes'], 'change/changes')})"
        )
        lines += _wrap(
            f"reverted {len(undo['reverted'])}, already undone {len(undo['already_undone'])}, "
            f"left alone (changed since) {len(undo['conflicts'])}; logged as run "
            f"{undo['run_id']}",
            "  ",
            "  ",
        )
        for note in undo["notes"]:
            lines += _wrap(note, "  note: ", " " * 8)
    for story in result.stories:
        lines.append("")
        lines.append(f"Story: {story.title}")
        lines.append(f"  $ memkeeper explain {story.memory_id}")
        for line in story.explain.split("\n"):
            hang = " " * (len(line) - len(line.lstrip()) + 4)
            lines += _wrap(line, "  ", "  " + hang)
        for line in story.extra:
            lines += _wrap(line, "  ", "      ")
    lines.append("")
    states = _joined(f"{n} {state}" for state, n in result.final_states.items())
    lines += _wrap(f"At the end: {states}.", "", "  ")
    if result.database:
        lines += _wrap(
            f"Look around: memkeeper --db {result.database} status (or log, explain ID).",
            "",
            "  ",
        )
    lines.append(f"Simulated in {result.elapsed_seconds:.1f} s.")
    return "\n".join(lines)
