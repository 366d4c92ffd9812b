"""The MCP server object: memkeeper's tools on the SDK's low-level :class:`Server`.

One server object serves every session of a transport (stdio: one; streamable HTTP: many)
over one :class:`~memkeeper.store.MemoryStore` opened with actor ``mcp``. The event loop never
touches SQLite: each call runs in a worker thread (``anyio.to_thread``); the store's
connections are shared across threads (``check_same_thread=False``) and serialized by its
lock, so a slow write never stalls the other sessions' I/O.

Who a call acts for is decided per call by ``principal_of`` (the stdio ``--user``; on HTTP,
the bearer token of the request that carried the call, see :mod:`memkeeper.mcp.http`); the
client's name comes from the session's initialize handshake. Tool errors are results with
``isError`` and memkeeper's one-line message; an unexpected failure is logged with its
traceback (to standard error) and answered with one line naming its type.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import structlog
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.context import RequestContext

from memkeeper import __version__, logs
from memkeeper.errors import MemkeeperError
from memkeeper.mcp.auth import Principal
from memkeeper.mcp.calls import Caller, call, client_name
from memkeeper.mcp.schemas import TOOLS, ToolSpec
from memkeeper.store import MemoryStore

log = structlog.get_logger("memkeeper.mcp")

INSTRUCTIONS = (
    "memkeeper is this user's long-term memory. At the start of a turn call search (or "
    "context) with the user's message; remember stable facts and preferences the user states "
    "(one key each), add_note for events and decisions, forget when the user asks you to. "
    "Memories expire unless used, and every change can be explained."
)

PrincipalOf = Callable[[RequestContext[Any, Any, Any]], Principal]


def mcp_tool(spec: ToolSpec) -> types.Tool:
    """The SDK's Tool for one of memkeeper's tool definitions."""
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        inputSchema=spec.input_schema(),
        annotations=types.ToolAnnotations(
            title=spec.title,
            readOnlyHint=spec.read_only,
            destructiveHint=spec.destructive,
            idempotentHint=spec.idempotent,
            openWorldHint=False,
        ),
    )


def mcp_tools() -> list[types.Tool]:
    """Every tool the server lists, in order."""
    return [mcp_tool(spec) for spec in TOOLS]


def _result(data: dict[str, Any]) -> types.CallToolResult:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structuredContent=data
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=logs.redact(message))], isError=True
    )


def fixed_principal(principal: Principal) -> PrincipalOf:
    """``principal_of`` for a server that acts for one principal (stdio, ``--no-auth``)."""
    return lambda _context: principal


def build_server(store: MemoryStore, principal_of: PrincipalOf) -> Server[Any, Any]:
    """An MCP server with memkeeper's tools over ``store``."""
    server: Server[Any, Any] = Server("memkeeper", version=__version__, instructions=INSTRUCTIONS)
    tools = mcp_tools()

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return tools

    # The SDK's own schema check would answer in jsonschema's words, echoing the offending
    # value; memkeeper checks every argument itself (memkeeper.mcp.calls), in the API's words.
    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        context = server.request_context
        params = context.session.client_params
        client = client_name(params.clientInfo.name if params is not None else None)
        tool = name[:64]  # the client's word: kept short in logs and messages
        try:
            caller = Caller(principal_of(context), client)
            data = await anyio.to_thread.run_sync(partial(call, store, caller, name, arguments))
        except MemkeeperError as exc:
            log.info("tool call refused", tool=tool, client=client, error=logs.redact(str(exc)))
            return _error(str(exc))
        except Exception as exc:
            logs.log_failure(log, "tool call failed", exc, tool=tool, client=client)
            return _error(f"internal error in {tool} ({type(exc).__name__}); see the server log")
        log.debug("tool call", tool=tool, client=client, principal=caller.principal.label)
        return _result(data)

    return server
