"""``memkeeper mcp``: memkeeper's memory as MCP tools, over stdio or streamable HTTP."""

from __future__ import annotations

import getpass
import json

import click

from memkeeper import logs
from memkeeper.cli import App, pass_app
from memkeeper.errors import ConfigError, InvalidInput


def default_user() -> str:
    """The OS user name: whom a stdio server acts for unless ``--user`` says otherwise."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        raise click.UsageError("cannot tell the OS user name: give --user") from None


def _print_tools(fmt: str) -> None:
    from memkeeper.mcp.docs import tools_markdown
    from memkeeper.mcp.server import mcp_tools

    tools = mcp_tools()
    if fmt == "markdown":
        click.echo(tools_markdown(tools))
    else:
        dumped = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]
        click.echo(json.dumps(dumped, ensure_ascii=False, indent=2))


def _listen_address(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--http [HOST:]PORT``: a malformed address is a usage error (exit 2)."""
    if value is not None:
        from memkeeper.mcp.http import parse_listen

        try:
            parse_listen(value)
        except InvalidInput as exc:
            raise click.BadParameter(str(exc), param=param) from None
    return value


@click.command("mcp")
@click.option(
    "--http",
    "listen",
    callback=_listen_address,
    metavar="[HOST:]PORT",
    help="Serve over streamable HTTP at http://HOST:PORT/mcp instead of stdio (HOST "
    "defaults to 127.0.0.1). Needs [mcp] token_file, or --no-auth on 127.0.0.1.",
)
@click.option(
    "--user",
    help="The user the server acts for, over stdio and with --no-auth (default: the OS user "
    "name). Calls naming another user are refused.",
)
@click.option(
    "--no-auth",
    is_flag=True,
    help="HTTP without tokens, acting for --user: allowed on 127.0.0.1 only.",
)
@click.option(
    "--tools",
    "show_tools",
    type=click.Choice(["markdown", "json"]),
    help="Print the tools (the documentation's table, or their JSON schemas) and exit.",
)
@pass_app
def mcp(
    app: App, listen: str | None, user: str | None, no_auth: bool, show_tools: str | None
) -> None:
    """Serve memory to AI agents over the Model Context Protocol.

    Over stdio (the default) for one client that started this process, acting for one user;
    over HTTP (--http) for many, each request authenticated by a bearer token from the token
    file. Tools: remember, recall, search, forget, add_note, context, append_message,
    record_episode, explain, list_memories, episodes, history; the prompt memory_context.
    Protocol 2026-07-28 and the initialize handshake (2025-06-18, 2025-11-25) on both.
    Every change is logged with actor mcp:<tool> and the client's name in its source. Logs
    go to standard error (stdio uses standard output).
    """
    if show_tools:
        _print_tools(show_tools)
        return
    if app.now is not None:
        raise ConfigError(
            "--now / MEMKEEPER_NOW cannot be used with mcp: the server follows the real clock"
        )
    if no_auth and not listen:
        raise click.UsageError("--no-auth applies to --http only")
    from memkeeper.mcp.sdk_logs import quiet_sdk
    from memkeeper.mcp.store_ref import StoreRef

    config = app.config
    level = {0: config.logging.level, 1: "info"}.get(app.verbose, "debug")
    logs.configure(level=level, fmt=config.logging.format)
    quiet_sdk(level == "debug")
    if listen:
        from memkeeper.mcp.http import HttpServer, plan

        if no_auth:
            user = user or default_user()
        how = plan(listen, config, no_auth=no_auth, user=user)
        # Opened by the first call that needs it: only a write creates the database.
        with StoreRef(app.db, config=config) as stores:
            HttpServer(stores, how).run()
        return
    from memkeeper import validation
    from memkeeper.mcp.stdio import serve_stdio

    who = validation.identifier(
        "--user", user or default_user(), max_chars=config.limits.max_key_chars
    )
    with StoreRef(app.db, config=config) as stores:
        serve_stdio(stores, who)


def register(group: click.Group) -> None:
    group.add_command(mcp)
