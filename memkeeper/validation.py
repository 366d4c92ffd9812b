"""Checks on everything that comes in through the API, the CLI or an import file.

Each check raises :class:`memkeeper.errors.InvalidInput` naming the field and what is wrong,
without echoing the (possibly private, possibly huge) value itself.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Any

from memkeeper.errors import InvalidInput
from memkeeper.records import EPISODE_STATUSES, KINDS, ROLES


def _utf8_size(field: str, value: str) -> int:
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"{field} is not valid UTF-8 text (undecodable character at position {exc.start})"
        ) from None


def identifier(field: str, value: Any, *, max_chars: int, allow_empty: bool = False) -> str:
    """A user id, namespace, key or session id: text, no control characters, bounded length."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be text, not {type(value).__name__}")
    _utf8_size(field, value)
    if not value and not allow_empty:
        raise InvalidInput(f"{field} must not be empty")
    if value != value.strip():
        raise InvalidInput(f"{field} must not start or end with whitespace")
    if len(value) > max_chars:
        raise InvalidInput(f"{field} is {len(value)} characters long; the limit is {max_chars}")
    for position, char in enumerate(value):
        if unicodedata.category(char) in ("Cc", "Cs"):
            raise InvalidInput(f"{field} contains a control character at position {position}")
    return value


def owner(user_id: Any, namespace: Any, *, max_chars: int) -> tuple[str, str]:
    """Whose memory: a user id and a namespace (the namespace may be empty)."""
    return (
        identifier("user_id", user_id, max_chars=max_chars),
        identifier("namespace", namespace, max_chars=max_chars, allow_empty=True),
    )


def text(field: str, value: Any, *, max_bytes: int, allow_empty: bool = False) -> str:
    """A value, note, message or summary: UTF-8 text within the size limit."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be text, not {type(value).__name__}")
    size = _utf8_size(field, value)
    if not allow_empty and not value.strip():
        raise InvalidInput(f"{field} must not be empty")
    if size > max_bytes:
        raise InvalidInput(f"{field} is {size} bytes of UTF-8; the limit is {max_bytes}")
    if "\x00" in value:
        raise InvalidInput(f"{field} contains a NUL character")
    return value


MAX_DAYS = 36_500
"""Longest period in days anything may be set to (a TTL, a grace period): 100 years.

Unbounded day counts overflow date arithmetic (a TTL of 10**6 days reaches before year 1) and
SQLite's 64-bit integers; past a century a TTL means "never", which pinning says better.
"""

MAX_LIMIT = 1_000_000
"""Largest ``limit`` a listing accepts."""


def _short(value: Any) -> str:
    """A number for an error message, cut short when it is enormous."""
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:12]}...({len(text)} digits)"


def confidence(value: Any) -> float:
    """A confidence between 0 and 1."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"confidence must be a number from 0 to 1, not {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidInput(f"confidence must be from 0 to 1 (got {_short(value)})") from None
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise InvalidInput(f"confidence must be from 0 to 1 (got {_short(value)})")
    return number


def ttl_days(value: Any) -> int | None:
    """A per-entry TTL override in days (None: the kind's TTL), at most :data:`MAX_DAYS`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_DAYS:
        raise InvalidInput(
            f"ttl_days must be a whole number of days from 1 to {MAX_DAYS} "
            f"(got {_short(value)}); pin the entry to keep it forever"
        )
    return value


def limit(value: Any) -> int:
    """How many rows a listing returns: a whole number from 1 to :data:`MAX_LIMIT`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidInput(
            f"limit must be a whole number from 1 to {MAX_LIMIT} (got {_short(value)})"
        )
    return value


def choice(field: str, value: Any, allowed: tuple[str, ...]) -> str:
    """One of a fixed set of words."""
    if value not in allowed:
        raise InvalidInput(f"{field} must be one of {', '.join(allowed)} (got {value!r})")
    return value


def kind(value: Any) -> str:
    return choice("kind", value, KINDS)


def role(value: Any) -> str:
    return choice("role", value, ROLES)


def episode_status(value: Any) -> str:
    return choice("status", value, EPISODE_STATUSES)
