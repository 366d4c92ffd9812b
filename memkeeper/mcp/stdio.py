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


class _WatchedInput:
    """The transport's read stream, noting in ``state`` when the client's input ends."""

    def __init__(self, inner: Any, state: InputState) -> None:
        self._inner = inner
        self._state = state

    def __getattr__(self, name: str) -> Any:  # last_context and the like: the inner stream's
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        import anyio

        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._state.ended = True
            raise

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
            watched = _WatchedInput(read_stream, state)
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
