"""memkeeper as an MCP server.

The memory tools over stdio and streamable HTTP, with authentication (README, "Agents in any
language: the MCP server"):

* :mod:`~memkeeper.mcp.schemas` — the tools as data: descriptions, JSON schemas, annotations;
* :mod:`~memkeeper.mcp.calls` — each tool's argument checks and its one ``MemoryStore`` call;
* :mod:`~memkeeper.mcp.auth` — principals (who a call acts for) and the token file;
* :mod:`~memkeeper.mcp.server` — the SDK's low-level server with those tools;
* :mod:`~memkeeper.mcp.stdio` and :mod:`~memkeeper.mcp.http` — the two transports;
* :mod:`~memkeeper.mcp.docs` — the README's tool table, rendered from the server's list.

Nothing here is imported by ``import memkeeper`` or the memory commands: the SDK, Starlette
and uvicorn load only when a server starts.
"""
