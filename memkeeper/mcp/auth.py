"""Who an MCP call acts for: the principal, and the HTTP server's bearer tokens.

A :class:`Principal` is one user (the stdio server's ``--user``, a user's token, the
``--no-auth`` HTTP server) or an admin (an admin token), who names the user in each call's
``user_id``. A principal bound to a user may leave ``user_id`` out or repeat its own; naming
anyone else is refused with :class:`AccessDenied`.

The token file (``[mcp] token_file``) is TOML, one ``[[tokens]]`` table per token::

    [[tokens]]
    token = "kq2P...a long random string"
    user = "alice"

    [[tokens]]
    token = "Zx81...another one"
    admin = true

It must be readable by its owner only (mode 0600): anything wider is refused, so are short
tokens (under :data:`MIN_TOKEN_CHARS`), duplicates and unknown keys. Errors name the file and
the entry's number, never a token. Tokens are compared as SHA-256 digests with
:func:`hmac.compare_digest` against every entry (the time taken does not depend on which
entry, or how much of one, matched), and are registered with :func:`memkeeper.logs.register_secret`
so that no log line can carry one.
"""

from __future__ import annotations

import hashlib
import hmac
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memkeeper import logs, validation
from memkeeper.errors import ConfigError, MemkeeperError

MIN_TOKEN_CHARS = 16
"""Shortest token accepted: ``secrets.token_urlsafe(32)`` gives 43 characters."""

MAX_USER_CHARS = 256
"""Longest user id a token may name (the default ``[limits] max_key_chars``)."""

_TOKEN_KEYS = frozenset({"token", "user", "admin"})


class AccessDenied(MemkeeperError):
    """A call named a user its principal may not act for."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: one user, or an admin (``user`` None) who names the user per call.

    ``via`` says what binds a user's principal to its user, for refusals: ``"server"`` (the
    stdio server's ``--user``, a ``--no-auth`` HTTP server) or ``"token"`` (a bearer token's
    entry). An admin is always a token's.
    """

    user: str | None
    via: str = "server"

    @property
    def admin(self) -> bool:
        return self.user is None

    @property
    def label(self) -> str:
        """How logs name the principal (never a token)."""
        return "admin" if self.user is None else f"user {self.user}"

    def acting_for(self, named: Any, argument: str = "user_id") -> str:
        """The user a call acts for, given the user it names (None when left out) in its
        ``argument`` (the tools' ``user_id``, the prompt's ``user``), which refusals name."""
        if self.user is None:
            if named is None:
                raise AccessDenied(
                    f"an admin token acts for the user named in {argument}: give {argument}"
                )
            return validation.identifier(argument, named, max_chars=MAX_USER_CHARS)
        if named is None or named == self.user:
            return self.user
        if not isinstance(named, str):
            raise AccessDenied(f"{argument} must be text, not {type(named).__name__}")
        who = "this token" if self.via == "token" else "this server"
        raise AccessDenied(
            f"{who} acts for user {self.user!r} only: it cannot act for another user "
            f"(leave {argument} out)"
        )


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class TokenTable:
    """The tokens of a token file, as digests, each with its principal."""

    def __init__(self, entries: list[tuple[str, Principal]]) -> None:
        self._entries = [(_digest(token), principal) for token, principal in entries]
        for token, _principal in entries:
            logs.register_secret(token)

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, presented: str) -> Principal | None:
        """The principal of ``presented``, or None; compares against every entry."""
        candidate = _digest(presented)
        found = None
        for digest, principal in self._entries:
            if hmac.compare_digest(candidate, digest):
                found = principal
        return found


def _check_mode(path: Path) -> None:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ConfigError(f"token file {path} does not exist ([mcp] token_file)") from None
    except OSError as exc:
        raise ConfigError(f"cannot read token file {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"token file {path} is not a regular file")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise ConfigError(
            f"token file {path} has mode {mode:04o}: it holds secrets and must be readable by "
            f"its owner only; run: chmod 600 {path}"
        )


def _entry(path: Path, number: int, raw: Any) -> tuple[str, Principal]:
    where = f"{path}: tokens entry {number}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} is not a table")
    unknown = sorted(str(key)[:40] for key in set(raw) - _TOKEN_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (token, user, admin)")
    token = raw.get("token")
    if not isinstance(token, str):
        raise ConfigError(f"{where}: token must be a string")
    if len(token) < MIN_TOKEN_CHARS or not token.isascii() or not token.isprintable():
        raise ConfigError(
            f"{where}: the token must be at least {MIN_TOKEN_CHARS} printable ASCII characters "
            "(make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    if any(char.isspace() for char in token):
        raise ConfigError(f"{where}: the token must not contain spaces")
    admin, user = raw.get("admin", False), raw.get("user")
    if not isinstance(admin, bool):
        raise ConfigError(f"{where}: admin must be true or false")
    if admin == (user is not None):
        raise ConfigError(f'{where}: give either user = "<user id>" or admin = true')
    if admin:
        return token, Principal(None, via="token")
    try:
        user = validation.identifier("user", user, max_chars=MAX_USER_CHARS)
    except MemkeeperError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return token, Principal(user, via="token")


def load_tokens(path: Path) -> TokenTable:
    """Read and check a token file (see the module's docstring for its format)."""
    path = path.expanduser()
    _check_mode(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read token file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"token file {path} is not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"token file {path}: invalid TOML: {exc}") from None
    extra = sorted(str(key)[:40] for key in set(data) - {"tokens"})
    if extra:
        raise ConfigError(f"token file {path}: unknown key {extra[0]!r} (only [[tokens]])")
    raw = data.get("tokens", [])
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"token file {path} has no [[tokens]] entries")
    entries = [_entry(path, number, item) for number, item in enumerate(raw, start=1)]
    seen: dict[bytes, int] = {}
    for number, (token, _principal) in enumerate(entries, start=1):
        first = seen.setdefault(_digest(token), number)
        if first != number:
            raise ConfigError(f"token file {path}: entries {first} and {number} share a token")
    return TokenTable(entries)
