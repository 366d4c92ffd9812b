"""Commands that write and read memories: remember, recall, note, forget."""

from __future__ import annotations

import sys
from typing import Any

import click

from memkeeper.cli import (
    App,
    json_option,
    memory_actions,
    namespace_option,
    pass_app,
    print_json,
    required_text,
    yes_option,
)
from memkeeper.cli.render import LINE_LIMIT, counted, memory_block, shown
from memkeeper.errors import NotFound
from memkeeper.records import KEYED_KINDS
from memkeeper.store import DEFAULT_CONFIDENCE


@click.command()
@click.argument("user", callback=required_text)
@click.argument("key", callback=required_text)
@click.argument("value")
@namespace_option
@click.option(
    "--kind",
    type=click.Choice(KEYED_KINDS),
    default="fact",
    show_default=True,
    help="A fact (name, city) or a preference (style); notes use 'note'.",
)
@click.option(
    "--confidence",
    type=click.FloatRange(0, 1),
    default=DEFAULT_CONFIDENCE,
    show_default=True,
    help="How sure the agent is: stated by the user ≈ 0.95, inferred ≈ 0.6.",
)
@click.option("--source", default="cli", show_default=True, help="Where the value came from.")
@click.option("--pin/--no-pin", default=None, help="Pinned entries never expire or get pruned.")
@click.option("--ttl-days", type=click.IntRange(min=1), help="This entry's own TTL, in days.")
@yes_option
@json_option
@pass_app
def remember(
    app: App,
    user: str,
    key: str,
    value: str,
    namespace: str,
    kind: str,
    confidence: float,
    source: str,
    pin: bool | None,
    ttl_days: int | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Remember KEY = VALUE for USER (a new value supersedes the old one)."""
    memory_actions.remember(
        app,
        user,
        key,
        value,
        namespace=namespace,
        kind=kind,
        confidence=confidence,
        source=source,
        pin=pin,
        ttl_days=ttl_days,
        yes=yes,
        as_json=as_json,
    )


@click.command()
@click.argument("user", callback=required_text)
@click.argument("key", callback=required_text)
@namespace_option
@click.option("--kind", type=click.Choice(KEYED_KINDS), help="Only this kind (default: any).")
@yes_option
@json_option
@pass_app
def recall(
    app: App, user: str, key: str, namespace: str, kind: str | None, yes: bool, as_json: bool
) -> None:
    """Print USER's current value of KEY (and mark it used). Exit 3 if there is none.

    The text form escapes control characters and cuts very long values (marked); --json
    prints the exact value. A database that does not exist is exit 66: nothing is created.
    """
    memory_actions.recall(app, user, key, namespace=namespace, kind=kind, yes=yes, as_json=as_json)


@click.command()
@click.argument("user", callback=required_text)
@click.argument("text")
@namespace_option
@click.option("--source", default="cli", show_default=True, help="Where the note came from.")
@click.option("--pin/--no-pin", default=False, help="Pinned notes never expire.")
@yes_option
@json_option
@pass_app
def note(
    app: App,
    user: str,
    text: str,
    namespace: str,
    source: str,
    pin: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Add a note (an event, a reminder: something without a key) for USER."""
    app.check_now(yes=yes)
    memory = app.store().add_note(user, text, namespace=namespace, source=source, pinned=pin)
    if as_json:
        print_json(memory.to_dict())
    else:
        click.echo(f"noted {memory.id}")


_DRY_RUN = click.option(
    "--dry-run",
    is_flag=True,
    help="Show what would be erased, redacted and rebuilt (ids, kinds, counts); change nothing.",
)


def _show_preview(preview: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(preview)
    else:
        click.echo(memory_actions.forget_preview_text(preview))


@click.command()
@click.argument("user", callback=required_text)
@click.argument("key", callback=required_text)
@namespace_option
@_DRY_RUN
@yes_option
@json_option
@pass_app
def forget(
    app: App, user: str, key: str, namespace: str, dry_run: bool, yes: bool, as_json: bool
) -> None:
    """Erase every value KEY ever had for USER: hot, cold and change log, and what memkeeper
    derived from it in every namespace of USER (summaries and facts built from it are erased,
    texts that carry it are redacted, and nothing stores it again unless it is remembered
    under KEY). No undo.

    Exit 3 if USER has no value of KEY (there was nothing to erase).
    """
    app.check_now(yes=yes)
    if dry_run:
        preview = app.store(create=False).forget(user, key, namespace=namespace, dry_run=True)
        if not preview["counts"]["memories"]:
            raise NotFound(f"no memory {key!r} for user {user!r}; nothing would be erased")
        _show_preview(preview, as_json)
        return
    erased = app.store(create=False).forget(user, key, namespace=namespace)
    if not erased:
        raise NotFound(
            f"no memory {key!r} for user {user!r}"
            + (f" in namespace {namespace!r}" if namespace else "")
            + "; nothing was erased"
        )
    if as_json:
        print_json({"erased": erased})
    else:
        click.echo(f"erased {erased} value(s) of '{shown(key, LINE_LIMIT)}'")


@click.command("forget-id")
@click.argument("memory_id", callback=required_text)
@_DRY_RUN
@yes_option
@json_option
@pass_app
def forget_id(app: App, memory_id: str, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Erase one entry (a note, say) by id, with its history and what was derived from it
    (for a summary, the earlier summaries folded into it). No undo. Exit 3 if absent."""
    app.check_now(yes=yes)
    if dry_run:
        preview = app.store(create=False).forget_memory(memory_id, dry_run=True)
        if not preview["counts"]["memories"]:
            raise NotFound(f"no memory with id {memory_id!r}")
        _show_preview(preview, as_json)
        return
    erased = app.store(create=False).forget_memory(memory_id)
    if not erased:
        raise NotFound(f"no memory with id {memory_id!r}")
    if as_json:
        print_json({"erased": erased})
    else:
        click.echo(f"erased {shown(memory_id, LINE_LIMIT)}")


_YES_TO_ERASE = click.option(
    "--yes",
    is_flag=True,
    help="Do it without asking (and even though --now is more than a minute from the real clock).",
)


def _erase_confirmed(
    app: App,
    *,
    yes: bool,
    as_json: bool,
    question: str,
    erase: Any,
    nothing: str,
    dry_run: bool = False,
) -> None:
    """Ask (unless --yes), erase with ``erase(store)``, and print its counts; NotFound
    (exit 3) with ``nothing`` when no memory, message or episode was there. ``dry_run``:
    show ``erase(store, dry_run=True)``'s preview, with no question."""
    app.check_now(yes=yes)
    store = app.store(create=False)
    if dry_run:
        preview = erase(store, dry_run=True)
        if not any(preview["counts"].get(w) for w in ("memories", "messages", "episodes")):
            raise NotFound(nothing)
        _show_preview(preview, as_json)
        return
    if not yes:
        if not sys.stdin.isatty():
            # No one to answer the prompt (a script, a pipe, cron): say how to confirm.
            raise click.UsageError(
                f"{question} -- this asks for confirmation on a terminal, and standard input "
                "is not one; add --yes to confirm non-interactively"
            )
        click.confirm(question, abort=True, err=True)
    counts = erase(store)
    if not any(counts.get(what) for what in ("memories", "messages", "episodes")):
        raise NotFound(nothing)
    if as_json:
        print_json({"erased": counts})
    else:
        click.echo("erased " + ", ".join(counted(n, what) for what, n in counts.items()))


@click.command("forget-user")
@click.argument("user", callback=required_text)
@_DRY_RUN
@_YES_TO_ERASE
@json_option
@pass_app
def forget_user(app: App, user: str, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Erase everything about USER: memories, messages, episodes, log rows. No undo.

    Exit 3 if memkeeper holds nothing about USER.
    """
    _erase_confirmed(
        app,
        yes=yes,
        as_json=as_json,
        question=f"Erase everything memkeeper holds about {user!r}?",
        erase=lambda store, **how: store.forget_user(user, **how),
        nothing=f"no user {user!r}: memkeeper holds nothing about them",
        dry_run=dry_run,
    )


@click.command("forget-namespace")
@click.argument("user", callback=required_text)
@click.argument("namespace", callback=required_text)
@_DRY_RUN
@_YES_TO_ERASE
@json_option
@pass_app
def forget_namespace(
    app: App, user: str, namespace: str, dry_run: bool, yes: bool, as_json: bool
) -> None:
    """Erase one project of USER: NAMESPACE's memories, messages, episodes, log rows. No undo.

    The user's profile (the default namespace) and other projects are kept. Exit 3 if
    memkeeper holds nothing in NAMESPACE for USER.
    """
    _erase_confirmed(
        app,
        yes=yes,
        as_json=as_json,
        question=f"Erase everything of {user!r} in {namespace!r}?",
        erase=lambda store, **how: store.forget_namespace(user, namespace, **how),
        nothing=f"nothing of {user!r} in namespace {namespace!r}",
        dry_run=dry_run,
    )


@click.command()
@click.argument("memory_id", callback=required_text)
@json_option
@pass_app
def get(app: App, memory_id: str, as_json: bool) -> None:
    """Show one memory by id, wherever it lives (hot or cold). Exit 3 if absent."""
    memory = app.store(create=False).get(memory_id)
    if memory is None:
        raise NotFound(f"no memory with id {memory_id!r}")
    if as_json:
        print_json(memory.to_dict())
    else:
        click.echo(memory_block(memory))


def register(group: click.Group) -> None:
    for command in (remember, recall, note, forget, forget_id, forget_namespace, forget_user, get):
        group.add_command(command)
