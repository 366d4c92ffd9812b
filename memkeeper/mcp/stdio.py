"""The MCP server over stdio: one client (the process that started us), one user.

The client speaks JSON-RPC on our standard input and output, so nothing else may write to
standard output: logs go to standard error (:mod:`memkeeper.logs`, configured by the CLI),
and the SDK's own loggers are kept at warning unless debugging. The server acts for the one
user given by ``--user`` (default: the OS user name); a call naming another user is refused
(:class:`~memkeeper.mcp.auth.Principal`). Both eras of the protocol are served (the client's
first message decides): ``initialize`` (2025-06-18, 2025-11-25) or 2026-07-28 requests.

The end of standard input is the normal end of a session: :func:`serve_stdio` returns (the
CLI exits 0, nothing on standard error). A tool call still running then is finished (its
write commits) and its answer, which nobody can read, is dropped with one info line.
"""

from __future__ import annotations

from typing import Any

from memkeeper import logs
from memkeeper.mcp.auth import Principal
from memkeeper.mcp.server import InputState
from memkeeper.mcp.store_ref import StoreRef
from memkeeper.store import MemoryStore

log = logs.get_logger("memkeeper.mcp")


def refusal_of(exc: Exception) -> tuple[int, str] | None:
    """The JSON-RPC error (code, message) for a line the transport could not read as a
    message, or None: a batch (an array) is an invalid request (-32600: MCP takes one message
    at a time), text that is not JSON a parse error (-32700), other JSON an invalid request."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return None
    errors = exc.errors(include_url=False)
    if any(error.get("type") == "json_invalid" for error in errors):
        return -32700, "Parse error: the line is not JSON"
    if errors and all(isinstance(error.get("input"), list) for error in errors):
        return -32600, (
            "Invalid Request: a JSON-RPC batch (an array of messages) is not accepted; "
            "send each request or notification on a line of its own"
        )
    return -32600, "Invalid Request: not a JSON-RPC request, notification or response"


class _WatchedInput:
    """The transport's read stream, noting in ``state`` when the client's input ends, and
    answering a line that is no message (a batch, not JSON) with the protocol's error on
    ``output``: the SDK would drop it without a word, and the client wait for ever."""

    def __init__(self, inner: Any, state: InputState, output: Any = None) -> None:
        self._inner = inner
        self._state = state
        self._output = output

    def __getattr__(self, name: str) -> Any:  # last_context and the like: the inner stream's
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        import anyio

        while True:
            try:
                item = await self._inner.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                self._state.ended = True
                raise
            refusal = refusal_of(item) if isinstance(item, Exception) else None
            if refusal is None or self._output is None:
                return item
            await self._refuse(*refusal)

    async def _refuse(self, code: int, message: str) -> None:
        from mcp import types
        from mcp.shared.message import SessionMessage

        log.info("refused an MCP message", reason=message)
        error = types.JSONRPCError(
            jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message)
        )
        await self._output.send(SessionMessage(error))

    def __aiter__(self) -> _WatchedInput:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedInput:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._inner.__aexit__(*exc_info)


def serve_stdio(store: MemoryStore | StoreRef, user: str) -> None:
    """Serve ``store`` for ``user`` on standard input and output until the client leaves."""
    import anyio
    from mcp.server.stdio import stdio_server

    from memkeeper.mcp.server import build_server, fixed_principal
    from memkeeper.mcp.store_ref import StoreRef

    state = InputState()
    stores = StoreRef.of(store)
    server = build_server(stores, fixed_principal(Principal(user)), input_state=state)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            watched = _WatchedInput(read_stream, state, write_stream)
            await server.run(watched, write_stream, server.create_initialization_options())

    try:
        anyio.run(main)
    except BaseException as exc:
        if not _only_closed_streams(exc):
            raise
        log.info("the client left during a call; its answer was dropped")
    finally:
        if stores is not store:  # a ref made here: write its buffered uses, stop its flusher
            stores.close()


def _only_closed_streams(exc: BaseException) -> bool:
    """Whether ``exc`` is (a group of) nothing but the streams closing under a finished call."""
    import anyio

    closed: tuple[type[BaseException], ...] = (
        anyio.ClosedResourceError,
        anyio.BrokenResourceError,
        BrokenPipeError,
    )
    if isinstance(exc, BaseExceptionGroup):
        group: Any = exc
        return all(_only_closed_streams(inner) for inner in group.exceptions)
    return isinstance(exc, closed)
