"""The columns of a memory image, shared by both backends.

An image (what the change log stores before and after each change, what export writes and
import checks) is the row of ``memories`` or ``cold_memories`` as a dict, in storage order.
Both the SQLite schema (:mod:`memkeeper.storage.sqlite.schema`) and the PostgreSQL one
(:mod:`memkeeper.storage.postgres.ddl`) hold these columns, so the images are the same on both.
"""

from __future__ import annotations

# The columns of a memory image, in storage order. Hot rows have all but the cold-only ones.
MEMORY_COLUMNS = (
    "id",
    "user_id",
    "namespace",
    "kind",
    "key",
    "value",
    "source",
    "confidence",
    "state",
    "pinned",
    "ttl_days",
    "created_at",
    "updated_at",
    "last_accessed_at",
    "access_count",
    "state_since",
    "last_used_at",
)
COLD_ONLY_COLUMNS = ("cold_reason", "retired_at")
COLD_COLUMNS = MEMORY_COLUMNS + COLD_ONLY_COLUMNS
