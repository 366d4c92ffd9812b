"""Who may see the pages, and what they may do: the plan a server starts with, and the
guard in front of every request.

The rules (the web page guide, docs/guides/ui.md, "Safety"):

- A server on a loopback address (127.0.0.1, localhost, ::1) may run without tokens: whoever
  can reach it is the operator, an admin. Any other address needs the MCP server's token file
  (``[mcp] token_file``, :mod:`memkeeper.mcp.auth`), and so does ``--auth`` on loopback. An
  admin token sees everything; a user's token sees that user's pages only (403 elsewhere).
- A browser signs in once with its token (``/login``): the server gives it a random session
  id in an HttpOnly, SameSite=Strict cookie and keeps the principal in memory (a restart
  signs everyone out). A script may send ``Authorization: Bearer <token>`` instead.
- Host is checked on every request (421 otherwise: DNS rebinding), as the MCP server checks
  it: loopback names and the bound address on the server's port, and ``[mcp] allowed_hosts``.
  An ``Origin`` that is not the server's own (or in ``[mcp] allowed_origins``) is refused (403).
- Every POST carries the page's CSRF token (an HMAC of the session with a key made at
  start), checked before anything runs; write actions exist only with ``--allow-writes``.
- Tokens, session ids and CSRF tokens are registered as secrets (never in a log line);
  requests are logged without their query strings or form values.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memkeeper import logs
from memkeeper.config import Config
from memkeeper.config.mcp import split_list
from memkeeper.errors import ConfigError
from memkeeper.mcp.auth import Principal, TokenTable, load_tokens

log = logs.get_logger("memkeeper.ui")

LOOPBACK = ("127.0.0.1", "localhost", "::1")
COOKIE = "memkeeper_ui"
SESSION_SECONDS = 12 * 3600
PRINCIPAL_KEY = "memkeeper_ui_principal"
SESSION_KEY = "memkeeper_ui_session"
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class UiPlan:
    """What a UI server does: where it listens, who may use it, whether it may write."""

    host: str = "127.0.0.1"
    port: int = 8766
    tokens: TokenTable | None = None
    allow_writes: bool = False
    pretend_now: bool = False  # the store's clock is --now's, not the real one
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    def host_values(self) -> list[str]:
        """Accepted Host header values (``*`` port: any, for a server on port 0)."""
        port = "*" if self.port == 0 else str(self.port)
        names = ["127.0.0.1", "localhost", "[::1]"]
        if self.host not in LOOPBACK:
            names.append(f"[{self.host}]" if ":" in self.host else self.host)
        return [f"{name}:{port}" for name in names] + list(self.allowed_hosts)


def plan(
    config: Config,
    *,
    host: str = "127.0.0.1",
    port: int = 8766,
    auth: bool | None = None,
    allow_writes: bool = False,
) -> UiPlan:
    """Check that a UI server may start as asked, and load its tokens.

    ``auth`` None: tokens when the address is not loopback. Off the loopback, tokens are
    required: anyone who can reach the port would read every memory.
    """
    loopback = host in LOOPBACK
    if auth is None:
        auth = not loopback
    if not auth and not loopback:
        raise ConfigError(
            f"memkeeper ui on {host} (not a loopback address) needs tokens: anyone who can "
            "reach the port would read every memory; set [mcp] token_file"
        )
    tokens = None
    if auth:
        if not config.mcp.token_file:
            raise ConfigError(
                "memkeeper ui with tokens needs a token file: set [mcp] token_file in the "
                "config (the MCP server's), or serve on 127.0.0.1 without --auth"
            )
        tokens = load_tokens(Path(config.mcp.token_file))
    return UiPlan(
        host=host,
        port=port,
        tokens=tokens,
        allow_writes=allow_writes,
        allowed_hosts=tuple(split_list(config.mcp.allowed_hosts)),
        allowed_origins=tuple(split_list(config.mcp.allowed_origins)),
    )


class Sessions:
    """Signed-in browsers: a random session id → its principal, until it expires."""

    def __init__(self, seconds: float = SESSION_SECONDS) -> None:
        self.seconds = seconds
        self._lock = threading.Lock()
        self._open: dict[str, tuple[Principal, float]] = {}

    def open(self, principal: Principal) -> str:
        session = secrets.token_urlsafe(32)
        logs.register_secret(session)
        with self._lock:
            self._open[session] = (principal, time.monotonic() + self.seconds)
        return session

    def find(self, session: str) -> Principal | None:
        with self._lock:
            found = self._open.get(session)
            if found is None:
                return None
            if found[1] < time.monotonic():
                del self._open[session]
                return None
            return found[0]

    def close(self, session: str) -> None:
        with self._lock:
            self._open.pop(session, None)


def _headers(scope: Scope, name: bytes) -> list[str]:
    return [v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == name]


def cookie_of(scope: Scope, name: str = COOKIE) -> str | None:
    for header in _headers(scope, b"cookie"):
        for part in header.split(";"):
            key, _, value = part.strip().partition("=")
            if key == name and value:
                return value
    return None


def host_allowed(host: str, accepted: list[str]) -> bool:
    for value in accepted:
        name, _, port = value.rpartition(":")
        if value == host or (port == "*" and host.rpartition(":")[0] == name):
            return True
    return False


def origin_allowed(origin: str, plan: UiPlan) -> bool:
    if origin in plan.allowed_origins:
        return True
    return origin.startswith("http://") and host_allowed(
        origin.removeprefix("http://"), plan.host_values()
    )


def csrf_token(plan: UiPlan, session_key: str) -> str:
    """The CSRF token of one session (a cookie session, a bearer token's digest, or the
    open loopback server's one session)."""
    token = hmac.new(plan.secret, session_key.encode(), hashlib.sha256).hexdigest()
    logs.register_secret(token)
    return token


def csrf_ok(plan: UiPlan, session_key: str, presented: str) -> bool:
    return hmac.compare_digest(csrf_token(plan, session_key), presented or "")


async def answer(send: Send, status: int, text: str, headers: list[Any] | None = None) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _peer(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "unknown"


class Guard:
    """ASGI middleware: Host, Origin and who is asking, before any page runs.

    Puts the principal (None: not signed in) and the session key (for CSRF) into
    ``scope["state"]``. Pages other than ``/login`` answer a missing principal with a
    redirect (browsers) or 401 (scripts).
    """

    def __init__(self, app: App, plan: UiPlan, sessions: Sessions) -> None:
        self.app = app
        self.plan = plan
        self.sessions = sessions

    def principal(self, scope: Scope) -> tuple[Principal | None, str]:
        if self.plan.tokens is None:
            return Principal(None), "open"
        bearer = _headers(scope, b"authorization")
        if bearer:
            scheme, _, token = bearer[0].partition(" ")
            if scheme.lower() == "bearer" and token.strip() and len(bearer) == 1:
                found = self.plan.tokens.lookup(token.strip())
                if found is not None:
                    digest = hashlib.sha256(token.strip().encode()).hexdigest()
                    return found, f"bearer:{digest}"
            return None, ""
        session = cookie_of(scope)
        if session:
            found = self.sessions.find(session)
            if found is not None:
                return found, f"session:{session}"
        return None, ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hosts = _headers(scope, b"host")
        if len(hosts) != 1 or not host_allowed(hosts[0], self.plan.host_values()):
            log.warning("refused a UI request", reason="Host not allowed", peer=_peer(scope))
            await answer(send, 421, "Host not allowed (DNS rebinding protection)")
            return
        origins = _headers(scope, b"origin")
        if origins and not all(origin_allowed(o, self.plan) for o in origins):
            log.warning("refused a UI request", reason="Origin not allowed", peer=_peer(scope))
            await answer(send, 403, "Origin not allowed")
            return
        principal, session_key = self.principal(scope)
        state = scope.setdefault("state", {})
        state[PRINCIPAL_KEY] = principal
        state[SESSION_KEY] = session_key
        await self.app(scope, receive, send)
