"""The one source of "now" for memkeeper, and the one place that formats and parses times.

Every time memkeeper stores or compares is timezone-aware UTC. Nothing asks SQLite for the
current time (``datetime('now')`` cannot be frozen by freezegun and would disagree with the
``--now`` flag); callers pass "now" in, obtained from a :class:`Clock`.

Times are stored as fixed-width ISO-8601 text (``2026-11-30T06:58:06.123456+00:00``) so that
string order is time order and indexes on time columns work with plain ``<`` comparisons.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo

from memkeeper.errors import InvalidTime

Clock = Callable[[], datetime]
"""A zero-argument callable returning the current time as an aware UTC datetime."""


def system_now() -> datetime:
    """The real current time in UTC (freezegun freezes this)."""
    return datetime.now(UTC)


def fixed(moment: datetime) -> Clock:
    """A clock that always answers ``moment`` — the ``--now`` flag and what-if previews."""
    moment = ensure_utc(moment)
    return lambda: moment


def ensure_utc(moment: datetime) -> datetime:
    """Return ``moment`` in UTC; a naive datetime is refused rather than guessed at."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidTime(f"time {moment.isoformat()} has no timezone; memkeeper needs aware times")
    return moment.astimezone(UTC)


def to_db(moment: datetime) -> str:
    """Format an aware datetime as the fixed-width UTC text memkeeper stores."""
    return ensure_utc(moment).isoformat(timespec="microseconds")


def from_db(text: str | None) -> datetime | None:
    """Parse a stored time back into an aware UTC datetime (None stays None)."""
    if text is None:
        return None
    return datetime.fromisoformat(text).astimezone(UTC)


USER_TIME_RANGE = (datetime(1970, 1, 1, tzinfo=UTC), datetime(3000, 1, 1, tzinfo=UTC))
"""Times a person may give (``--now``, import files): from 1970 up to (not including) 3000.

Far enough either way for any what-if; near enough that adding a TTL or a schedule to it
cannot overflow Python's datetime (which ends at 9999-12-31).
"""

USER_TIME_RANGE_TEXT = "memkeeper takes times from 1970-01-01 to 2999-12-31"
"""How :data:`USER_TIME_RANGE` reads in an error message."""


def parse_time(text: str, *, naive: tzinfo | None, what: str = "") -> datetime:
    """Parse an ISO-8601 time someone wrote (``--now``, an import file) into aware UTC.

    ``Z`` and offsets are honoured. A time without an offset is taken in ``naive`` (UTC for
    ``--now``; the import's ``--timezone`` for agent notes), or refused when ``naive`` is
    None (JSON Lines exports always carry one). Empty text and times outside
    :data:`USER_TIME_RANGE` raise InvalidTime naming the value (and ``what``, if given).
    """
    label = f"{what} " if what else ""
    raw = text.strip()
    shown = repr(text if len(text) <= 64 else text[:64] + "…")
    if not raw:
        raise InvalidTime(
            f"empty time {label}{shown}; expected ISO-8601 such as 2027-03-01 or "
            "2027-03-01T12:00:00Z"
        )
    try:
        parsed = datetime.fromisoformat(raw.replace("z", "Z"))
    except ValueError:
        raise InvalidTime(
            f"{label}{shown} is not an ISO-8601 time; expected e.g. 2027-03-01 or "
            "2027-03-01T12:00:00Z"
        ) from None
    if parsed.tzinfo is None:
        if naive is None:
            raise InvalidTime(f"{what or 'the time'} has no timezone")
        parsed = parsed.replace(tzinfo=naive)
    utc = within_user_range(parsed)
    if utc is None:
        raise InvalidTime(f"{label}{shown} is out of range: {USER_TIME_RANGE_TEXT}")
    return utc


def parse_user_time(text: str) -> datetime:
    """A time typed by a person (``--now``, ``MEMKEEPER_NOW``): no offset means UTC
    (documented: memkeeper never guesses a local zone)."""
    return parse_time(text, naive=UTC)


def within_user_range(moment: datetime) -> datetime | None:
    """``moment`` (aware) in UTC when it lies in :data:`USER_TIME_RANGE`, else None."""
    earliest, end = USER_TIME_RANGE
    try:
        utc = moment.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00, 9999-12-31T23:59-01:00
        return None
    return utc if earliest <= utc < end else None


def days_between(earlier: datetime, later: datetime) -> float:
    """Elapsed days from ``earlier`` to ``later`` (fractional, never negative)."""
    return max((later - earlier) / timedelta(days=1), 0.0)


MICROS_PER_DAY = 86_400_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def micros(moment: datetime) -> int:
    """An aware time as whole microseconds since 1970 (UTC): exact, so a difference of two
    divided by :data:`MICROS_PER_DAY` is :func:`days_between`'s figure to the last bit (both
    divide one whole number of microseconds by another)."""
    return (moment - _EPOCH) // _MICROSECOND


@functools.lru_cache(maxsize=65_536)
def stored_micros(text: str) -> int:
    """A stored time (:func:`to_db`'s text) as :func:`micros`, parsed once per process per
    text: search reads each candidate's last use at every query, and most stay as they were
    between queries (about 0.1 ms of a search of 500 entries)."""
    moment = from_db(text)
    assert moment is not None
    return micros(moment)
