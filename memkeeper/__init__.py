"""memkeeper — the memory layer and maintenance service behind AI agents.

Agents write facts, preferences, notes, episodes and conversation histories through
:class:`MemoryStore`; the maintenance jobs (``memkeeper run`` / ``run-once``, or
:func:`run_once`) keep that memory healthy on a schedule.

Every exception of :mod:`memkeeper.errors` is importable from here
(``from memkeeper import InvalidInput``), as the README promises (tests/test_readme.py).

Importing this package loads neither the scheduler (APScheduler) nor the LLM SDK (zhipuai,
httpx): they load only where they are used. The store, the runner and the records load at
their first use too, so a command (or a program) that needs none of them starts fast.
"""

from typing import TYPE_CHECKING, Any

from memkeeper.errors import (
    AuthenticationFailed,
    ColdStorageChanged,
    ConfigError,
    DatabaseError,
    DatabaseMissing,
    DatabaseUnreachable,
    DriverMissing,
    ErasedValueRefused,
    ImportFileError,
    InputFileMissing,
    InvalidInput,
    InvalidTime,
    JobFailed,
    LockBusy,
    LockLost,
    MemkeeperError,
    MigrationMismatch,
    NotFound,
    NotOnThisBackend,
    PoolerDetected,
    StorageFull,
    StorageUnwritable,
    TargetNotEmpty,
    UnknownJob,
    WriteConflict,
)

if TYPE_CHECKING:
    from memkeeper.maintenance.runner import RunReport, run_once
    from memkeeper.records import Change, Context, Episode, JobRun, Memory, Message, SearchHit
    from memkeeper.store import MemoryStore

_LAZY = {
    "RunReport": "memkeeper.maintenance.runner",
    "run_once": "memkeeper.maintenance.runner",
    "MemoryStore": "memkeeper.store",
    **dict.fromkeys(
        ("Change", "Context", "Episode", "JobRun", "Memory", "Message", "SearchHit"),
        "memkeeper.records",
    ),
}
"""Names loaded at first use (PEP 562): ``import memkeeper`` (and so every command of the
CLI) stays cheap; ``from memkeeper import MemoryStore`` works as always."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memkeeper' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__version__ = "0.1.0"

__all__ = [
    "AuthenticationFailed",
    "Change",
    "ColdStorageChanged",
    "ConfigError",
    "Context",
    "DatabaseError",
    "DatabaseMissing",
    "DatabaseUnreachable",
    "DriverMissing",
    "Episode",
    "ErasedValueRefused",
    "ImportFileError",
    "InputFileMissing",
    "InvalidInput",
    "InvalidTime",
    "JobFailed",
    "JobRun",
    "LockBusy",
    "LockLost",
    "MemkeeperError",
    "Memory",
    "MemoryStore",
    "Message",
    "MigrationMismatch",
    "NotFound",
    "NotOnThisBackend",
    "PoolerDetected",
    "RunReport",
    "SearchHit",
    "StorageFull",
    "StorageUnwritable",
    "TargetNotEmpty",
    "UnknownJob",
    "WriteConflict",
    "__version__",
    "run_once",
]
