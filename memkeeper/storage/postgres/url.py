"""Database URLs: recognise ``postgresql://`` / ``postgres://``, parse them, mask the password.

A URL is libpq's own syntax (``postgresql://[user[:password]@][host][:port][,...][/dbname]
[?param=value&...]``), handed to the driver unchanged, so everything libpq reads besides the
URL keeps working: ``PGHOST``, ``PGPORT``, ``PGUSER``, ``PGPASSWORD``, ``~/.pgpass`` and a
service file (``postgresql:///?service=memory``). A password in the URL is therefore optional.

The password never leaves this module except to the driver: :class:`DatabaseUrl`'s ``str``
and ``repr`` are the masked form, its parse errors name the URL masked, and only
:meth:`DatabaseUrl.conninfo` returns the real text. Parsing needs no driver (the CLI can tell
a URL from a path without psycopg installed).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote

from memkeeper.errors import InvalidInput

SCHEMES = ("postgresql", "postgres")
MASK = "***"
DEFAULT_PORT = 5432
_SCHEME = re.compile(r"^(postgres(?:ql)?)://", re.IGNORECASE)
# The query parameters that carry a secret: masked wherever they appear.
_SECRET_PARAMS = frozenset({"password", "sslpassword"})


@dataclass(frozen=True)
class DatabaseUrl:
    """One parsed PostgreSQL URL; prints masked, keeps the original only for the driver.

    ``hosts`` holds each ``host[:port]`` of the URL's host list as (host, port); a ``host``
    query parameter (a socket directory, or hosts) replaces them, as in libpq. Missing parts
    are None: libpq fills them in from the environment when it connects.
    """

    _raw: str = field(repr=False, compare=True)
    hosts: tuple[tuple[str | None, int | None], ...]
    dbname: str | None
    user: str | None
    has_password: bool
    params: tuple[tuple[str, str], ...] = field(repr=False)
    masked: str = field(repr=False)

    def __str__(self) -> str:
        return self.masked

    def __repr__(self) -> str:
        return f"DatabaseUrl({self.masked!r})"

    def conninfo(self) -> str:
        """The URL as given, password included: for the driver, never for a message or log."""
        return self._raw

    def secrets(self) -> tuple[str, ...]:
        """The URL's password(s), raw and decoded: to scrub them from a driver's message."""
        found: set[str] = set()
        rest = self._raw[_SCHEME.match(self._raw).end() :]  # type: ignore[union-attr]
        userinfo, at, _after = rest.rpartition("@")
        if at and ":" in userinfo:
            found.add(userinfo.partition(":")[2])
        for item in rest.partition("?")[2].split("&"):
            key, equals, value = item.partition("=")
            if equals and unquote(key) in _SECRET_PARAMS:
                found.add(value)
        found |= {unquote(s) for s in found}
        return tuple(sorted(s for s in found if s))

    def target(self) -> str:
        """``host:port`` of the first host (the environment's when the URL names none).

        For messages: what an operator needs to find the server, nothing secret.
        """
        host, port = self.hosts[0] if self.hosts else (None, None)
        host = host or os.environ.get("PGHOST") or "the local socket"
        if port is None:
            env_port = os.environ.get("PGPORT", "")
            port = int(env_port) if env_port.isdigit() else DEFAULT_PORT
        return f"{host}:{port}"


def parse_url(text: str) -> DatabaseUrl:
    """Parse a PostgreSQL URL; :class:`InvalidInput` (naming it masked) when it is malformed."""
    match = _SCHEME.match(text) if isinstance(text, str) else None
    if match is None:
        raise InvalidInput("a database URL starts with postgresql:// or postgres://")
    rest = text[match.end() :]
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    userinfo, at, hostspec = netloc.rpartition("@")
    if not at:
        userinfo, hostspec = "", netloc
    user_text, colon, password = userinfo.partition(":")
    masked = _mask(text)
    try:
        params = tuple(parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)))
    except ValueError:
        raise InvalidInput(f"database URL {masked}: malformed query string") from None
    values = dict(params)
    hosts = _hosts(hostspec, masked)
    if values.get("host"):
        ports = [p.strip() for p in values.get("port", "").split(",")]
        names = values["host"].split(",")
        hosts = tuple(
            (name or None, _port(ports[min(i, len(ports) - 1)], masked))
            for i, name in enumerate(names)
        )
    elif values.get("port"):
        port = _port(values["port"].split(",")[0], masked)
        hosts = tuple((host, port) for host, _ in hosts) or ((None, port),)
    dbname = values.get("dbname") or unquote(path) or None
    user = values.get("user") or unquote(user_text) or None
    has_password = bool(colon and password) or bool(values.get("password"))
    return DatabaseUrl(
        _raw=text,
        hosts=hosts,
        dbname=dbname,
        user=user,
        has_password=has_password,
        params=tuple((k, MASK if k in _SECRET_PARAMS else v) for k, v in params),
        masked=masked,
    )


def mask_url(text: str) -> str:
    """``text`` with any password (in the user part or a query parameter) replaced by ***."""
    return _mask(text)


def _mask(text: str) -> str:
    # The user part ends at the LAST "@" of the whole text: a password with an unencoded "/",
    # "?" or "@" is then still masked whole (at worst, more than the password is masked).
    match = _SCHEME.match(text)
    head = text[: match.end()] if match else ""
    rest = text[len(head) :]
    userinfo, at, after = rest.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        if colon and password:
            rest = f"{user}:{MASK}@{after}"
    before, question, query = rest.partition("?")
    if question:
        parts = []
        for item in query.split("&"):
            key, equals, _value = item.partition("=")
            parts.append(f"{key}={MASK}" if equals and unquote(key) in _SECRET_PARAMS else item)
        query = "&".join(parts)
    return f"{head}{before}{question}{query}"


def _hosts(hostspec: str, masked: str) -> tuple[tuple[str | None, int | None], ...]:
    if not hostspec:
        return ()
    hosts = []
    for item in hostspec.split(","):
        if item.startswith("["):  # [IPv6]:port
            host, _, after = item[1:].partition("]")
            port_text = after[1:] if after.startswith(":") else ""
        else:
            host, _, port_text = item.partition(":")
        hosts.append((unquote(host) or None, _port(port_text, masked)))
    return tuple(hosts)


def _port(text: str, masked: str) -> int | None:
    if not text:
        return None
    if not text.isdigit() or not 0 < int(text) < 65536:
        # The text itself is not repeated: in a mistyped URL it may be part of a password.
        raise InvalidInput(f"database URL {masked}: a port is not a number from 1 to 65535")
    return int(text)
