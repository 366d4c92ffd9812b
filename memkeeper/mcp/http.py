"""The MCP server over streamable HTTP: authentication, a size limit, and a uvicorn server.

The app (Starlette) has one endpoint, ``/mcp``: the SDK's (mcp 2.x)
:class:`~mcp.server.streamable_http_manager.StreamableHTTPSessionManager`, which serves both
eras of the protocol. A 2026-07-28 request (``MCP-Protocol-Version: 2026-07-28``) is one
self-contained POST: no session, so any memkeeper process serving the same database can
answer it. A client of the handshake era (2025-06-18, 2025-11-25) opens a stateful session
with ``initialize`` (so its name is known for every later call); sessions end after
``[mcp] session_idle_seconds`` idle, and each principal may hold at most
``[mcp] max_sessions_per_principal`` (:mod:`memkeeper.mcp.sessions`; over it: 429). In front
of the SDK, :class:`Gate`, for every request:

1. finds the principal: the ``Authorization: Bearer <token>`` header looked up in the token
   file (:mod:`memkeeper.mcp.auth`) — a missing or unknown token gets 401 and a one-line
   reason that never contains the token, more than one ``Authorization`` header 400 — or
   the one user of a ``--no-auth`` server;
2. reads the body up to ``[mcp] max_request_bytes``: more (declared or sent) gets 413; a
   body nested deeper than :data:`MAX_JSON_DEPTH` gets 400 with a JSON-RPC parse error
   (before any parser recurses into it);
3. hands the request on with its principal in ``scope["state"]``, where the tool handler
   reads it (:func:`principal_of_request`): identity is per request, not per session.

DNS-rebinding protection is on: only the loopback names on the server's port and
``[mcp] allowed_hosts`` are accepted as Host (421 otherwise).

:func:`plan` decides whether a server may start (no token file: only on a loopback address
with ``--no-auth``). :class:`HttpServer` runs uvicorn in a thread, either until SIGTERM or
Ctrl-C (``memkeeper mcp --http``: a graceful stop, exit 0) or while the maintenance service
runs (``memkeeper run --mcp``) or a test does.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from memkeeper import logs
from memkeeper.config import Config
from memkeeper.config_mcp import split_list
from memkeeper.errors import ConfigError, InvalidInput, MemkeeperError
from memkeeper.mcp.auth import Principal, TokenTable, load_tokens
from memkeeper.mcp.sessions import SessionLimits

log = structlog.get_logger("memkeeper.mcp")

PRINCIPAL_KEY = "memkeeper_principal"
MAX_JSON_DEPTH = 256
"""Deepest nesting of a request body: an MCP message needs a handful of levels."""
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""Protocol versions of the handshake era (the SDK routes any other to the stateless path)."""
LOOPBACK = ("127.0.0.1", "localhost", "::1")
START_TIMEOUT_SECONDS = 10.0

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


