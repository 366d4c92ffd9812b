"""Reading the change log: the rows about a memory, a run, a user or an action."""

from __future__ import annotations

from collections.abc import Mapping

from memkeeper.records import Change
from memkeeper.storage.change_reads import select_changes
from memkeeper.storage.changelog import CHANGE_FILTERS
from memkeeper.storage.handle import Handle


def query_changes(
    db: Handle,
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
    rows = select_changes(db, filters, limit=limit, newest_first=newest_first)
    return [Change.from_row(row) for row in rows]
