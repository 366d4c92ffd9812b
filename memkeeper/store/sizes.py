"""How big the two files are, what each table holds, and when ``status`` should warn.

Part of ``memkeeper status`` (:func:`memkeeper.store.inspection.status`): for each file its
size and its write-ahead log's, its pages (total, free, auto-vacuum mode) and each table's
rows and bytes; and a warning when the change log or a WAL outgrows ``[status]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memkeeper.config.retention import StatusSection
from memkeeper.storage.base import Storage
from memkeeper.storage.sqlite.connection import Database
from memkeeper.storage.sqlite.space import file_sizes, space_of, table_stats

MIB = 1024 * 1024


def _file(db: Database | None, path: Path) -> dict[str, Any]:
    return {
        "path": str(path),
        "bytes": file_sizes(path),
        "pages": space_of(db) if db is not None else None,
        "tables": table_stats(db) if db is not None else {},
    }


def storage_status(storage: Storage) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    """(``database``, ``files``) of ``status`` (the caller holds the storage lock).

    On SQLite ``database`` is None (the files say it all). On PostgreSQL it is the server,
    its extensions, the schema and its version and the masked URL, and ``files`` has one
    entry, ``hot``: the database, every table (``cold_memories`` among them) with its rows
    and bytes, their total as its size.
    """
    if storage.hot.dialect == "postgres":
        from memkeeper.storage.postgres.status import store_status  # psycopg: an extra

        return store_status(storage.hot, storage.url)  # type: ignore[arg-type, attr-defined]
    return None, files_status(storage)


def files_status(storage: Storage) -> dict[str, dict[str, Any]]:
    """Both files (the caller holds the storage lock); a missing cold file has no tables."""
    return {
        "hot": _file(storage.hot, storage.hot_path),
        "cold": _file(storage.cold(create=False), storage.cold_path),
    }


def _mib(size: int) -> str:
    return f"{size / MIB:.1f} MiB"


def size_warnings(files: dict[str, dict[str, Any]], limits: StatusSection) -> list[str]:
    """What has grown past ``[status]``: the change log (rows or bytes), a WAL."""
    warnings = []
    changes = files["hot"]["tables"].get("changes") or {}
    rows, size = changes.get("rows") or 0, changes.get("bytes") or 0
    advice = (
        "check that the retain job runs (memkeeper status, [jobs.retain]) or lower "
        "[jobs.retain] full_images_days"
    )
    if limits.warn_changes_rows and rows > limits.warn_changes_rows:
        warnings.append(
            f"the change log holds {rows} rows, more than [status] warn_changes_rows "
            f"({limits.warn_changes_rows}): {advice}"
        )
    if limits.warn_changes_mb and size > limits.warn_changes_mb * MIB:
        warnings.append(
            f"the change log takes {_mib(size)}, more than [status] warn_changes_mb "
            f"({limits.warn_changes_mb} MiB): {advice}"
        )
    for file in files.values():
        wal = file["bytes"].get("wal") or 0
        if limits.warn_wal_mb and wal > limits.warn_wal_mb * MIB:
            warnings.append(
                f"the write-ahead log of {file['path']} is {_mib(wal)}, more than [status] "
                f"warn_wal_mb ({limits.warn_wal_mb} MiB): a process holding a read "
                "transaction open keeps checkpoints from emptying it"
            )
    return warnings
