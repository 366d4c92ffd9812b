"""The ASGI layer in front of the SDK's HTTP transport: who is calling, and the limits.

:class:`Gate` runs for every request before the SDK sees it (see :mod:`memkeeper.mcp.http`
for the whole server): the bearer token to a principal (401; more than one
``Authorization`` header: 400), the body size (413), the nesting depth of the body (400, a
JSON-RPC parse error, before any parser recurses into it), a request the SDK would
answer misleadingly (a batch; a 2026-07-28 request without its ``MCP-Protocol-Version``
header: :func:`misdirected`), and for a request that would
open a stateful session, the principal's cap on open sessions (429,
:mod:`memkeeper.mcp.sessions`). A plain stateless ``tools/call`` is then answered by
:mod:`memkeeper.mcp.fast_call` (the SDK's exact response, without its generic request
path); any other request goes on to the SDK with its principal in ``scope["state"]``
(:func:`principal_of_request`): identity is per request, not per session.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from memkeeper import logs
from memkeeper.errors import MemkeeperError
from memkeeper.mcp.auth import Principal, TokenTable
from memkeeper.mcp.fast_call import FastCalls
from memkeeper.mcp.sessions import SessionLimits

log = logs.get_logger("memkeeper.mcp")

PRINCIPAL_KEY = "memkeeper_principal"
MAX_JSON_DEPTH = 256
"""Deepest nesting of a request body: an MCP message needs a handful of levels."""
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""Protocol versions of the handshake era (the SDK routes any other to the stateless path)."""
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class HttpPlan:
    """What an HTTP server will do: where it listens and who may call it."""

    host: str
    port: int
    tokens: TokenTable | None
    open_user: str | None  # the one user of a --no-auth server
    max_request_bytes: int
    allowed_hosts: tuple[str, ...]
    allowed_origins: tuple[str, ...]
    session_idle_seconds: float = 300.0
    max_sessions_per_principal: int = 16
    fast_calls: bool = True  # plain stateless tools/call answered by memkeeper.mcp.fast_call


async def _answer(send: Send, status: int, message: str, headers: list[Any] | None = None) -> None:
    await _send_json(send, status, {"error": message}, headers)


async def _send_json(
    send: Send, status: int, payload: object, headers: list[Any] | None = None
) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON ``body`` nests arrays/objects deeper than ``limit`` (strings skipped).

    A linear scan, run only when the body has more brackets than ``limit`` at all.
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    depth = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


async def _parse_error(send: Send, message: str) -> None:
    error = {"code": -32700, "message": message}
    await _send_json(send, 400, {"jsonrpc": "2.0", "id": None, "error": error})


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value)
    return None


def opens_session(scope: Scope) -> bool:
    """Whether the SDK would open a stateful session for this request (as it routes them)."""
    if scope.get("method") != "POST" or _header(scope, b"mcp-session-id") is not None:
        return False
    version = _header(scope, b"mcp-protocol-version")
    return version is None or version.decode("latin-1") in HANDSHAKE_VERSIONS


PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
INVALID_REQUEST = -32600
HEADER_MISMATCH = -32020
"""The 2026-07-28 error of headers that do not match the body, or are missing."""


