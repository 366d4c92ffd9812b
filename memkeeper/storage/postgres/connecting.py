"""Connecting to PostgreSQL, and the driver's connection errors as memkeeper's own.

Every connection memkeeper opens (the pool's, a lease's replacement, a migration's, a job
lock's session) goes through :func:`connect`: a bounded ``connect_timeout`` and the
application name ``pg_stat_activity`` shows. Failing to connect raises
:class:`~memkeeper.errors.AuthenticationFailed` (exit 77) for refused credentials and
:class:`~memkeeper.errors.DatabaseUnreachable` (exit 75) otherwise, each with one line that
names the user, host and port, never the password.
"""

from __future__ import annotations

import math
from typing import Any

import psycopg

from memkeeper.errors import AuthenticationFailed, DatabaseUnreachable
from memkeeper.storage.postgres.url import MASK, DatabaseUrl

DEFAULT_CONNECT_TIMEOUT = 10.0
APPLICATION_NAME = "memkeeper"
# SQLSTATEs of refused credentials: invalid_password, invalid_authorization_specification,
# and insufficient_privilege (CONNECT not granted on the database).
_AUTH_SQLSTATES = frozenset({"28P01", "28000", "42501"})
_AUTH_PHRASES = ("password authentication failed", "authentication failed", "no password supplied")


def connect_kwargs(connect_timeout: float) -> dict[str, Any]:
    """The options memkeeper adds to every connection: a whole-second timeout (libpq's unit,
    at least 2 as libpq enforces) and the application name that ``pg_stat_activity`` shows."""
    return {
        "connect_timeout": max(2, math.ceil(connect_timeout)),
        "application_name": APPLICATION_NAME,
    }


def connect(url: DatabaseUrl, *, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, **kwargs: Any):
    """One connection outside any pool (migrations, an advisory lock); errors translated."""
    try:
        return psycopg.connect(url.conninfo(), **connect_kwargs(connect_timeout), **kwargs)
    except psycopg.OperationalError as exc:
        raise translate_connect_error(exc, url) from None


def translate_connect_error(
    exc: psycopg.Error, url: DatabaseUrl
) -> AuthenticationFailed | DatabaseUnreachable:
    """Our exception for a failed connection: one line, the server's reason, no password."""
    reason = _reason(exc, url)
    who = f"user {url.user!r}" if url.user else "the default user"
    if exc.sqlstate in _AUTH_SQLSTATES or any(p in reason.lower() for p in _AUTH_PHRASES):
        return AuthenticationFailed(
            f"PostgreSQL at {url.target()} refused the credentials of {who} ({reason}); "
            "check the password (URL, PGPASSWORD or ~/.pgpass) and the user's access"
        )
    return DatabaseUnreachable(f"cannot connect to PostgreSQL at {url.target()}: {reason}")


def _reason(exc: psycopg.Error, url: DatabaseUrl) -> str:
    """libpq's message as one line: its last 'FATAL:' part, or its first line, scrubbed."""
    text = " ".join(str(exc).split())
    if "FATAL:" in text:
        text = text.rsplit("FATAL:", 1)[1].strip()
    elif ": " in text and text.startswith("connection failed"):
        text = text.split(": ", 1)[1]
    # libpq never echoes a password, but a hostile or mistyped URL must not smuggle one out.
    for secret in url.secrets():
        text = text.replace(secret, MASK)
    return text[:300]
