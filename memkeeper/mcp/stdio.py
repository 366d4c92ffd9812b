"""The MCP server over stdio: one client (the process that started us), one user.

The client speaks JSON-RPC on our standard input and output, so nothing else may write to
standard output: logs go to standard error (:mod:`memkeeper.logs`, configured by the CLI),
and the SDK's own loggers are kept at warning unless debugging. The server acts for the one
user given by ``--user`` (default: the OS user name); a call naming another user is refused
(:class:`~memkeeper.mcp.auth.Principal`). It ends when the client closes our standard input.
"""

from __future__ import annotations

from memkeeper.mcp.auth import Principal
from memkeeper.store import MemoryStore


def serve_stdio(store: MemoryStore, user: str) -> None:
    """Serve ``store`` for ``user`` on standard input and output until the client leaves."""
    import anyio
    from mcp.server.stdio import stdio_server

    from memkeeper.mcp.server import build_server, fixed_principal

    server = build_server(store, fixed_principal(Principal(user)))

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
