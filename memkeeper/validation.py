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


def confidence(value: Any) -> float:
    """A confidence between 0 and 1."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"confidence must be a number from 0 to 1, not {type(value).__name__}")
    number = float(value)
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise InvalidInput(f"confidence must be from 0 to 1 (got {value})")
    return number


def ttl_days(value: Any) -> int | None:
    """A per-entry TTL override in days (None: the kind's TTL)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidInput(f"ttl_days must be a whole number of days above 0 (got {value!r})")
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
