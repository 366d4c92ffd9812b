"""The configuration of what keeps the database bounded: ``[jobs.retain]`` and ``[status]``.

Part of the schema in :mod:`memkeeper.config` (kept apart to keep modules small). The policy
they configure is documented in the README ("Retention") and in ``jobs/retain.py``.
"""

from __future__ import annotations

from pydantic import Field

from memkeeper.config.base import SCHEDULE_DOC, JobSection, Section
from memkeeper.validation import MAX_DAYS


class RetainJob(JobSection):
    schedule: str = Field("45 4 * * 0", description=SCHEDULE_DOC)
    full_images_days: int = Field(
        365,
        gt=0,
        le=MAX_DAYS,
        description="Days a change-log row keeps the entry's whole before/after images; older "
        "rows are thinned to what explain prints (erasure tombstones are kept as they are).",
    )
    undo_days: int = Field(
        0,
        ge=0,
        le=MAX_DAYS,
        description="Days a run can be undone: its rows keep their whole images at least this "
        "long; once retain thinned them, undo refuses the run. 0: the same as "
        "full_images_days.",
    )
    cold_purge_days: int = Field(
        0,
        ge=0,
        le=MAX_DAYS,
        description="Delete entries retired to cold storage more than this many days ago "
        "(each deletion logged); 0 keeps cold storage forever.",
    )
    vacuum_pages: int = Field(
        25600,
        ge=0,
        le=100_000_000,
        description="Most free pages returned to the file system per file and run "
        "(incremental vacuum, in short steps; 25600 pages = 100 MiB at 4 KiB); 0: never.",
    )

    @property
    def undo_window_days(self) -> int:
        """How long undo is offered, in days."""
        return self.undo_days or self.full_images_days


class StatusSection(Section):
    warn_changes_rows: int = Field(
        5_000_000,
        ge=0,
        le=1_000_000_000_000,
        description="memkeeper status warns when the change log holds more rows; 0: never.",
    )
    warn_changes_mb: int = Field(
        1024,
        ge=0,
        le=10_000_000,
        description="...or takes more than this many MiB (rows and indexes); 0: never.",
    )
    warn_wal_mb: int = Field(
        256,
        ge=0,
        le=10_000_000,
        description="...or when a file's write-ahead log is larger than this, in MiB; 0: never.",
    )
