"""Open a store's storage from the resolved settings: the two SQLite files, or PostgreSQL.

``settings.url`` (``--db postgresql://…``, ``MEMKEEPER_DB``, ``[database] url``) selects
PostgreSQL; otherwise the hot file and cold file of :func:`memkeeper.settings.resolve`. The
PostgreSQL backend (and psycopg) is imported only when a URL names it; without the driver
installed (the extra ``memkeeper[postgres]``) that is :class:`~memkeeper.errors.DriverMissing`,
which names the extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memkeeper.storage.base import Storage
from memkeeper.storage.sqlite.files import SqliteStorage
from memkeeper.storage.sqlite.opening import Tuning

if TYPE_CHECKING:
    from memkeeper.settings import Settings


def open_storage(settings: Settings, *, create: bool) -> Storage:
    """The storage ``settings`` name; with ``create`` false a missing database is an error."""
    database = settings.config.database
    if settings.url is not None:
        from memkeeper.storage.postgres.driver import driver_needed
        from memkeeper.storage.postgres.url import parse_url

        url = parse_url(settings.url)
        with driver_needed(str(url)):
            from memkeeper.storage.postgres.storage import PostgresStorage

            return PostgresStorage(
                url,
                create=create,
                connect_timeout=database.connect_timeout_s,
                synchronous=database.synchronous,
                pool_size=database.pool_size,
            )
    existed = settings.hot_path.exists()
    storage = SqliteStorage(
        settings.hot_path,
        settings.cold_path,
        busy_timeout_ms=database.busy_timeout_ms,
        create=create,
        tuning=Tuning(
            busy_timeout_ms=database.busy_timeout_ms,
            synchronous=database.synchronous,
            cache_mb=database.cache_mb,
            mmap_mb=database.mmap_mb,
        ),
    )
    storage.created = not existed
    return storage
