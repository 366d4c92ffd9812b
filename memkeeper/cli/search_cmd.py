"""memkeeper search and context: find a user's memories by meaning, with each score
component; print the prompt prefill an agent puts in its system prompt."""

from __future__ import annotations

import click

from memkeeper.cli import (
    App,
    json_option,
    limit_type,
    memory_actions,
    namespace_option,
    pass_app,
    print_json,
    required_text,
    yes_option,
)
from memkeeper.records import KINDS


@click.command()
@click.argument("user", callback=required_text)
@click.argument("query", callback=required_text)
@namespace_option
@click.option(
    "--limit",
    type=limit_type(),
    help="The best K hits by score (default: [search] limit).",
)
@click.option("--kind", "kinds", multiple=True, type=click.Choice(KINDS), help="Only this kind.")
@click.option("--include-cold", is_flag=True, help="Also search cold storage (hits come back).")
@yes_option
@json_option
@pass_app
def search(
    app: App,
    user: str,
    query: str,
    namespace: str,
    limit: int | None,
    kinds: tuple[str, ...],
    include_cold: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Find USER's memories relevant to QUERY (the namespace and the profile), best first.

    Each hit shows its score and components: similarity, keyword, confidence, recency. Hits
    are marked used, as recall marks them. Without vectors (no local model in the cache, no
    key for the configured endpoint, entries not embedded yet) the search is keyword-only,
    and a line on stderr says why.
    A last line on stderr gives the query embedding's time apart from the search's own.
    """
    memory_actions.search(
        app,
        user,
        query,
        namespace=namespace,
        limit=limit,
        kinds=kinds,
        include_cold=include_cold,
        yes=yes,
        as_json=as_json,
    )


@click.command("context")
@click.argument("user", callback=required_text)
@namespace_option
@click.option(
    "--query",
    help="Also the entries relevant to this message (found by search, so marked used).",
)
@click.option(
    "--limit",
    type=limit_type(),
    help="The best K entries by score in the slots (default: [context] limit).",
)
@yes_option
@json_option
@pass_app
def context_command(
    app: App,
    user: str,
    namespace: str,
    query: str | None,
    limit: int | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Print USER's prompt prefill: what an agent puts in its system prompt.

    The best active, confident entries of the namespace and of the user's profile (the
    default namespace), ranked by the retention score; with --query, the entries relevant
    to it; the namespace's latest episodes. The same text as context() in Python and the
    MCP context tool. Nothing is marked used unless --query finds something.
    """
    if query is not None:
        app.check_now(yes=yes)  # the hits of a query are marked used: a write
    found = app.store(create=False).context(user, namespace=namespace, limit=limit, query=query)
    if as_json:
        print_json(found.to_dict())
    elif found.text:
        click.echo(found.text)
    else:
        click.echo(f"nothing to prefill for {user!r}", err=True)


def register(group: click.Group) -> None:
    group.add_command(search)
    group.add_command(context_command)
