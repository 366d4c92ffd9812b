"""``memkeeper ui``: the memory and its maintenance as a local web page."""

from __future__ import annotations

import click

from memkeeper import logs
from memkeeper.cli import App, pass_app, yes_option


@click.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8766, show_default=True, help="Port."
)
@click.option(
    "--auth/--no-auth",
    default=None,
    help="Ask for a token from [mcp] token_file (the MCP server's). Default: on for any "
    "address that is not loopback, where it cannot be turned off.",
)
@click.option(
    "--allow-writes",
    is_flag=True,
    help="Offer the write actions (undo, review, forget); without it the pages only read.",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a web browser.")
@yes_option
@pass_app
def ui(
    app: App,
    host: str,
    port: int,
    auth: bool | None,
    allow_writes: bool,
    open_browser: bool,
    yes: bool,
) -> None:
    """Serve a local web page of the memory: overview, runs, review, users, forget.

    The same database and config as every other command. Read-only unless --allow-writes;
    on 127.0.0.1 (the default) without a token, anywhere else only with the tokens of
    [mcp] token_file (an admin token sees everything, a user's token only that user). Stop
    with Ctrl-C.
    """
    if allow_writes:
        app.check_now(yes=yes)
    from memkeeper.ui.app import UiServer
    from memkeeper.ui.security import plan

    config = app.config
    level = {0: config.logging.level, 1: "info"}.get(app.verbose, "debug")
    logs.configure(level=level, fmt=config.logging.format)
    how = plan(config, host=host, port=port, auth=auth, allow_writes=allow_writes)
    how.pretend_now = app.now is not None
    store = app.store(create=False)
    store.actor = "ui"

    def started(url: str) -> None:
        click.echo(f"memkeeper ui: {url} (Ctrl-C to stop)", err=True)
        if open_browser:
            import webbrowser

            webbrowser.open(url)

    UiServer(store, how).run(on_start=started)


def register(group: click.Group) -> None:
    group.add_command(ui)
