"""The SDK 2.x client, the way every MCP test connects: in-process, over HTTP with a token,
or over stdio to a real ``memkeeper mcp`` process, in either era of the protocol.

``MODES``: ``"2026-07-28"`` (a client that speaks only the current protocol: no initialize,
every request stateless) and ``"2025-06-18"`` (a client that speaks only that version, through
the initialize handshake: the SDK's legacy mode with its handshake version set to 2025-06-18).
``LEGACY`` is the SDK's own legacy mode (it offers 2025-11-25).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx2
import mcp.client.session as client_session
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client

MODERN = "2026-07-28"
OLD = "2025-06-18"
LEGACY = "legacy"
MODES = (MODERN, OLD)


@contextmanager
def _speaking(mode: str) -> Iterator[str]:
    """The SDK's ``mode`` for ours; for 2025-06-18, the handshake offers that version only."""
    if mode != OLD:
        yield mode
        return
    saved = client_session.LATEST_HANDSHAKE_VERSION
    client_session.LATEST_HANDSHAKE_VERSION = OLD
    try:
        yield LEGACY
    finally:
        client_session.LATEST_HANDSHAKE_VERSION = saved


def info(name: str) -> types.Implementation:
    return types.Implementation(name=name, version="1.0")


@asynccontextmanager
async def in_process(server: Any, client: str, mode: str = MODERN) -> AsyncIterator[Client]:
    with _speaking(mode) as sdk_mode:
        async with Client(server, mode=sdk_mode, client_info=info(client)) as connected:
            yield connected


@asynccontextmanager
async def over_http(
    url: str, token: str | None, client: str, mode: str = MODERN, **headers: str
) -> AsyncIterator[Client]:
    sent = dict(headers)
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with httpx2.AsyncClient(headers=sent, timeout=30) as http:
        transport = streamable_http_client(url, http_client=http)
        with _speaking(mode) as sdk_mode:
            async with Client(transport, mode=sdk_mode, client_info=info(client)) as connected:
                yield connected


@asynccontextmanager
async def over_stdio(
    params: StdioServerParameters, client: str, mode: str = MODERN
) -> AsyncIterator[Client]:
    with _speaking(mode) as sdk_mode:
        async with Client(params, mode=sdk_mode, client_info=info(client)) as connected:
            yield connected


def protocol_of(client: Client) -> str:
    """The protocol version the connection runs at."""
    return str(client.session.protocol_version)
