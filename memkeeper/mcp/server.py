"""The MCP server object: memkeeper's tools (and its prompt) on the SDK's low-level
:class:`Server` (mcp 2.x).

One server object serves every connection of a transport over one
:class:`~memkeeper.store.MemoryStore` opened with actor ``mcp``, in both eras of the protocol:
2026-07-28 (no handshake: every request carries its protocol version and client info, and
``server/discover`` describes the server) and the ``initialize`` handshake of 2025-06-18 and
2025-11-25. The SDK routes each message to the handlers below, whatever the era. A
``recall`` or keyword-only ``search`` that only reads is answered on the event loop itself
(:mod:`memkeeper.mcp.inline`: a read never waits for the write lock); every other call runs
in a worker thread (``anyio.to_thread``) on a store borrowed from the pool
(:mod:`memkeeper.mcp.store_ref`).

Who a call acts for is decided per call by ``principal_of`` (the stdio ``--user``; on HTTP,
the bearer token of the request that carried the call, see :mod:`memkeeper.mcp.http`); the
client's name comes from the handshake (legacy) or the request's own client info (2026-07-28).
Tool errors are results with ``isError`` and memkeeper's one-line message; an unexpected
failure is logged with its traceback (to standard error) and answered with one line naming
its type. An unknown tool or prompt, or malformed params, get the protocol's error
(-32602, invalid params), not a tool result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from memkeeper import __version__, logs
from memkeeper.errors import MemkeeperError
from memkeeper.mcp.answer import error_text, result_text, run_tool
from memkeeper.mcp.auth import Principal
from memkeeper.mcp.calls import Caller, client_name, unknown_tool
from memkeeper.mcp.prompts import PROMPTS, prompt_result
from memkeeper.mcp.schemas import BY_NAME, TOOLS, ToolSpec
from memkeeper.mcp.store_ref import StoreRef
from memkeeper.store import MemoryStore

log = logs.get_logger("memkeeper.mcp")

INSTRUCTIONS = (
    "memkeeper is this user's long-term memory. At the start of a turn call search (or "
    "context) with the user's message; remember stable facts and preferences the user states "
    "(one key each), add_note for events and decisions, forget when the user asks you to. "
    "Memories expire unless used, and every change can be explained."
)

PrincipalOf = Callable[[ServerRequestContext[Any, Any]], Principal]


def mcp_tool(spec: ToolSpec) -> types.Tool:
    """The SDK's Tool for one of memkeeper's tool definitions."""
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema(),
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=False,
        ),
    )


def mcp_tools() -> list[types.Tool]:
    """Every tool the server lists, in order."""
    return [mcp_tool(spec) for spec in TOOLS]


def _result(data: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=result_text(data))], structured_content=data
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=error_text(message))], is_error=True
    )


@dataclass
class InputState:
    """Whether the client's input has ended (stdio: standard input closed)."""

    ended: bool = False


def fixed_principal(principal: Principal) -> PrincipalOf:
    """``principal_of`` for a server that acts for one principal (stdio, ``--no-auth``)."""
    return lambda _context: principal


def caller_client(context: ServerRequestContext[Any, Any]) -> str:
    """The client's self-given name: from the handshake, or the 2026-07-28 request's meta."""
    params = context.session.client_params
    return client_name(params.client_info.name if params is not None else None)


def build_server(
    store: MemoryStore | StoreRef,
    principal_of: PrincipalOf,
    *,
    input_state: InputState | None = None,
) -> Server[Any]:
    """An MCP server with memkeeper's tools and prompt over ``store``.

    With ``input_state`` (stdio), a call that finishes after the client's input ended is
    logged at info level: its write stands, its answer is dropped (nobody can read it).
    """
    stores = StoreRef.of(store)
    tools = types.ListToolsResult(tools=mcp_tools())
    prompts = types.ListPromptsResult(prompts=[prompt.mcp_prompt() for prompt in PROMPTS])

    async def list_tools(
        _context: ServerRequestContext[Any, Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return tools

    # The SDK checks nothing against the schema here: memkeeper checks every argument itself
    # (memkeeper.mcp.calls), in the API's words, never echoing a value back.
    async def call_tool(
        context: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in BY_NAME:
            # Not a refused call but a request for nothing: the protocol's invalid-params
            # error (the spec's "unknown tool"), as for an unknown prompt or method.
            raise MCPError(types.INVALID_PARAMS, unknown_tool(params.name))
        data, failed = await run_tool(
            stores,
            partial(principal_of, context),
            caller_client(context),
            params.name,
            params.arguments,
        )
        if input_state is not None and input_state.ended:
            log.info(
                "the client left during a tool call; its answer is dropped", tool=params.name[:64]
            )
        return _result(data) if data is not None else _error(failed or "")

    async def list_prompts(
        _context: ServerRequestContext[Any, Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return prompts

    async def get_prompt(
        context: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        client = caller_client(context)
        try:
            caller = Caller(principal_of(context), client)
            return await anyio.to_thread.run_sync(
                partial(prompt_result, stores, caller, params.name, params.arguments),
                limiter=stores.limiter,
            )
        except MemkeeperError as exc:
            # A prompt has no isError result: the protocol's invalid-params error, one line.
            log.info("prompt refused", prompt=params.name[:64], client=client)
            raise MCPError(types.INVALID_PARAMS, logs.redact(str(exc))) from None

    server: Server[Any] = Server(
        "memkeeper",
        version=__version__,
        instructions=INSTRUCTIONS,
        # No tool declares an argument as an Mcp-Param-* header, so there is nothing for the
        # SDK to check against them: without this it lists every tool and walks the schema
        # of each 2026-07-28 call (an eighth of the server's time in the bench's profile).
        get_tool_input_schema=lambda _name: None,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )
    # The SDK's default OpenTelemetry middleware opens a span per message even with no
    # exporter installed: a cost on every call that memkeeper's own logs make redundant.
    server.middleware = []
    return server
