"""Change-log retention's statements on PostgreSQL (:mod:`memkeeper.storage.retention`).

SQLite builds a thinned image with ``json_object`` / ``json_set`` and reads a field with
``json_extract``; PostgreSQL spells the same with ``jsonb``: ``jsonb_build_object`` of the
kept fields (``->`` keeps each field's JSON type, so a confidence stays a number and a missing
field becomes ``null`` as in SQLite's image), ``->>`` to test a field. The images are ``text``
columns on both backends, so the built value is stored as text; its key order is jsonb's,
which nothing reads (images are parsed, never compared as text).
"""

from __future__ import annotations

from collections.abc import Sequence

IS_THINNED = "(coalesce(after, before)::jsonb ->> 'thinned')"
"""SQL: the ``thinned`` flag of a change-log row's images (NULL: not thinned)."""


def thin(column: str, kept: Sequence[str], thinned: str) -> str:
    """SQL for ``column``'s thinned image (NULL stays NULL), as retention's ``_thin``."""
    members = [f"'{name}', {column}::jsonb -> '{name}'" for name in kept]
    members.append(f"'{thinned}', 'true'::jsonb")
    if column == "after":  # explain prints the value a creation created, nothing else's
        value = "CASE WHEN action = 'create' THEN after::jsonb -> 'value' END"
        image = (
            f"jsonb_build_object({', '.join(members)})"
            f" || CASE WHEN action = 'create' THEN jsonb_build_object('value', {value})"
            " ELSE '{}'::jsonb END"
        )
    else:
        image = f"jsonb_build_object({', '.join(members)})"
    return f"CASE WHEN {column} IS NULL THEN NULL ELSE ({image})::text END"


THINNED_THROUGH = (
    "SELECT max((counts::jsonb #>> '{stats,thinned_through}')::bigint) FROM job_runs"
    " WHERE job = 'retain' AND counts IS NOT NULL"
)
"""The highest ``thinned_through`` of the ``retain`` runs, compared as a number (SQLite's
``json_extract`` returns an integer; ``->>`` returns text, whose max would be "9" > "10")."""
