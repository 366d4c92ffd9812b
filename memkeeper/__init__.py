"""memkeeper — the memory layer and maintenance service behind AI agents.

Agents write facts, preferences, notes, episodes and conversation histories through
:class:`MemoryStore`; the maintenance jobs (``memkeeper run`` / ``run-once``, or
:func:`run_once`) keep that memory healthy on a schedule.

Every exception of :mod:`memkeeper.errors` is importable from here
(``from memkeeper import InvalidInput``), as the README promises (tests/test_readme.py).

Importing this package loads neither the scheduler (APScheduler) nor the LLM SDK (zhipuai,
httpx): they load only where they are used.
"""

from memkeeper.errors import (
    ColdStorageChanged,
    ConfigError,
    DatabaseError,
    DatabaseMissing,
    ImportFileError,
    InputFileMissing,
    InvalidInput,
    InvalidTime,
    JobFailed,
    LockBusy,
    MemkeeperError,
    NotFound,
    StorageFull,
    StorageUnwritable,
    UnknownJob,
    WriteConflict,
)
from memkeeper.maintenance.runner import RunReport, run_once
from memkeeper.records import Change, Context, Episode, JobRun, Memory, Message, SearchHit
from memkeeper.store import MemoryStore

__version__ = "0.1.0"

__all__ = [
    "Change",
    "ColdStorageChanged",
    "ConfigError",
    "Context",
    "DatabaseError",
    "DatabaseMissing",
    "Episode",
    "ImportFileError",
    "InputFileMissing",
    "InvalidInput",
    "InvalidTime",
    "JobFailed",
    "JobRun",
    "LockBusy",
    "MemkeeperError",
    "Memory",
    "MemoryStore",
    "Message",
    "NotFound",
    "RunReport",
    "SearchHit",
    "StorageFull",
    "StorageUnwritable",
    "UnknownJob",
    "WriteConflict",
    "__version__",
    "run_once",
]
