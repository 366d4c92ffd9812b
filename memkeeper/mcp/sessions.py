"""The HTTP server's limits on stateful sessions: each principal may hold a few at a time.

Only clients of the handshake era (2025-06-18, 2025-11-25) open sessions: their
``initialize`` gets an ``Mcp-Session-Id`` that later requests repeat. A 2026-07-28 request is
stateless and opens none. The SDK's session manager ends a session after
``[mcp] session_idle_seconds`` with no request in flight (its id then answers 404) or when the
client deletes it. :class:`SessionLimits` follows the same rule from the requests it sees
(the Gate reports each session request's start and end): a session counts while a request
of it is in flight or its last one ended less than the idle time ago, until it is deleted or
answered 404. One more than ``[mcp] max_sessions_per_principal`` is refused. A session is
bound to the principal that opened it: another token naming its id gets 404. One token
opening sessions without closing them cannot grow the server without bound (each costs some
tens of KiB; measured in ``tests/test_mcp_sessions.py``).

Everything here runs on the event loop (no locks): a request that may open a session is
counted as pending from :meth:`SessionLimits.admit` until its answer's headers are sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from memkeeper.mcp.auth import Principal


@dataclass
class _Session:
    in_flight: int = 0
    last_done: float = 0.0


@dataclass
class _Held:
    sessions: dict[str, _Session] = field(default_factory=dict)
    pending: int = 0


class SessionLimits:
    """Open sessions per principal, as the SDK's idle rule keeps them."""

    def __init__(
        self, cap: int, idle_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.cap = cap
        self.idle_seconds = idle_seconds
        self._clock = clock
        self._held: dict[Principal, _Held] = {}

    def _live(self, session: _Session, now: float) -> bool:
        return session.in_flight > 0 or now - session.last_done < self.idle_seconds

    def open_count(self, principal: Principal) -> int:
        """Sessions of ``principal`` still open (expired and deleted ones are forgotten)."""
        held = self._held.get(principal)
        if held is None:
            return 0
        now = self._clock()
        held.sessions = {sid: s for sid, s in held.sessions.items() if self._live(s, now)}
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
            held.sessions[session_id] = _Session(last_done=self._clock())

    def _locate(self, session_id: str) -> tuple[Principal, _Held, _Session] | None:
        """Who holds ``session_id``, and its record; None for a session not seen here."""
        for principal, held in self._held.items():
            session = held.sessions.get(session_id)
            if session is not None:
                return principal, held, session
        return None

    def owner(self, session_id: str) -> Principal | None:
        """The principal that opened ``session_id``, or None for a session not seen here."""
        found = self._locate(session_id)
        return found[0] if found else None

    def began(self, session_id: str) -> None:
        """A request of session ``session_id`` started."""
        found = self._locate(session_id)
        if found is not None:
            found[2].in_flight += 1

    def ended(self, session_id: str, *, gone: bool) -> None:
        """That request ended; ``gone``: the session was deleted or is unknown to the SDK."""
        found = self._locate(session_id)
        if found is None:
            return
        _principal, held, session = found
        session.in_flight = max(session.in_flight - 1, 0)
        session.last_done = self._clock()
        if gone:
            del held.sessions[session_id]

    def total(self) -> int:
        """Open sessions of every principal (for logs and tests)."""
        return sum(self.open_count(principal) for principal in list(self._held))