def parse_listen(text: str) -> tuple[str, int]:
    """``[HOST:]PORT`` (``[::1]:8765`` for IPv6); the host defaults to 127.0.0.1."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InvalidInput(f"{text!r} is not [HOST:]PORT with a port from 0 to 65535")
    return host, int(port)


def plan(
    listen: str, config: Config, *, no_auth: bool = False, user: str | None = None
) -> HttpPlan:
    """Check that an HTTP server may start as asked, and load its tokens."""
    host, port = parse_listen(listen)
    section = config.mcp
    tokens = None
    if no_auth:
        if host not in LOOPBACK:
            raise ConfigError(
                f"--no-auth is allowed only on a loopback address (127.0.0.1), not {host}: "
                "anyone who can reach the port would read and write every memory"
            )
        if not user:
            raise InvalidInput("a --no-auth server needs the user it acts for (--user)")
    elif not section.token_file:
        raise ConfigError(
            "the MCP HTTP server needs a token file: set [mcp] token_file in the config (README, "
            "'Agents in any language: the MCP server'), or serve on 127.0.0.1 with --no-auth"
        )
    else:
        if user:
            raise InvalidInput("--user applies to stdio and --no-auth: a token names its user")
        tokens = load_tokens(Path(section.token_file))
    return HttpPlan(
        host=host,
        port=port,
        tokens=tokens,
        open_user=user if no_auth else None,
        max_request_bytes=section.max_request_bytes,
        allowed_hosts=tuple(split_list(section.allowed_hosts)),
        allowed_origins=tuple(split_list(section.allowed_origins)),
        session_idle_seconds=section.session_idle_seconds,
        max_sessions_per_principal=section.max_sessions_per_principal,
    )


async def _answer(send: Send, status: int, message: str, headers: list[Any] | None = None) -> None:
    body = json.dumps({"error": message}).encode()
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
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": message}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


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


class Gate:
    """The ASGI layer before the SDK: bearer token → principal, limits on size, depth and
    sessions."""

    def __init__(self, app: App, plan: HttpPlan, sessions: SessionLimits | None = None) -> None:
        self.app = app
        self.plan = plan
        self.sessions = sessions

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
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        scope.setdefault("state", {})[PRINCIPAL_KEY] = principal
        if self.sessions is None or not opens_session(scope):
            await self.app(scope, replay, send)
            return
        await self._open_session(principal, scope, replay, send)

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


def build_app(store: Any, plan: HttpPlan) -> Any:
    """The Starlette app serving memkeeper's MCP server at ``/mcp``."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    from memkeeper.mcp.server import build_server

    port = "*" if plan.port == 0 else str(plan.port)
    hosts = [f"{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")]
    if plan.host not in LOOPBACK:
        hosts.append(f"{plan.host}:{port}")
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*hosts, *plan.allowed_hosts],
        allowed_origins=[
            *(f"http://{name}:*" for name in ("127.0.0.1", "localhost", "[::1]")),
            *plan.allowed_origins,
        ],
    )
    manager = StreamableHTTPSessionManager(
        build_server(store, principal_of_request),
        security_settings=security,
        # Answers as plain JSON, not an SSE stream: memkeeper sends no notifications, and a
        # 2026-07-28 call is then served in the request's own task (no sibling task, no
        # keep-alive timer).
        json_response=True,
        session_idle_timeout=plan.session_idle_seconds,
        max_request_body_size=plan.max_request_bytes,
        max_sessions=None,  # capped per principal by the Gate
    )
    sessions = SessionLimits(
        plan.max_sessions_per_principal,
        # The SDK's live sessions (a private attribute; the major version is pinned).
        lambda: manager._server_instances,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = Starlette(
        routes=[Route("/mcp", endpoint=Gate(manager.handle_request, plan, sessions))],
        lifespan=lifespan,
    )
    app.state.sessions = sessions  # for HttpServer.open_sessions
    return app


class HttpServer:
    """uvicorn serving :func:`build_app`, in the foreground or in a thread."""

    def __init__(self, store: Any, plan: HttpPlan) -> None:
        import uvicorn

        from memkeeper.mcp.sdk_logs import quiet_sdk

        quiet_sdk(logs.debug_enabled())
        self.plan = plan
        self.app = build_app(store, plan)
        config = uvicorn.Config(
            self.app,
            host=plan.host,
            port=plan.port,
            log_config=None,  # our handler (memkeeper.logs) renders uvicorn's lines too
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=3,
        )
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def open_sessions(self) -> int:
        """Stateful sessions open now, every principal's (expired ones not counted)."""
        sessions: SessionLimits = self.app.state.sessions
        return sessions.total()

    @property
    def port(self) -> int:
        """The port listened on (the real one when the plan asked for 0)."""
        for server in getattr(self.server, "servers", None) or []:  # set once listening
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return self.plan.port

    @property
    def url(self) -> str:
        host = f"[{self.plan.host}]" if ":" in self.plan.host else self.plan.host
        return f"http://{host}:{self.port}/mcp"

    def run(self) -> None:
        """Serve until SIGTERM or Ctrl-C (main thread), then stop gracefully: exit 0.

        uvicorn serves in a thread; left in the main thread, it would re-raise the SIGTERM
        it caught once stopped, and the process would end killed by the signal.
        """
        stop = threading.Event()
        previous = {
            signum: signal.signal(signum, lambda *_: stop.set())
            for signum in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            self.start()
            while not stop.wait(0.5):
                if self._thread is None or not self._thread.is_alive():
                    raise MemkeeperError("the MCP HTTP server stopped unexpectedly")
            log.info("stopping the MCP server")
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self.stop()
        log.info("MCP server stopped")

    def start(self) -> None:
        """Serve in a background thread; returns once listening (or raises)."""
        self._thread = threading.Thread(target=self.server.run, name="memkeeper-mcp", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self.server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not self.server.started:
            self.stop()
            raise MemkeeperError(
                f"the MCP HTTP server could not listen on {self.plan.host}:{self.plan.port}"
            )
        log.info("MCP server listening", url=self.url, auth=self._auth_text())

    def _auth_text(self) -> str:
        if self.plan.tokens is None:
            return f"none (acts for {self.plan.open_user})"
        return f"{len(self.plan.tokens)} tokens"

    def stop(self) -> None:
        """Stop serving and wait for the thread (requests in flight get a few seconds)."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=START_TIMEOUT_SECONDS)
            self._thread = None
