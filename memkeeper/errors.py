"""memkeeper's own exceptions.

The library raises only these (or lets programming errors through); the CLI is the one place
that turns them into a one-line message and an exit code. Each class carries the exit code the
CLI uses (``exit_code``), so the mapping is written down once, here; the documentation's
exit-code reference lists every code.

Messages never contain secrets, and never contain stored memory values: they name the culprit
(file, key, line, id) and say what is wrong.
"""

from __future__ import annotations

# Documented exit codes (docs/reference/exit-codes.md).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_JOB_FAILED = 4
EXIT_DATA = 65  # EX_DATAERR: bad input data (import file, value, key)
EXIT_NO_INPUT = 66  # EX_NOINPUT: an input file is missing or unreadable
EXIT_CANT_CREATE = 73  # EX_CANTCREAT: a file or directory cannot be created or written
EXIT_DATABASE = 74  # EX_IOERR: the database file is unusable (corrupt, foreign, newer)
EXIT_BUSY = 75  # EX_TEMPFAIL: another memkeeper holds the lock; try again later
EXIT_NO_PERMISSION = 77  # EX_NOPERM: the database server refused memkeeper's credentials
EXIT_CONFIG = 78  # EX_CONFIG: the configuration is invalid


class MemkeeperError(Exception):
    """Base class of every error memkeeper raises on purpose."""

    exit_code = EXIT_ERROR


class InvalidInput(MemkeeperError):
    """An argument or a record is not acceptable (bad key, oversized value, bad kind...)."""

    exit_code = EXIT_DATA


class ErasedValueRefused(InvalidInput):
    """A write carries a value the user asked to forget (memkeeper.storage.erased_values)."""


class InvalidTime(InvalidInput):
    """A time could not be parsed or has no timezone."""


class NotFound(MemkeeperError):
    """The memory, run or record asked for does not exist."""

    exit_code = EXIT_NOT_FOUND


class ConfigError(MemkeeperError):
    """The configuration file is invalid; the message names the file and the key."""

    exit_code = EXIT_CONFIG


class DatabaseError(MemkeeperError):
    """A database file cannot be used: not SQLite, corrupt, foreign, or from a newer memkeeper."""

    exit_code = EXIT_DATABASE


class ColdStorageChanged(DatabaseError):
    """The cold-storage file this process opened was deleted or replaced while it ran.

    Nothing is moved into it (whatever went there would be in no file anyone can open):
    the entries stay hot until the process is restarted and opens the file now at the path.
    """


class StorageUnwritable(MemkeeperError):
    """The database file or its directory cannot be created or written."""

    exit_code = EXIT_CANT_CREATE


class StorageFull(StorageUnwritable):
    """The disk holding a database file is full; the write was rolled back."""


class TargetNotEmpty(StorageUnwritable):
    """``migrate-to`` was pointed at a memkeeper schema that already holds rows; nothing was
    written (a copy goes into an empty schema only, so nothing is merged or overwritten)."""


class MigrationMismatch(DatabaseError):
    """A copy to another database did not match its source (counts, explanations); it was
    rolled back."""


class WriteConflict(MemkeeperError):
    """Two writers raced past memkeeper's checks; this write was rolled back. Retry it."""

    exit_code = EXIT_BUSY


class ImportFileError(MemkeeperError):
    """An import file is malformed; the message names the line or key at fault."""

    exit_code = EXIT_DATA


class InputFileMissing(MemkeeperError):
    """An input file does not exist or cannot be read."""

    exit_code = EXIT_NO_INPUT


class DatabaseMissing(InputFileMissing):
    """A read was asked of a memory database that does not exist (nothing is created)."""


class LockBusy(MemkeeperError):
    """Another memkeeper process holds the lock we need, and waiting did not help."""

    exit_code = EXIT_BUSY


class LockLost(LockBusy):
    """A job's lock was lost (its session ended: a pause past the takeover time, a partition,
    a server restart) and another holder may have taken it: the job's transaction rolled back."""


class PoolerDetected(MemkeeperError):
    """A session-scoped lock did not stay on its session: the connection goes through a
    transaction-mode pooler (PgBouncer), which cannot hold a service's leadership."""

    exit_code = EXIT_CONFIG


class DriverMissing(MemkeeperError):
    """The database named is on PostgreSQL and this install lacks its driver, the optional
    extra ``memkeeper[postgres]``; the message says how to install it."""

    exit_code = EXIT_CONFIG


class DatabaseUnreachable(MemkeeperError):
    """The database server did not answer within the connect timeout (or refused the connection)."""

    exit_code = EXIT_BUSY


class AuthenticationFailed(MemkeeperError):
    """The database server refused the credentials (wrong password, unknown user, no access)."""

    exit_code = EXIT_NO_PERMISSION


class JobFailed(MemkeeperError):
    """One or more maintenance jobs failed in a run."""

    exit_code = EXIT_JOB_FAILED


class NotOnThisBackend(MemkeeperError):
    """A command that does not apply to the database chosen (``backup`` on PostgreSQL):
    the message names what to use instead."""

    exit_code = EXIT_USAGE


class UnknownJob(InvalidInput):
    """A job name that is not registered."""

    exit_code = EXIT_USAGE
