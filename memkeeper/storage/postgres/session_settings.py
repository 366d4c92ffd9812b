"""Session settings of a pooled PostgreSQL connection, set and reset in one round trip.

A job's limits (``idle_in_transaction_session_timeout``, ...) belong to the thread holding
its lock; :class:`~memkeeper.storage.postgres.leases.ConnectionLease` gives each leased
session the settings of the thread that borrows it, through :func:`apply_settings`."""

from __future__ import annotations

import psycopg
from psycopg import sql

from memkeeper.logs import get_logger

log = get_logger(__name__)


def apply_settings(
    raw: psycopg.Connection, settings: dict[str, str | None], held: dict[str, str | None]
) -> dict[str, str | None]:
    """Set (or, for None, reset) session settings on a leased connection, best effort, in
    one round trip; what the session holds after, from what it ``held`` before (a setting
    that failed: None, not known)."""
    after = dict(held)
    parts, values = [], []
    for name, value in settings.items():
        after.pop(name, None)
        if value is None:
            parts.append(sql.SQL("RESET {}").format(sql.Identifier(name)))
        else:
            parts.append(sql.SQL("SELECT set_config(%s, %s, false)"))
            values += [name, value]
            after[name] = value
    if not parts or raw.broken or raw.closed:
        return after
    try:
        psycopg.ClientCursor(raw).execute(sql.SQL("; ").join(parts), values)
    except psycopg.Error as exc:
        log.debug("could not apply a session setting", names=list(settings), error=str(exc))
        after.update(dict.fromkeys(settings))
    return after
