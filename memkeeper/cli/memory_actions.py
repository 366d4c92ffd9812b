"""What ``recall``, ``remember`` and ``search`` do once their arguments are parsed.

The click commands (:mod:`memkeeper.cli.memory_cmd`, :mod:`memkeeper.cli.search_cmd`) and the
quick start (:mod:`memkeeper.cli.quick`) both call these, so the two ways of running a
command cannot drift apart. Nothing here loads click.
"""

from __future__ import annotations

from typing import Any

from memkeeper.cli.invocation import App
from memkeeper.cli.output import echo, print_json
from memkeeper.cli.render import LINE_LIMIT, memory_label, shown
from memkeeper.errors import NotFound


def remember(
    app: App,
    user: str,
    key: str,
    value: str,
    *,
    namespace: str,
    kind: str,
    confidence: float,
    source: str,
    pin: bool | None,
    ttl_days: int | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Remember KEY = VALUE for USER and print the entry (its id and state)."""
    app.check_now(yes=yes)
    memory = app.store().remember(
        user,
        key,
        value,
        namespace=namespace,
        kind=kind,
        confidence=confidence,
        source=source,
        pinned=pin,
        ttl_days=ttl_days,
    )
    if as_json:
        print_json(memory.to_dict())
    else:
        echo(
            f"remembered {memory.id}: {shown(memory.key, LINE_LIMIT)} = {shown(memory.value)} "
            f"({memory.state})"
        )


def recall(
    app: App, user: str, key: str, *, namespace: str, kind: str | None, yes: bool, as_json: bool
) -> None:
    """Print USER's current value of KEY; NotFound (exit 3) when there is none."""
    app.check_now(yes=yes)
    memory = app.store(create=False).recall(user, key, namespace=namespace, kind=kind)
    if memory is None:
        raise NotFound(
            f"no memory {key!r} for user {user!r}"
            + (f" in namespace {namespace!r}" if namespace else "")
        )
    if as_json:
        print_json(memory.to_dict())
    else:
        echo(shown(memory.value))


def search(
    app: App,
    user: str,
    query: str,
    *,
    namespace: str,
    limit: int | None,
    kinds: tuple[str, ...],
    include_cold: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Print USER's hits for QUERY, best first, and the timing line on stderr."""
    app.check_now(yes=yes)
    from memkeeper.store import semantic

    semantic.said_elsewhere()  # the reason is on the timing line below, not in a log line
    hits: Any = app.store(create=False).search(
        user,
        query,
        namespace=namespace,
        kinds=list(kinds) or None,
        limit=limit,
        include_cold=include_cold,
    )
    if as_json:
        print_json([hit.to_dict() for hit in hits])
        if hits.keyword_only:
            echo(f"keyword-only: {hits.keyword_only}", err=True)
        return
    for hit in hits:
        m = hit.memory
        echo(
            f"{hit.score:6.3f}  {memory_label(m.kind, m.key)}: {shown(m.value, flat=True)}"
            f"  [sim {hit.similarity:.3f} kw {hit.keyword:.3f} conf {hit.confidence:.2f}"
            f" rec {hit.recency:.3f}] {m.id}"
        )
    mode = "by meaning and keywords" if hits.semantic else "keyword-only"
    echo(
        f"{len(hits)} hit{'s' if len(hits) != 1 else ''}, {mode}: query embedding "
        f"{hits.embed_ms:.1f} ms, search {hits.search_ms:.1f} ms",
        err=True,
    )
    if hits.keyword_only:
        echo(f"keyword-only: {hits.keyword_only}", err=True)


def forget_preview_text(preview: dict[str, Any]) -> str:
    """A forget's dry run for people: what it would erase, redact and rebuild, by id and
    kind, with counts; never a value (the preview carries none)."""
    lines = ["dry run: nothing was changed; a forget would"]
    erase = preview["erase"]
    lines.append(f"  erase {len(erase)} entr{'y' if len(erase) == 1 else 'ies'}")
    for entry in erase:
        why = entry.get("why") or "named by the forget"
        lines.append(f"    {entry['id']}  {entry.get('kind') or '?':10}  {why}")
    redact = preview["redact"]
    counts = preview["counts"]
    for what in ("messages", "episodes"):  # a whole user's or namespace's
        if counts.get(what):
            lines.append(f"  erase {counts[what]} {what}")
    if redact["entries"]:
        kept = ", ".join(redact["entries"])
        lines.append(f"  redact {len(redact['entries'])} kept entries: {kept}")
    if redact["messages"]:
        shown_ids = ", ".join(f"#{i}" for i in redact["messages"])
        lines.append(f"  redact {len(redact['messages'])} messages: {shown_ids}")
    if redact["episodes"]:
        shown_ids = ", ".join(f"#{i}" for i in redact["episodes"])
        lines.append(f"  redact {len(redact['episodes'])} episodes: {shown_ids}")
    if redact["change_rows"]:
        lines.append(f"  redact the images of {redact['change_rows']} change-log rows")
    if counts.get("changes"):
        lines.append(f"  delete {counts['changes']} change-log rows")
    if preview["rebuild"]:
        lines.append(
            f"  have the next summarize run rebuild the summaries of {len(preview['rebuild'])}"
            " erased summary note(s) from the messages that remain"
        )
    return "\n".join(lines)
