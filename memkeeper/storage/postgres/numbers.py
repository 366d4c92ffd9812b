"""Numbers on PostgreSQL as SQLite gives them: ``numeric`` results as ``int`` or ``float``.

``sum`` of a bigint or ``avg`` come back from PostgreSQL as ``numeric``, which psycopg loads
as ``Decimal``; memkeeper's code and its JSON output expect SQLite's numbers. Every
connection a store opens is :func:`prepared` to load them so.
"""

from __future__ import annotations

import psycopg
from psycopg.adapt import Loader


class _NumberLoader(Loader):
    """``numeric`` as ``int`` when whole, else ``float`` (SQLite's types, JSON-friendly)."""

    def load(self, data: bytes | bytearray | memoryview) -> int | float:
        text = bytes(data).decode("ascii")
        if "." not in text and "e" not in text.lower() and text not in ("NaN", "Infinity"):
            return int(text)
        return float(text)


_NUMERIC_OID = 1700  # pg_type's numeric


def prepared(raw: psycopg.Connection) -> psycopg.Connection:
    """``raw`` loading ``numeric`` as SQLite's numbers (once per connection: a store's
    pool does it when it opens one)."""
    if raw.adapters.get_loader(_NUMERIC_OID, psycopg.pq.Format.TEXT) is not _NumberLoader:
        raw.adapters.register_loader("numeric", _NumberLoader)
    return raw
