"""A 2026-07-28 ``tools/call`` over HTTP answered without the SDK's generic request path.

The profile of ``memkeeper bench --mcp-clients 8`` (py-spy ``--gil`` on the server) showed
the SDK's per-request machinery costing about as much as memkeeper's own work in a
``recall``: a Starlette ``Request``, the transport-security and header ladders, pydantic
models of the JSON-RPC envelope and of the params, a born-ready ``Connection`` with its
exit stack and cancel scopes, the handler's ``CallToolResult`` dumped, re-validated by the
per-version result sieve and dumped again, then a Starlette ``Response``. A stateless
``tools/call`` is one self-contained POST, and almost every one an agent sends has the same
plain shape; :class:`FastCalls` answers exactly those itself and hands every other request
to the SDK untouched (the Gate replays its body), so each protocol decision (an error, a
rejection, a log line) is still the SDK's own.

A request is taken here only when every check the SDK would make passes and nothing is
left for the SDK to decide: a POST with ``MCP-Protocol-Version`` a 2026-era version, no
session id, no routing header repeated, no ``Mcp-Param-*`` header; ``Content-Type`` JSON,
``Host`` and ``Origin`` allowed by the DNS-rebinding settings, ``Accept`` taking JSON; a
body that is one JSON-RPC request (``jsonrpc``, an integer or string ``id``, ``method``
``tools/call``, ``params``, nothing else) whose params hold a known tool's ``name``, an
object (or no) ``arguments`` and an ``_meta`` of the envelope's keys only, its protocol
version equal to the header, ``Mcp-Method`` and ``Mcp-Name`` equal to the body's; and
client info and capabilities that the SDK's own models accept (checked once per distinct
value and remembered). The answer is the SDK's, byte for byte: the same result fields, the
``resultType`` and ``serverInfo`` stamp the SDK adds, the same JSON encoding and headers
(``tests/test_mcp_fast_call.py`` compares both paths' responses for every tool and for
errors, bad arguments, unknown tools and rejected envelopes).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from memkeeper.mcp.answer import error_text, result_text, run_tool
from memkeeper.mcp.auth import Principal
from memkeeper.mcp.calls import client_name
from memkeeper.mcp.schemas import BY_NAME
from memkeeper.mcp.store_ref import StoreRef

Scope = MutableMapping[str, Any]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
MODERN_VERSIONS = frozenset({"2026-07-28"})
"""The stateless protocol versions taken here (the SDK's ``MODERN_PROTOCOL_VERSIONS``)."""

_WATCHED = frozenset(
    {
        b"content-type",
        b"host",
        b"origin",
        b"accept",
        b"mcp-protocol-version",
        b"mcp-method",
        b"mcp-name",
        b"mcp-session-id",
    }
)
_ENVELOPE_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PARAMS_KEYS = frozenset({"name", "arguments", "_meta"})
_META_KEYS = frozenset({PROTOCOL_VERSION_KEY, CLIENT_INFO_KEY, CLIENT_CAPABILITIES_KEY})
_MAX_REMEMBERED = 256
"""Distinct ``_meta`` envelopes whose validity is remembered."""


@dataclass(frozen=True, slots=True)
class FastCall:
    """A ``tools/call`` this module answers: its id, tool, arguments and client name."""

    request_id: int | str
    name: str
    arguments: dict[str, Any] | None
    client: str


def _allowed(value: str | None, allowed: tuple[str, ...], *, empty_ok: bool) -> bool:
    """The SDK's Host/Origin rule: listed, or a listed ``name:*`` with any port."""
    if not value:
        return empty_ok
    if value in allowed:
        return True
    return any(entry.endswith(":*") and value.startswith(entry[:-2] + ":") for entry in allowed)


def _accepts_json(accept: str) -> bool:
    """Whether an ``Accept`` header takes JSON, as the SDK's ``check_accept_headers``."""
    types = [part.strip().split(";")[0].strip().lower() for part in accept.split(",")]
    return any(t in ("*/*", "application/json", "application/*") for t in types)


class FastCalls:
    """Recognizes the plain stateless ``tools/call`` and answers it as the SDK would."""

    def __init__(
        self,
        stores: StoreRef,
        *,
        allowed_hosts: list[str],
        allowed_origins: list[str],
        server_info: dict[str, Any],
    ) -> None:
        self.stores = stores
        self.hosts = tuple(allowed_hosts)
        self.origins = tuple(allowed_origins)
        self.server_info = server_info
        self._valid: dict[str, bool] = {}
        self.answered = 0  # calls answered here (for tests and logs)

    def recognize(self, scope: Scope, body: bytes) -> FastCall | None:
        """The call, if this request is one answered here; None: the SDK's to answer."""
        if scope.get("method") != "POST":
            return None
        headers: dict[bytes, str] = {}
        for key, value in scope.get("headers", ()):
            if key in _WATCHED:
                if key in headers:
                    return None  # repeated: first-copy and last-copy readers disagree
                headers[key] = value.decode("latin-1")
            elif key.startswith(b"mcp-param-"):
                return None
        version = headers.get(b"mcp-protocol-version")
        if version not in MODERN_VERSIONS or b"mcp-session-id" in headers:
            return None
        if not headers.get(b"content-type", "").lower().startswith("application/json"):
            return None
        if not _allowed(headers.get(b"host"), self.hosts, empty_ok=False):
            return None
        if not _allowed(headers.get(b"origin"), self.origins, empty_ok=True):
            return None
        if not _accepts_json(headers.get(b"accept", "")):
            return None
        if headers.get(b"mcp-method") != "tools/call":
            return None
        return self._call_of(body, version, headers.get(b"mcp-name"))

    def _call_of(self, body: bytes, version: str, name_header: str | None) -> FastCall | None:
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(decoded, dict) or decoded.keys() - _ENVELOPE_KEYS:
            return None
        request_id = decoded.get("id")
        if decoded.get("jsonrpc") != "2.0" or decoded.get("method") != "tools/call":
            return None
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            return None
        params = decoded.get("params")
        if not isinstance(params, dict) or params.keys() - _PARAMS_KEYS:
            return None
        name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta")
        if not isinstance(name, str) or name not in BY_NAME or name_header != name:
            return None
        if arguments is not None and not isinstance(arguments, dict):
            return None
        if not isinstance(meta, dict) or meta.keys() - _META_KEYS:
            return None
        if meta.get(PROTOCOL_VERSION_KEY) != version or CLIENT_CAPABILITIES_KEY not in meta:
            return None
        if not self._envelope_ok(version, meta):
            return None
        info = meta.get(CLIENT_INFO_KEY)
        client = client_name(info.get("name") if isinstance(info, dict) else None)
        return FastCall(request_id, name, arguments, client)

    def _envelope_ok(self, version: str, meta: dict[str, Any]) -> bool:
        """Whether the SDK accepts this ``_meta`` envelope as it is: its params check of a
        ``tools/call`` passes, and its models take the client info (when given) and the
        capabilities, so it would name the client as we do. Checked once per distinct
        envelope."""
        key = json.dumps(meta, sort_keys=True)
        known = self._valid.get(key)
        if known is None:
            known = _sdk_accepts(version, meta)
            if len(self._valid) >= _MAX_REMEMBERED:
                self._valid.clear()
            self._valid[key] = known
        return known

    async def answer(self, call: FastCall, principal: Principal, send: Send) -> None:
        """Run the call and send the SDK's response for it."""
        self.answered += 1
        data, failed = await run_tool(
            self.stores, partial(_given, principal), call.client, call.name, call.arguments
        )
        if data is not None:
            result: dict[str, Any] = {
                "content": [{"text": result_text(data), "type": "text"}],
                "isError": False,
                "resultType": "complete",
                "structuredContent": data,
            }
        else:
            result = {
                "content": [{"text": error_text(failed or ""), "type": "text"}],
                "isError": True,
                "resultType": "complete",
            }
        result["_meta"] = {SERVER_INFO_KEY: dict(self.server_info)}
        reply = {"jsonrpc": "2.0", "id": call.request_id, "result": result}
        payload = json.dumps(reply, separators=(",", ":")).encode("utf-8")
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-length", str(len(payload)).encode("latin-1")),
                    (b"content-type", b"application/json"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


def _given(principal: Principal) -> Principal:
    return principal


def _sdk_accepts(version: str, meta: dict[str, Any]) -> bool:
    """The SDK's own verdict on a ``tools/call`` envelope (see :meth:`FastCalls._envelope_ok`)."""
    from mcp.types import ClientCapabilities, Implementation
    from mcp_types import methods
    from pydantic import ValidationError

    info, capabilities = meta.get(CLIENT_INFO_KEY), meta.get(CLIENT_CAPABILITIES_KEY)
    try:
        methods.validate_client_request("tools/call", version, {"name": "-", "_meta": meta})
        ClientCapabilities.model_validate(capabilities, by_name=False)
        if info is not None:
            Implementation.model_validate(info, by_name=False)
    except (ValidationError, ValueError, KeyError):
        return False
    return True
