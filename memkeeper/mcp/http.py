"""The MCP server over streamable HTTP: authentication, a size limit, and a uvicorn server.

The app (Starlette) has one endpoint, ``/mcp``: the SDK's
:class:`~mcp.server.streamable_http_manager.StreamableHTTPSessionManager` (stateful sessions,
so the client's name from its handshake is known for every later call), behind
:class:`Gate`, which for every request, before the SDK sees it:

1. finds the principal: the ``Authorization: Bearer <token>`` header looked up in the token
   file (:mod:`memkeeper.mcp.auth`) — a missing or unknown token gets 401 and a one-line
   reason that never contains the token — or the one user of a ``--no-auth`` server;
2. reads the body up to ``[mcp] max_request_bytes``: more (declared or sent) gets 413;
3. hands the request on with its principal in ``scope["state"]``, where the tool handler
   reads it (:func:`principal_of_request`): identity is per request, not per session.

DNS-rebinding protection (the SDK's, off by default in 1.19) is on: only the loopback names
on the server's port and ``[mcp] allowed_hosts`` are accepted as Host.

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

log = structlog.get_logger("memkeeper.mcp")

PRINCIPAL_KEY = "memkeeper_principal"
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


class Gate:
    """The ASGI layer before the SDK: bearer token → principal, body size limit."""

    def __init__(self, app: App, plan: HttpPlan) -> None:
        self.app = app
        self.plan = plan

    def _principal(self, scope: Scope) -> tuple[Principal | None, str]:
        if self.plan.tokens is None:
            return Principal(self.plan.open_user), ""
        header = b""
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                header = value
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
            await _answer(send, 401, why, [(b"www-authenticate", b'Bearer realm="memkeeper"')])
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
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        scope.setdefault("state", {})[PRINCIPAL_KEY] = principal
        await self.app(scope, replay, send)


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
        build_server(store, principal_of_request), security_settings=security
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(
        routes=[Route("/mcp", endpoint=Gate(manager.handle_request, plan))], lifespan=lifespan
    )


class HttpServer:
    """uvicorn serving :func:`build_app`, in the foreground or in a thread."""

    def __init__(self, store: Any, plan: HttpPlan) -> None:
        import uvicorn

        from memkeeper.mcp.sdk_logs import quiet_sdk

        quiet_sdk(logs.debug_enabled())
        self.plan = plan
        config = uvicorn.Config(
            build_app(store, plan),
            host=plan.host,
            port=plan.port,
            log_config=None,  # our handler (memkeeper.logs) renders uvicorn's lines too
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=3,
        )
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

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
