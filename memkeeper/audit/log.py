"""Reading the change log: the rows about a memory, a run, a user or an action."""

from __future__ import annotations

from collections.abc import Mapping

from memkeeper.records import Change
from memkeeper.storage.changelog import CHANGE_FILTERS
from memkeeper.storage.connection import Database


def query_changes(
    db: Database,
    filters: Mapping[str, str | None] | None = None,
    *,
    limit: int | None = None,
    newest_first: bool = False,
) -> list[Change]:
    """Change-log rows matching every given filter (None: any), oldest first unless asked.

    ``filters`` maps columns of :data:`~memkeeper.storage.changelog.CHANGE_FILTERS` to values.
    """
    filters = dict(filters or {})
    unknown = sorted(set(filters) - set(CHANGE_FILTERS))
    if unknown:
        raise ValueError(f"not a change-log filter: {', '.join(unknown)}")
    where = [f"{column} = ?" for column in CHANGE_FILTERS if filters.get(column) is not None]
    params: list[object] = [filters[c] for c in CHANGE_FILTERS if filters.get(c) is not None]
    sql = "SELECT * FROM changes"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY id " + ("DESC" if newest_first else "ASC")
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [Change.from_row(row) for row in db.query(sql, params)]