def _rpc_error(code: int, message: str, request_id: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def misdirected(scope: Scope, body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error for a POST the SDK would answer with words that mislead, or None.

    - A batch (a JSON array of messages): MCP over HTTP takes one message per POST (the
      2025-06-18 revision removed batches), so it is an invalid request (-32600), not the
      SDK's dump of the validation errors of each message type.
    - A request of protocol 2026-07-28 (its ``params._meta`` names the version) without the
      ``MCP-Protocol-Version`` header and without a session: the SDK routes a request by that
      header alone, so without it the request went to the handshake era's path and was told
      "Missing session ID". The 2026-07-28 transport requires the header and answers a
      missing or different one with -32020 (header mismatch): said so here, naming it.
    """
    if scope.get("method") != "POST":
        return None
    start = body.lstrip()[:1]
    if start == b"[":
        return _rpc_error(
            INVALID_REQUEST,
            "Invalid Request: a JSON-RPC batch (an array of messages) is not accepted; "
            "send each request or notification in a POST of its own",
        )
    if (
        start != b"{"
        or PROTOCOL_VERSION_KEY.encode() not in body
        or _header(scope, b"mcp-protocol-version") is not None
        or _header(scope, b"mcp-session-id") is not None
    ):
        return None
    try:
        message = json.loads(body)
        version = message["params"]["_meta"][PROTOCOL_VERSION_KEY]
    except (ValueError, TypeError, KeyError):
        return None  # the SDK's own answer (a parse error, a handshake-era request)
    if not isinstance(version, str) or version in HANDSHAKE_VERSIONS:
        return None
    request_id = message.get("id")
    return _rpc_error(
        HEADER_MISMATCH,
        f"Bad Request: missing MCP-Protocol-Version header: this request is protocol "
        f"{version[:32]} (params._meta says so), whose requests over HTTP carry the header "
        f"MCP-Protocol-Version: {version[:32]} (and Mcp-Method); without it the server takes "
        "a request for one of the initialize handshake's, which needs a session",
        request_id if isinstance(request_id, str | int) else None,
    )


class Gate:
    """The ASGI layer before the SDK: bearer token → principal, limits on size, depth and
    sessions."""

    def __init__(
        self,
        app: App,
        plan: HttpPlan,
        sessions: SessionLimits | None = None,
        fast: FastCalls | None = None,
    ) -> None:
        self.app = app
        self.plan = plan
        self.sessions = sessions
        self.fast = fast

    def _principal(self, scope: Scope) -> tuple[Principal | None, str]:
        headers = [v for k, v in scope.get("headers", []) if k.lower() == b"authorization"]
        if len(headers) > 1:
            return None, "more than one Authorization header"
        if self.plan.tokens is None:
            return Principal(self.plan.open_user), ""
        header = headers[0] if headers else b""
        scheme, _, token = header.decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None, "missing bearer token (Authorization: Bearer <token>)"
        principal = self.plan.tokens.lookup(token.strip())
        return principal, "" if principal else "unknown bearer token"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        principal, why = self._principal(scope)
        if principal is None:
            log.warning("refused an MCP request", reason=why, peer=_peer(scope))
            if why.startswith("more than one"):
                await _answer(send, 400, why)
            else:
                challenge = [(b"www-authenticate", b'Bearer realm="memkeeper"')]
                await _answer(send, 401, why, challenge)
            return
        limit = self.plan.max_request_bytes
        declared = dict(scope.get("headers", [])).get(b"content-length", b"0")
        if declared.isdigit() and int(declared) > limit:
            await _answer(send, 413, f"request body over the limit of {limit} bytes")
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > limit:
                await _answer(send, 413, f"request body over the limit of {limit} bytes")
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if too_deep(body):
            log.info("refused an MCP request", reason="JSON nested too deep", peer=_peer(scope))
            await _parse_error(send, f"Parse error: JSON nested deeper than {MAX_JSON_DEPTH}")
            return
        refusal = misdirected(scope, body)
        if refusal is not None:
            log.info("refused an MCP request", reason=refusal["error"]["message"][:80])
            await _send_json(send, 400, refusal)
            return
        if self.fast is not None:
            call = self.fast.recognize(scope, body)
            if call is not None:
                await self.fast.answer(call, principal, send)
                return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        scope.setdefault("state", {})[PRINCIPAL_KEY] = principal
        if self.sessions is None:
            await self.app(scope, replay, send)
        elif opens_session(scope):
            await self._open_session(principal, scope, replay, send)
        else:
            await self._in_session(principal, scope, replay, send)

    async def _in_session(
        self, principal: Principal, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Pass on a request, telling the session limits when one of a session starts and
        ends (and whether the session is gone: deleted, or unknown to the SDK). A session
        opened by another principal is answered 404, as an unknown one is: a token never
        rides on a session someone else opened (its client name, its SDK state)."""
        assert self.sessions is not None
        raw = _header(scope, b"mcp-session-id")
        if raw is None:
            await self.app(scope, receive, send)
            return
        session_id = raw.decode("latin-1")
        owner = self.sessions.owner(session_id)
        if owner is not None and owner != principal:
            log.warning(
                "refused an MCP request", reason="session of another token", peer=_peer(scope)
            )
            await _answer(send, 404, "unknown MCP session: open one with initialize")
            return
        status = 500

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message.get("status", 500))
            await send(message)

        self.sessions.began(session_id)
        try:
            await self.app(scope, receive, watch)
        finally:
            deleted = scope.get("method") == "DELETE" and status < 400
            self.sessions.ended(session_id, gone=deleted or status == 404)

    async def _open_session(
        self, principal: Principal, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Pass on a request that opens a session, if ``principal`` is under its cap."""
        assert self.sessions is not None
        if not self.sessions.admit(principal):
            cap, idle = self.sessions.cap, self.plan.session_idle_seconds
            log.warning(
                "refused an MCP session", reason="session cap", principal=principal.label, cap=cap
            )
            await _answer(
                send,
                429,
                f"too many open MCP sessions for this token ({cap}, [mcp] "
                f"max_sessions_per_principal): end one (HTTP DELETE) or let an idle one expire "
                f"({idle:g} s)",
                [(b"retry-after", str(max(int(idle), 1)).encode())],
            )
            return
        session_id: str | None = None

        async def watch(message: Message) -> None:
            nonlocal session_id
            if message["type"] == "http.response.start" and message.get("status", 500) < 400:
                found = [v for k, v in message.get("headers", []) if k == b"mcp-session-id"]
                session_id = found[0].decode("latin-1") if found else None
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            self.sessions.settle(principal, session_id)


def _peer(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "unknown"


def principal_of_request(context: Any) -> Principal:
    """The principal :class:`Gate` put on the request that carried this call."""
    request = context.request
    principal = request.scope.get("state", {}).get(PRINCIPAL_KEY) if request else None
    if not isinstance(principal, Principal):  # only reachable if the app is mounted without Gate
        raise MemkeeperError("this request was not authenticated")
    return principal
