"""The HTTP server's limits on stateful sessions: each principal may hold a few at a time.

Only clients of the handshake era (2025-06-18, 2025-11-25) open sessions: their
``initialize`` gets an ``Mcp-Session-Id`` that later requests repeat. A 2026-07-28 request is
stateless and opens none. The SDK's session manager ends a session after
``[mcp] session_idle_seconds`` without a request (its id then answers 404) or when the client
deletes it; :class:`SessionLimits` counts, per principal, the sessions that are still open in
the manager, and refuses another one over ``[mcp] max_sessions_per_principal``. One token
opening sessions without closing them cannot grow the server without bound (each one costs
tens of KiB, measured in ``tests/test_mcp_sessions.py``).

Everything here runs on the event loop (no locks): a request that may open a session is
counted as pending from :meth:`SessionLimits.admit` until its answer's headers are sent.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from memkeeper.mcp.auth import Principal


@dataclass
class _Held:
    sessions: set[str] = field(default_factory=set)
    pending: int = 0


class SessionLimits:
    """Open sessions per principal, checked against the SDK manager's live sessions."""

    def __init__(self, cap: int, live: Callable[[], Collection[str]]) -> None:
        self.cap = cap
        self._live = live  # the session ids the SDK still serves
        self._held: dict[Principal, _Held] = {}

    def open_count(self, principal: Principal) -> int:
        """Sessions of ``principal`` still open (expired and deleted ones are forgotten)."""
        held = self._held.get(principal)
        if held is None:
            return 0
        live = self._live()
        held.sessions = {sid for sid in held.sessions if sid in live}
        if not held.sessions and not held.pending:
            del self._held[principal]
            return 0
        return len(held.sessions) + held.pending

    def admit(self, principal: Principal) -> bool:
        """Whether ``principal`` may open one more session; if so it is counted as pending."""
        if self.open_count(principal) >= self.cap:
            return False
        self._held.setdefault(principal, _Held()).pending += 1
        return True

    def settle(self, principal: Principal, session_id: str | None) -> None:
        """The admitted request was answered: with a new session's id, or without one."""
        held = self._held.setdefault(principal, _Held())
        held.pending = max(held.pending - 1, 0)
        if session_id:
            held.sessions.add(session_id)

    def total(self) -> int:
        """Open sessions of every principal (for logs and tests)."""
        return sum(self.open_count(principal) for principal in list(self._held))
