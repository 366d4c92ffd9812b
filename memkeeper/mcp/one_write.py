"""uvicorn's httptools protocol, sending each response in one write instead of two.

uvicorn writes a response's head as soon as the app sends ``http.response.start`` and its
body in a second ``write`` right after: two ``send`` system calls, two TCP segments, and on
loopback two wake-ups of the client. The profile of ``memkeeper bench --mcp-clients 8`` (one
client, cProfile of the server's event loop) showed those writes as the biggest single cost
of a tool call, about 0.27 ms each on the bench machine (a virtual machine, where waking a
process on another CPU is dear). :class:`OneWriteProtocol` gives uvicorn a transport that
joins the writes made in one step of the event loop and sends them together at the end of
the step (or before the connection closes): the bytes and their order are unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class _JoinedWrites:
    """A transport whose writes of one event-loop step go out as one ``write``."""

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] | None = None

    def write(self, data: bytes) -> None:
        if self._pending is None:
            self._pending = [data]
            self._loop.call_soon(self.flush)
        else:
            self._pending.append(data)

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def flush(self) -> None:
        """Send what the step wrote (nothing once the connection is closing)."""
        pending, self._pending = self._pending, None
        if pending and not self._transport.is_closing():
            self._transport.write(b"".join(pending))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def get_write_buffer_size(self) -> int:
        pending = sum(len(chunk) for chunk in self._pending or ())
        return pending + self._transport.get_write_buffer_size()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneWriteProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol over :class:`_JoinedWrites`."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_JoinedWrites(transport, self.loop))  # type: ignore[arg-type]
