"""Reading the change log: its rows filtered by memory, run, user, namespace or action.

Writing rows is :mod:`memkeeper.storage.changelog`'s (in each change's own transaction);
turning rows into :class:`~memkeeper.records.Change` values and explaining them is
:mod:`memkeeper.audit`'s. This module holds the one statement they read through.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memkeeper.storage.changelog import CHANGE_FILTERS
from memkeeper.storage.handle import Handle


def select_changes(
    db: Handle,
    filters: Mapping[str, object],
    *,
    limit: int | None = None,
    newest_first: bool = False,
) -> list[dict[str, Any]]:
    """Change-log rows matching every filter whose value is not None, in id order.

    ``filters`` maps columns of :data:`~memkeeper.storage.changelog.CHANGE_FILTERS` to
    values (each column has an index); other keys are the caller's to refuse first, they
    are ignored here. Oldest first unless ``newest_first``; at most ``limit`` rows.
    """
    where = [f"{column} = ?" for column in CHANGE_FILTERS if filters.get(column) is not None]
    params: list[object] = [filters[c] for c in CHANGE_FILTERS if filters.get(c) is not None]
    sql = "SELECT * FROM changes"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY id " + ("DESC" if newest_first else "ASC")
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return list(db.query(sql, params))


def changes_by_actor_after(db: Handle, after: int, actor_prefix: str) -> list[tuple]:
    """(id, at, action) of the rows after change ``after`` whose actor starts with
    ``actor_prefix`` (``agent:``), oldest first."""
    pattern = actor_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    return [
        tuple(row)
        for row in db.execute(
            "SELECT id, at, action FROM changes WHERE id > ? AND actor LIKE ? ESCAPE '\\'"
            " ORDER BY id",
            [after, pattern],
        ).fetchall()
    ]
