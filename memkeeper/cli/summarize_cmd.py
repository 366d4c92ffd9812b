"""Commands about sessions the model will not summarize: list the parked ones, retry one.

``memkeeper summarize retry SESSION`` releases a parked session: the next summarize run
tries it once more (and parks it again at once if it is refused again).
``memkeeper review sessions`` lists the parked sessions with their last reason; ``status``
shows the same list. The state itself is :mod:`memkeeper.store.parking`'s.
"""

from __future__ import annotations

from typing import Any

import click

from memkeeper.cli import App, json_option, pass_app, print_json, required_text, yes_option
from memkeeper.cli.render import shown
from memkeeper.errors import InvalidInput, NotFound


def parked_list(app: App) -> tuple[Any, list[Any]]:
    """The store and every parked session (retry due or not), oldest parking first."""
    from memkeeper.summarize.parking import parked

    store = app.store(create=False)
    return store, parked(store.storage, now=store.now(), config=store.config.jobs.summarize)


def parked_lines(items: list[dict[str, Any]]) -> list[str]:
    """One line per parked session (as ``to_dict`` gives it): owner, session, failures,
    when it is retried, and the last reason."""
    lines = []
    for item in items:
        owner = item["user_id"] + (f"/{item['namespace']}" if item["namespace"] else "")
        retry = "retry due" if item["retry_due"] else f"retry {_minute(item['retry_at'])} UTC"
        lines.append(
            f"{shown(owner, 60)} session {shown(item['session_id'], 60)}: parked "
            f"{_minute(item['parked_at'])} UTC after {item['failures']} refusals; {retry}; "
            f"last: {shown(item['reason'], 200)}"
        )
    return lines


def _minute(stamp: str) -> str:
    return stamp[:16].replace("T", " ")


@click.command("sessions")
@json_option
@pass_app
def review_sessions(app: App, as_json: bool) -> None:
    """List the sessions the model will not summarize (parked), with their last reason.

    A parked session is skipped by summarize, extraction and merge until its retry is due
    ([jobs.summarize.parking] retry_after_days) or 'memkeeper summarize retry SESSION'.
    """
    store, items = parked_list(app)
    listed = [item.to_dict(store.now()) for item in items]
    if as_json:
        print_json(listed)
        return
    if not listed:
        click.echo("(no parked sessions)")
    for line in parked_lines(listed):
        click.echo(line)


@click.group("summarize")
def summarize_group() -> None:
    """Conversation summaries: sessions the model will not summarize."""


@summarize_group.command("retry")
@click.argument("session", callback=required_text)
@click.option("-u", "--user", help="The session's user (needed when two users share the id).")
@click.option("-n", "--namespace", help="The session's namespace.")
@yes_option
@json_option
@pass_app
def retry(
    app: App, session: str, user: str | None, namespace: str | None, yes: bool, as_json: bool
) -> None:
    """Release a parked SESSION: the next summarize run tries it once more.

    Exit 3 if no parked session has that id; 65 if several do (give --user/--namespace).
    """
    from memkeeper.store.parking import release

    app.check_now(yes=yes)
    store, items = parked_list(app)
    found = [
        item
        for item in items
        if item.session_id == session
        and (user is None or item.user_id == user)
        and (namespace is None or item.namespace == namespace)
    ]
    if not found:
        raise NotFound(f"no parked session {session!r}" + (f" of user {user!r}" if user else ""))
    if len(found) > 1:
        owners = ", ".join(sorted({f"{i.user_id!r}/{i.namespace!r}" for i in found}))
        raise InvalidInput(
            f"{len(found)} parked sessions have the id {session!r} ({owners}): "
            "say which with --user and --namespace"
        )
    release(store.storage, [found[0].ref], actor="cli:summarize-retry", now=store.now())
    if as_json:
        print_json({"released": [found[0].to_dict(store.now())]})
        return
    item = found[0]
    click.echo(
        f"released session {shown(item.session_id, 60)} of user {shown(item.user_id, 60)}: "
        "the next summarize run tries it again (memkeeper run-once --job summarize)"
    )


def register(group: click.Group) -> None:
    group.add_command(summarize_group)
    # get_command, not commands: the top-level group loads only the review group's module.
    review = group.get_command(click.Context(group), "review")
    if isinstance(review, click.Group):
        review.add_command(review_sessions)
