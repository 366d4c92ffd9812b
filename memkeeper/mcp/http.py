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
3. answers a plain stateless ``tools/call`` itself, as the SDK would
   (:mod:`memkeeper.mcp.fast_call`: the SDK's generic path cost as much CPU as the call);
4. hands any other request on with its principal in ``scope["state"]``, where the tool
   handler reads it (:func:`principal_of_request`): identity is per request, not per session.

DNS-rebinding protection is on: only the loopback names on the server's port and
``[mcp] allowed_hosts`` are accepted as Host (421 otherwise).

:func:`plan` decides whether a server may start (no token file: only on a loopback address
with ``--no-auth``). :class:`HttpServer` runs uvicorn in a thread, either until SIGTERM or
Ctrl-C (``memkeeper mcp --http``: a graceful stop, exit 0) or while the maintenance service
runs (``memkeeper run --mcp``) or a test does.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from memkeeper import logs
from memkeeper.config import Config
from memkeeper.config.mcp import split_list
from memkeeper.errors import ConfigError, InvalidInput
from memkeeper.mcp.auth import load_tokens
from memkeeper.mcp.gate import Gate, HttpPlan, principal_of_request
from memkeeper.mcp.serving import ThreadedServer
from memkeeper.mcp.sessions import SessionLimits

log = logs.get_logger("memkeeper.mcp")

LOOPBACK = ("127.0.0.1", "localhost", "::1")


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


def build_app(store: Any, plan: HttpPlan) -> Any:
    """The Starlette app serving memkeeper's MCP server at ``/mcp``."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    from memkeeper.mcp.server import build_server
    from memkeeper.mcp.store_ref import StoreRef

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
    stores = StoreRef.of(store)
    server = build_server(stores, principal_of_request)
    fast = None
    if plan.fast_calls:
        from memkeeper.mcp.fast_call import FastCalls

        fast = FastCalls(
            stores,
            allowed_hosts=security.allowed_hosts,
            allowed_origins=security.allowed_origins,
            server_info=server.server_info_stamp,
        )
    manager = StreamableHTTPSessionManager(
        server,
        security_settings=security,
        # Answers as plain JSON, not an SSE stream: memkeeper sends no notifications, and a
        # 2026-07-28 call is then served in the request's own task (no sibling task, no
        # keep-alive timer).
        json_response=True,
        session_idle_timeout=plan.session_idle_seconds,
        max_request_body_size=plan.max_request_bytes,
        max_sessions=None,  # capped per principal by the Gate
    )
    sessions = SessionLimits(plan.max_sessions_per_principal, plan.session_idle_seconds)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = Starlette(
        routes=[Route("/mcp", endpoint=Gate(manager.handle_request, plan, sessions, fast))],
        lifespan=lifespan,
    )
    app.state.sessions = sessions  # for HttpServer.open_sessions
    app.state.fast = fast
    # A ref made here around the caller's store is closed when serving stops (its use
    # buffer written, its flusher stopped); a ref given in stays its owner's.
    app.state.own_stores = stores if stores is not store else None
    return app


class HttpServer(ThreadedServer):
    """uvicorn serving :func:`build_app`, in the foreground or in a thread."""

    def __init__(self, store: Any, plan: HttpPlan) -> None:
        import uvicorn

        from memkeeper.mcp.one_write import OneWriteProtocol
        from memkeeper.mcp.sdk_logs import quiet_sdk

        quiet_sdk(logs.debug_enabled())
        self.plan = plan
        self.app = build_app(store, plan)
        config = uvicorn.Config(
            self.app,
            host=plan.host,
            port=plan.port,
            http=OneWriteProtocol,  # httptools, each response in one write
            log_config=None,  # our handler (memkeeper.logs) renders uvicorn's lines too
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=3,
        )
        super().__init__(config, what="the MCP HTTP server", thread_name="memkeeper-mcp")

    def open_sessions(self) -> int:
        """Stateful sessions open now, every principal's (expired ones not counted)."""
        sessions: SessionLimits = self.app.state.sessions
        return sessions.total()

    @property
    def url(self) -> str:
        host = f"[{self.plan.host}]" if ":" in self.plan.host else self.plan.host
        return f"http://{host}:{self.port}/mcp"

    def run(self) -> None:
        """Serve until SIGTERM or Ctrl-C (main thread), then stop gracefully: exit 0."""
        self.serve_until_signalled()
        log.info("MCP server stopped")

    def start(self) -> None:
        """Serve in a background thread; returns once listening (or raises)."""
        super().start()
        log.info("MCP server listening", url=self.url, auth=self._auth_text())

    def _auth_text(self) -> str:
        if self.plan.tokens is None:
            return f"none (acts for {self.plan.open_user})"
        return f"{len(self.plan.tokens)} tokens"

    def stop(self) -> None:
        """Stop serving and wait for the thread (requests in flight get a few seconds)."""
        super().stop()
        self.close_stores()

    def close_stores(self) -> None:
        """Write the buffered uses and stop their flusher, if the stores are this server's."""
        own = self.app.state.own_stores
        if own is not None:
            self.app.state.own_stores = None
            own.close()
